package endpoints

// Test machinery for the scenario tests.
//
// Conventions (the set-up of docs/acceptance-cases.md, as in Felix's
// endpoint_mgr_test.go, adapted to one inet table):
//   - workload prefixes "cali" and "tap"; default rp_filter "1";
//   - host interfaces eth0 (10.0.240.10, 2001:db8::10.0.240.10) and lo
//     (127.0.1.1, ::1), both up, after hostIfaces();
//   - endpoint marks on (Felix's tests run with kube-IPVS support), floating
//     IPs on, IPv6 on, ARP suppression on;
//   - workload IDs k8s/pod-11/endpoint-id-11 and friends, ordered as in
//     Felix's wlIdsAscending: pod-10a < pod-11 < pod-11a.

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
	"github.com/nftep/nftep/sysctl"
)

type harness struct {
	t       testing.TB
	m       *Manager
	table   *nft.Model
	arp     *nft.Model
	routes  *fakeRoutes
	sysFake *sysctl.Fake
	cb      *recordingCallbacks
	// statuses is the current status per endpoint, as the sink saw it
	// ("wl k8s/pod-11/endpoint-id-11", "hep id1"); a removal deletes.
	statuses map[string]string
	// reports are the status messages of the last step, in order.
	reports []string
	renders *countingRenderer
}

type harnessOpt func(*Config, *render.Config)

func noEndpointMarks(_ *Config, r *render.Config) { r.EndpointMarks = false }
func noFloatingIPs(c *Config, _ *render.Config)   { c.FloatingIPs = false }

func newHarness(t testing.TB, opts ...harnessOpt) *harness {
	t.Helper()
	rcfg, err := render.ParseConfig(map[string]string{
		render.KeyInterfacePrefix: "cali,tap",
		render.KeyEndpointMarks:   "true",
	})
	if err != nil {
		t.Fatalf("render config: %v", err)
	}
	cfg := DefaultConfig()
	cfg.FloatingIPs = true
	for _, o := range opts {
		o(&cfg, &rcfg)
	}
	h := &harness{
		t:        t,
		table:    nft.NewModel(nft.FamilyINet, "nftep"),
		arp:      nft.NewModel(nft.FamilyARP, "nftep"),
		routes:   newFakeRoutes(),
		sysFake:  sysctl.NewFake(),
		cb:       &recordingCallbacks{},
		statuses: map[string]string{},
	}
	sys := sysctl.NewInterfaces(h.sysFake, sysctl.Options{IPv4: true, IPv6: cfg.IPv6, DefaultRPFilter: "1"})
	h.m = New(cfg, Deps{
		Render:    rcfg,
		Table:     h.table,
		ARP:       h.arp,
		Routes:    h.routes,
		Sysctls:   sys,
		Callbacks: h.cb,
		Status:    h.onStatus,
	})
	h.renders = &countingRenderer{next: h.m.r}
	h.m.r = h.renders
	return h
}

// step feeds msgs to the manager and runs one batch.
func (h *harness) step(msgs ...any) {
	h.t.Helper()
	h.reports = nil
	h.cb.calls = nil
	h.renders.reset()
	for _, msg := range msgs {
		h.m.OnUpdate(msg)
	}
	if err := h.m.ResolveUpdateBatch(); err != nil {
		h.t.Fatalf("ResolveUpdateBatch: %v", err)
	}
	if err := h.m.CompleteDeferredWork(); err != nil {
		h.t.Fatalf("CompleteDeferredWork: %v", err)
	}
}

func (h *harness) onStatus(msg any) {
	var key, status string
	switch msg := msg.(type) {
	case *proto.WorkloadEndpointStatusUpdate:
		if msg.GetEndpoint() == nil {
			h.t.Errorf("workload status %v without the endpoint proto", msg)
		}
		key, status = "wl "+wlIDOf(msg.GetId()).String(), msg.GetStatus().GetStatus()
	case *proto.WorkloadEndpointStatusRemove:
		key = "wl " + wlIDOf(msg.GetId()).String()
	case *proto.HostEndpointStatusUpdate:
		key, status = "hep "+msg.GetId().GetEndpointId(), msg.GetStatus().GetStatus()
	case *proto.HostEndpointStatusRemove:
		key = "hep " + msg.GetId().GetEndpointId()
	default:
		h.t.Fatalf("unexpected status message %T", msg)
	}
	if status == "" {
		delete(h.statuses, key)
		h.reports = append(h.reports, key+" removed")
	} else {
		h.statuses[key] = status
		h.reports = append(h.reports, key+" "+status)
	}
}

// wantStatuses checks the current status of every endpoint.
func (h *harness) wantStatuses(want map[string]string) {
	h.t.Helper()
	if want == nil {
		want = map[string]string{}
	}
	if diff := cmp.Diff(want, h.statuses); diff != "" {
		h.t.Errorf("statuses (-want +got):\n%s", diff)
	}
}

// wantReports checks the status messages of the last step.
func (h *harness) wantReports(want ...string) {
	h.t.Helper()
	if diff := cmp.Diff(want, h.reports, cmpEmpty); diff != "" {
		h.t.Errorf("status reports of the step (-want +got):\n%s", diff)
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })

// chain returns the chain called name, failing the test if it is missing.
func (h *harness) chain(name string) *nft.Chain {
	h.t.Helper()
	c := h.table.Chain(name)
	if c == nil {
		h.t.Fatalf("chain %q missing; chains: %v", name, h.table.ChainNames())
	}
	return c
}

// wantNoChain fails the test if any of names is in the table.
func (h *harness) wantNoChain(names ...string) {
	h.t.Helper()
	for _, n := range names {
		if h.table.Chain(n) != nil {
			h.t.Errorf("chain %q present, want none", n)
		}
	}
}

// endpointChains lists the per-endpoint and group chains of the table (the
// static ones filtered out), sorted.
func (h *harness) endpointChains() []string {
	static := map[string]bool{}
	chains, _ := render.Static(h.m.rcfg)
	for _, c := range chains {
		static[c.Name] = true
	}
	var out []string
	for _, n := range h.table.ChainNames() {
		if !static[n] {
			out = append(out, n)
		}
	}
	return out
}

func (h *harness) wantEndpointChains(want ...string) {
	h.t.Helper()
	sort.Strings(want)
	if diff := cmp.Diff(want, h.endpointChains(), cmpEmpty); diff != "" {
		h.t.Errorf("endpoint chains (-want +got):\n%s", diff)
	}
}

// elems returns the elements of a set or map as "key" or "key → chain".
func elems(m *nft.Model, set string) []string {
	s := m.Set(set)
	if s == nil {
		return []string{"<no set " + set + ">"}
	}
	var out []string
	for k, e := range s.Elements {
		if e.Verdict != nil {
			out = append(out, k+" → "+string(e.Verdict.Kind)+" "+e.Verdict.Chain)
		} else {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (h *harness) wantElems(set string, want ...string) {
	h.t.Helper()
	if diff := cmp.Diff(want, elems(h.table, set), cmpEmpty); diff != "" {
		h.t.Errorf("elements of %s (-want +got):\n%s", set, diff)
	}
}

// wantValidKeys checks that every interface-keyed set and map holds only
// names nft takes, and that every element and rule comment is one nft takes.
func (h *harness) wantValidKeys() {
	h.t.Helper()
	for _, name := range h.table.SetNames() {
		s := h.table.Set(name)
		for k, e := range s.Elements {
			if len(s.Key) > 0 && s.Key[0] == nft.TypeIfName {
				iface, _, _ := strings.Cut(k, " . ")
				if err := nft.ValidateIfName(strings.Trim(iface, `"`)); err != nil {
					h.t.Errorf("set %s: element %q: %v", name, k, err)
				}
			}
			if e.Comment != nft.SanitizeComment(e.Comment) {
				h.t.Errorf("set %s: element %q: comment %q", name, k, e.Comment)
			}
		}
	}
	for _, name := range h.table.ChainNames() {
		for i, r := range h.table.Chain(name).Rules {
			if r.Comment != nft.SanitizeComment(r.Comment) {
				h.t.Errorf("chain %s rule %d: comment %q", name, i+1, r.Comment)
			}
		}
	}
}

// rules summarises a chain as one line per rule: the comment (without the
// endpoint prefix every owned chain's comments carry) and the verdict.
func rules(c *nft.Chain) []string {
	var out []string
	for _, r := range c.Rules {
		comment := r.Comment
		if strings.HasPrefix(comment, "endpoint ") || strings.HasPrefix(comment, "host endpoint ") {
			if i := strings.Index(comment, ": "); i >= 0 {
				comment = comment[i+2:]
			}
		}
		out = append(out, comment+" → "+action(r.Action))
	}
	return out
}

func action(a nft.Action) string {
	switch a := a.(type) {
	case nft.Verdict:
		if a.Chain != "" {
			return string(a.Kind) + " " + a.Chain
		}
		return string(a.Kind)
	case nft.Reject:
		return "reject"
	case nft.SetMark:
		return "set mark"
	case nft.Notrack:
		return "notrack"
	case nft.NFLog:
		return "nflog"
	case nft.VMap:
		return "vmap @" + a.Map
	default:
		return fmt.Sprintf("%T", a)
	}
}

// jumps returns the jump and goto targets of a chain, in order.
func jumps(c *nft.Chain) []string {
	var out []string
	for _, r := range c.Rules {
		if v, ok := r.Action.(nft.Verdict); ok && v.Chain != "" {
			out = append(out, v.Chain)
		}
	}
	return out
}

func (h *harness) wantJumps(chain string, want ...string) {
	h.t.Helper()
	if diff := cmp.Diff(want, jumps(h.chain(chain)), cmpEmpty); diff != "" {
		h.t.Errorf("jumps of %s (-want +got):\n%s", chain, diff)
	}
}

func (h *harness) wantRules(chain string, want ...string) {
	h.t.Helper()
	if diff := cmp.Diff(want, rules(h.chain(chain)), cmpEmpty); diff != "" {
		h.t.Errorf("rules of %s (-want +got):\n%s", chain, diff)
	}
}

// wantRoutes checks one family's requested routes, as "iface: cidr [mac] metric".
func (h *harness) wantRoutes(fam int, want ...string) {
	h.t.Helper()
	if diff := cmp.Diff(want, h.routes.dump(felix.Family(fam).Version()), cmpEmpty); diff != "" {
		h.t.Errorf("IPv%d routes (-want +got):\n%s", felix.Family(fam).Version(), diff)
	}
}

// sysctl returns the value written to a /proc/sys path, or "<unset>".
func (h *harness) sysctl(path string) string {
	if v, ok := h.sysFake.Value(path); ok {
		return v
	}
	return "<unset>"
}

// fakeRoutes records what the manager asked for, per interface.
type fakeRoutes struct {
	byIface map[string][]RouteTarget
	calls   int
}

func newFakeRoutes() *fakeRoutes { return &fakeRoutes{byIface: map[string][]RouteTarget{}} }

func (f *fakeRoutes) SetRoutes(iface string, targets []RouteTarget) {
	f.calls++
	if len(targets) == 0 {
		delete(f.byIface, iface)
		return
	}
	f.byIface[iface] = slices.Clone(targets)
}

// dump lists the targets of one IP version (4 or 6).
func (f *fakeRoutes) dump(version int) []string {
	var out []string
	for iface, ts := range f.byIface {
		for _, t := range ts {
			if t.CIDR.Addr().Is4() != (version == 4) {
				continue
			}
			s := iface + ": " + t.CIDR.String()
			if t.DestMAC != nil {
				s += " " + t.DestMAC.String()
			}
			out = append(out, fmt.Sprintf("%s %d", s, t.Priority))
		}
	}
	sort.Strings(out)
	return out
}

// recordingCallbacks records every callback as a line.
type recordingCallbacks struct {
	calls []string
}

func (r *recordingCallbacks) UpdateHostEndpoint(id *proto.HostEndpointID) {
	r.calls = append(r.calls, "UpdateHostEndpoint "+id.GetEndpointId())
}
func (r *recordingCallbacks) RemoveHostEndpoint(id *proto.HostEndpointID) {
	r.calls = append(r.calls, "RemoveHostEndpoint "+id.GetEndpointId())
}
func (r *recordingCallbacks) AddInterface(iface string, id *proto.HostEndpointID) {
	r.calls = append(r.calls, "AddInterface "+iface+" "+id.GetEndpointId())
}
func (r *recordingCallbacks) UpdateInterface(iface string, id *proto.HostEndpointID) {
	r.calls = append(r.calls, "UpdateInterface "+iface+" "+id.GetEndpointId())
}
func (r *recordingCallbacks) RemoveInterface(iface string) {
	r.calls = append(r.calls, "RemoveInterface "+iface)
}
func (r *recordingCallbacks) UpdateWorkload(old, new *proto.WorkloadEndpoint) {
	r.calls = append(r.calls, fmt.Sprintf("UpdateWorkload %s→%s", old.GetName(), new.GetName()))
}
func (r *recordingCallbacks) RemoveWorkload(old *proto.WorkloadEndpoint) {
	r.calls = append(r.calls, "RemoveWorkload "+old.GetName())
}

// countingRenderer counts renders per interface.
type countingRenderer struct {
	next  renderer
	count map[string]int
	total int
}

func (c *countingRenderer) reset() { c.count, c.total = map[string]int{}, 0 }

func (c *countingRenderer) workload(in render.WorkloadInput) render.Output {
	c.count[in.Endpoint.GetName()]++
	c.total++
	return c.next.workload(in)
}

func (c *countingRenderer) host(in render.HostInput) render.Output {
	c.count[in.Interface]++
	c.total++
	return c.next.host(in)
}

// Messages.

func ifaceUp(name string) InterfaceStateUpdate {
	return InterfaceStateUpdate{Name: name, State: IfaceUp, Index: 1}
}

func ifaceDown(name string) InterfaceStateUpdate {
	return InterfaceStateUpdate{Name: name, State: IfaceDown, Index: 1}
}

func ifaceGone(name string) InterfaceStateUpdate {
	return InterfaceStateUpdate{Name: name, State: IfaceGone}
}

func ifaceAddrs(name string, addrs ...string) InterfaceAddrsUpdate {
	u := InterfaceAddrsUpdate{Name: name, Addrs: []netip.Addr{}}
	for _, a := range addrs {
		u.Addrs = append(u.Addrs, netip.MustParseAddr(a))
	}
	return u
}

// hostIfaces are the conventions' host interfaces, up with their addresses.
func hostIfaces() []any {
	return []any{
		ifaceUp("eth0"), ifaceAddrs("eth0", "10.0.240.10", "2001:db8::10.0.240.10"),
		ifaceUp("lo"), ifaceAddrs("lo", "127.0.1.1", "::1"),
	}
}

func wlID4(pod string) *proto.WorkloadEndpointID {
	return &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: pod, EndpointId: "endpoint-id-11"}
}

func wlKey(pod string) string { return "wl k8s/" + pod + "/endpoint-id-11" }

func wlUpdate(pod string, ep *proto.WorkloadEndpoint) *proto.WorkloadEndpointUpdate {
	return &proto.WorkloadEndpointUpdate{Id: wlID4(pod), Endpoint: ep}
}

func wlRemove(pod string) *proto.WorkloadEndpointRemove {
	return &proto.WorkloadEndpointRemove{Id: wlID4(pod)}
}

// workloadEp is the standard workload of acceptance case 19, on iface.
func workloadEp(iface string, tiers ...*proto.TierInfo) *proto.WorkloadEndpoint {
	return &proto.WorkloadEndpoint{
		State:    "active",
		Name:     iface,
		Mac:      "01:02:03:04:05:06",
		Ipv4Nets: []string{"10.0.240.2/24"},
		Ipv6Nets: []string{"2001:db8:2::2/128"},
		Tiers:    tiers,
	}
}

func hepUpdate(id string, ep *proto.HostEndpoint) *proto.HostEndpointUpdate {
	return &proto.HostEndpointUpdate{Id: &proto.HostEndpointID{EndpointId: id}, Endpoint: ep}
}

func hepRemove(id string) *proto.HostEndpointRemove {
	return &proto.HostEndpointRemove{Id: &proto.HostEndpointID{EndpointId: id}}
}

func gnp(name string) *proto.PolicyID {
	return &proto.PolicyID{Name: name, Kind: "GlobalNetworkPolicy"}
}

// tier returns a tier whose policies apply in both directions.
func tier(name string, policies ...string) *proto.TierInfo {
	t := &proto.TierInfo{Name: name, DefaultAction: "Deny"}
	for _, p := range policies {
		t.IngressPolicies = append(t.IngressPolicies, gnp(p))
		t.EgressPolicies = append(t.EgressPolicies, gnp(p))
	}
	return t
}

func ingressTier(name string, policies ...string) *proto.TierInfo {
	t := tier(name, policies...)
	t.EgressPolicies = nil
	return t
}

func egressTier(name string, policies ...string) *proto.TierInfo {
	t := tier(name, policies...)
	t.IngressPolicies = nil
	return t
}

func policyUpdate(name, selector string) *proto.ActivePolicyUpdate {
	return &proto.ActivePolicyUpdate{Id: gnp(name), Policy: &proto.Policy{OriginalSelector: selector}}
}

// pi and po name a policy's filter chains in a tier.
func pi(tier, policy string) string {
	return render.PolicyChainName(render.LayerFilter, render.Ingress, tier, gnp(policy))
}

func po(tier, policy string) string {
	return render.PolicyChainName(render.LayerFilter, render.Egress, tier, gnp(policy))
}

func layerPolicy(layer render.Layer, dir render.Dir, tier, policy string) string {
	return render.PolicyChainName(layer, dir, tier, gnp(policy))
}

// chainName is render's name of an endpoint chain.
func chainName(layer render.Layer, kind, iface string) string {
	return render.EndpointChainName(layer, kind, iface)
}

package dataplane_test

// The safety net of the incremental `nftep apply` (issue 24): an apply that
// trusts the run directory's record of the last apply and programs only
// what changed must leave exactly the kernel state a full apply leaves.
//
// Two node namespaces, A and B, have the same interfaces. Every state file
// of a sequence goes to both: A keeps its run directory (the incremental
// path, once the record exists), B gets a new one each time (the full
// path, the reference). After each apply the tests compare what nftep owns
// in A and B: the inet and arp tables, routes, permanent neighbours,
// interface sysctls, and the applies' statuses.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	gproto "google.golang.org/protobuf/proto"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
	"github.com/nftep/nftep/sysctl"
)

// The node the incremental tests build: deltaIfaces workload interfaces
// (cali00, cali01, …, all up, their peers in a pod namespace) and a host
// interface for the host endpoint; deltaSteps state files per chain mode.
const (
	deltaIfaces  = 32
	deltaHostIf  = "eth1"
	deltaSteps   = 30
	deltaSets    = 8
	deltaTierSec = "security"
	deltaTierDef = "default"
)

// deltaNode is one node namespace with its options.
type deltaNode struct {
	name string
	ns   *netnstest.NS
	opts dataplane.Options
}

// newDeltaNode makes a node namespace with the workload and host
// interfaces, all up.
func newDeltaNode(t *testing.T, name string) *deltaNode {
	t.Helper()
	ns := netnstest.New(t)
	pods := netnstest.New(t)
	for i := range deltaIfaces {
		netnstest.Veth(t, ns, deltaIface(i), pods, fmt.Sprintf("p%02d", i))
	}
	// The host interface: a veth too (the test kernel may lack dummy).
	netnstest.Veth(t, ns, deltaHostIf, pods, "uplink")
	ns.AddAddr(t, deltaHostIf, "192.168.7.10/24")
	return &deltaNode{name: name, ns: ns, opts: dataplane.Options{Namespace: openNS(t, ns)}}
}

func deltaIface(i int) string { return fmt.Sprintf("cali%02d", i) }

// deltaPair is the incremental node A and the reference node B.
type deltaPair struct {
	a, b       *deltaNode
	aRunDir    string
	bPrevRoute []byte // B's routes record of the step before
	dir        string
	step       int
	incr       int
}

func newDeltaPair(t *testing.T) *deltaPair {
	t.Helper()
	p := &deltaPair{a: newDeltaNode(t, "A"), b: newDeltaNode(t, "B"), aRunDir: t.TempDir(), dir: t.TempDir()}
	p.a.opts.RunDir = p.aRunDir
	return p
}

// apply writes the state file and applies it to A (its run directory
// kept) and B (a new run directory, holding only the routes record B's
// last apply wrote; see TestKernelApplyRemovesRoutesOfEarlierApply: without
// it a full apply spares a removed endpoint's route for the grace period,
// and then exits, so that B would keep routes A removes). It compares the
// nodes and returns A's and B's results.
func (p *deltaPair) apply(t *testing.T, what string, config map[string]string, msgs []*proto.ToDataplane) (ra, rb *dataplane.Result) {
	t.Helper()
	p.step++
	state := filepath.Join(p.dir, fmt.Sprintf("step-%02d.json", p.step))
	writeStateFile(t, state, config, msgs)
	ctx := context.Background()

	startA := time.Now()
	ra, err := dataplane.Apply(ctx, p.a.opts, state)
	require.NoError(t, err, "step %d (%s): apply to A", p.step, what)
	durA := time.Since(startA)

	bRunDir := t.TempDir()
	if p.bPrevRoute != nil {
		require.NoError(t, os.WriteFile(filepath.Join(bRunDir, dataplane.RoutesFileName), p.bPrevRoute, 0o600))
	}
	optsB := p.b.opts
	optsB.RunDir = bRunDir
	startB := time.Now()
	rb, err = dataplane.Apply(ctx, optsB, state)
	require.NoError(t, err, "step %d (%s): apply to B", p.step, what)
	durB := time.Since(startB)
	p.bPrevRoute, err = os.ReadFile(filepath.Join(bRunDir, dataplane.RoutesFileName))
	require.NoError(t, err, "step %d: B's routes record", p.step)

	if ra.Incremental {
		p.incr++
	}
	t.Logf("step %2d %-40s A: incremental=%-5v %3d ops %4d ms   B: %3d ops %4d ms",
		p.step, what, ra.Incremental, ra.Operations, durA.Milliseconds(), rb.Operations, durB.Milliseconds())
	assert.False(t, rb.Incremental, "step %d: B, with a new run directory, reports an incremental apply", p.step)

	if diff := cmp.Diff(rb.Statuses, ra.Statuses); diff != "" {
		t.Errorf("step %d (%s): statuses differ (-full B +incremental A):\n%s", p.step, what, diff)
	}
	assert.Equal(t, rb.Contents, ra.Contents, "step %d: contents", p.step)
	assert.Equal(t, rb.Table, ra.Table, "step %d: table", p.step)
	p.compare(t, what)
	return ra, rb
}

// compare fails t with a diff for every part of the kernel state nftep
// owns that differs between A and B.
func (p *deltaPair) compare(t *testing.T, what string) {
	t.Helper()
	ka, kb := readDeltaKernel(t, p.a), readDeltaKernel(t, p.b)
	for _, part := range []struct {
		name string
		a, b any
	}{
		{"inet table", ka.inet, kb.inet},
		{"arp table", ka.arp, kb.arp},
		{"rule hashes", ka.hashes, kb.hashes},
		{"undecoded objects", ka.problems, kb.problems},
		{"routes", ka.routes, kb.routes},
		{"permanent neighbours", ka.neighs, kb.neighs},
		{"sysctls", ka.sysctls, kb.sysctls},
	} {
		if diff := cmp.Diff(part.b, part.a); diff != "" {
			t.Errorf("step %d (%s): %s differ (-full B +incremental A):\n%s", p.step, what, part.name, diff)
		}
	}
}

// deltaKernel is the kernel state of one node that nftep owns, as text.
type deltaKernel struct {
	inet, arp string
	// hashes are the rule hashes (userdata) of each chain, in order.
	hashes   map[string][]string
	problems []string
	routes   []string
	neighs   []string
	sysctls  []string
}

func readDeltaKernel(t *testing.T, n *deltaNode) deltaKernel {
	t.Helper()
	var k deltaKernel
	k.hashes = map[string][]string{}
	for _, fam := range []nft.Family{nft.FamilyINet, nft.FamilyARP} {
		kt, err := nft.ReadKernelTable(context.Background(), n.ns.Fd(), fam, render.DefaultTableName)
		require.NoError(t, err, "node %s: read table %s", n.name, fam)
		require.True(t, kt.Exists, "node %s: no table %s %s", n.name, fam, render.DefaultTableName)
		text := kt.Model.String()
		if fam == nft.FamilyINet {
			k.inet = text
		} else {
			k.arp = text
		}
		for chain, rules := range kt.Rules {
			for _, r := range rules {
				k.hashes[string(fam)+" "+chain] = append(k.hashes[string(fam)+" "+chain], r.Hash)
			}
		}
		for _, pr := range kt.Problems {
			k.problems = append(k.problems, string(fam)+": "+pr)
		}
	}

	h := n.ns.Netlink()
	links, err := h.LinkList()
	require.NoError(t, err)
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	// Every route of the main table, by device name (the interfaces'
	// indexes may differ between the nodes).
	rs, err := h.RouteList(nil, netlink.FAMILY_ALL)
	require.NoError(t, err)
	for _, r := range rs {
		dst := "default"
		if r.Dst != nil {
			dst = r.Dst.String()
		}
		s := fmt.Sprintf("%s dev %s proto %d scope %d type %d", dst, names[r.LinkIndex], r.Protocol, r.Scope, r.Type)
		if r.Gw != nil {
			s += " via " + r.Gw.String()
		}
		if r.Src != nil {
			s += " src " + r.Src.String()
		}
		k.routes = append(k.routes, s)
	}
	slices.Sort(k.routes)
	ns, err := h.NeighList(0, netlink.FAMILY_ALL)
	require.NoError(t, err)
	for _, nb := range ns {
		if nb.State&netlink.NUD_PERMANENT == 0 {
			continue
		}
		k.neighs = append(k.neighs, fmt.Sprintf("%s dev %s lladdr %s", nb.IP, names[nb.LinkIndex], nb.HardwareAddr))
	}
	slices.Sort(k.neighs)
	// Every sysctl nftep may write on a workload interface, IPv4 and IPv6
	// (the paths do not depend on the values).
	var paths []string
	for i := range deltaIfaces {
		for _, w := range sysctl.Steps(deltaIface(i), true, true, false, "1") {
			paths = append(paths, w.Path)
		}
	}
	require.NoError(t, n.ns.Do(func() error {
		for _, path := range paths {
			v, err := os.ReadFile(path)
			val := strings.TrimSpace(string(v))
			if err != nil {
				val = "error: " + err.Error()
			}
			k.sysctls = append(k.sysctls, path+"="+val)
		}
		return nil
	}))
	return k
}

// deltaWorld is a node's desired state, which the random walk changes a
// little at each step; msgs renders it as the state file's updates.
type deltaWorld struct {
	r        *rand.Rand
	config   map[string]string
	sets     map[string][]string
	policies map[string]*proto.ActivePolicyUpdate
	profiles map[string]*proto.Profile
	eps      map[int]*proto.WorkloadEndpointUpdate // by interface number
	hep      *proto.HostEndpointUpdate
	pools    map[string]*proto.IPAMPool
	nextPod  int
	nextPol  int
	nextAddr int
}

func newDeltaWorld(seed uint64, shared bool) *deltaWorld {
	w := &deltaWorld{
		r: rand.New(rand.NewPCG(seed, 24)),
		config: map[string]string{
			render.KeyInterfacePrefix:             "cali",
			render.KeyDefaultEndpointToHostAction: "DROP",
			render.KeySharedEndpointChains:        strconv.FormatBool(shared),
			"FelixHostname":                       "delta-node",
		},
		sets:     map[string][]string{},
		policies: map[string]*proto.ActivePolicyUpdate{},
		profiles: map[string]*proto.Profile{},
		eps:      map[int]*proto.WorkloadEndpointUpdate{},
		pools:    map[string]*proto.IPAMPool{"10.65.0.0-16": {Cidr: "10.65.0.0/16", Masquerade: true}},
	}
	for s := range deltaSets {
		w.sets[fmt.Sprintf("s:set-%d", s)] = w.randMembers()
	}
	for ns := range 3 {
		w.profiles[fmt.Sprintf("kns.ns-%d", ns)] = w.randProfile()
		w.profiles[fmt.Sprintf("ksa.ns-%d.default", ns)] = &proto.Profile{}
	}
	for range 6 {
		w.addPolicy()
	}
	for i := range deltaIfaces * 2 / 3 {
		w.addEndpoint(i)
	}
	return w
}

func (w *deltaWorld) pick(n int) int { return w.r.IntN(n) }

// randMembers is 0 to 5 members: addresses, networks, an IPv6 address.
func (w *deltaWorld) randMembers() []string {
	var out []string
	for range w.pick(6) {
		switch w.pick(4) {
		case 0:
			out = append(out, fmt.Sprintf("10.80.%d.0/24", w.pick(200)))
		case 1:
			out = append(out, fmt.Sprintf("fd00:80::%x/128", 1+w.pick(4000)))
		default:
			out = append(out, fmt.Sprintf("10.70.%d.%d/32", w.pick(200), 1+w.pick(250)))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (w *deltaWorld) setIDs() []string {
	ids := make([]string, 0, len(w.sets))
	for id := range w.sets {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// randRule is a policy or profile rule: an action, maybe a protocol and
// ports, maybe IP sets or a network.
func (w *deltaWorld) randRule(id string) *proto.Rule {
	r := &proto.Rule{Action: []string{"allow", "allow", "deny", "pass"}[w.pick(4)], RuleId: id}
	switch w.pick(3) {
	case 0:
		r.Protocol = &proto.Protocol{NumberOrName: &proto.Protocol_Name{Name: "tcp"}}
		port := int32(1000 + w.pick(9000))
		r.DstPorts = []*proto.PortRange{{First: port, Last: port + int32(w.pick(3))}}
	case 1:
		r.Protocol = &proto.Protocol{NumberOrName: &proto.Protocol_Name{Name: "udp"}}
		r.DstPorts = []*proto.PortRange{{First: 53, Last: 53}}
	}
	ids := w.setIDs()
	switch w.pick(4) {
	case 0:
		r.SrcIpSetIds = []string{ids[w.pick(len(ids))]}
	case 1:
		r.DstIpSetIds = []string{ids[w.pick(len(ids))]}
	case 2:
		r.SrcNet = []string{fmt.Sprintf("10.90.%d.0/24", w.pick(250))}
		r.IpVersion = proto.IPVersion_IPV4
	}
	return r
}

func (w *deltaWorld) randRules(prefix string, max int) []*proto.Rule {
	var out []*proto.Rule
	for k := range w.pick(max + 1) {
		out = append(out, w.randRule(fmt.Sprintf("%s-%d-%d", prefix, k, w.pick(1000))))
	}
	return out
}

func (w *deltaWorld) randProfile() *proto.Profile {
	return &proto.Profile{InboundRules: w.randRules("prof-in", 2), OutboundRules: w.randRules("prof-out", 2)}
}

func (w *deltaWorld) policyNames() []string {
	names := make([]string, 0, len(w.policies))
	for n := range w.policies {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func (w *deltaWorld) addPolicy() string {
	w.nextPol++
	name := fmt.Sprintf("pol-%d", w.nextPol)
	tier := deltaTierDef
	if w.pick(3) == 0 {
		tier = deltaTierSec
	}
	ns := fmt.Sprintf("ns-%d", w.pick(3))
	w.policies[name] = &proto.ActivePolicyUpdate{
		Id:     &proto.PolicyID{Name: name, Namespace: ns, Kind: "NetworkPolicy"},
		Policy: w.randPolicyBody(name, ns, tier),
	}
	return name
}

func (w *deltaWorld) randPolicyBody(name, ns, tier string) *proto.Policy {
	return &proto.Policy{
		Namespace:        ns,
		Tier:             tier,
		OriginalSelector: fmt.Sprintf("app == '%s'", name),
		InboundRules:     w.randRules(name+"-in", 3),
		OutboundRules:    w.randRules(name+"-out", 2),
	}
}

// randTiers is a tiers list over a random subset of the policies: the
// security tier first, each policy ingress, egress or both.
func (w *deltaWorld) randTiers() []*proto.TierInfo {
	var out []*proto.TierInfo
	for _, tier := range []string{deltaTierSec, deltaTierDef} {
		ti := &proto.TierInfo{Name: tier, DefaultAction: "Deny"}
		if tier == deltaTierSec {
			ti.DefaultAction = "Pass"
		}
		for _, name := range w.policyNames() {
			p := w.policies[name]
			if p.Policy.Tier != tier || w.pick(3) != 0 {
				continue
			}
			switch w.pick(3) {
			case 0:
				ti.IngressPolicies = append(ti.IngressPolicies, p.Id)
			case 1:
				ti.EgressPolicies = append(ti.EgressPolicies, p.Id)
			default:
				ti.IngressPolicies = append(ti.IngressPolicies, p.Id)
				ti.EgressPolicies = append(ti.EgressPolicies, p.Id)
			}
		}
		if len(ti.IngressPolicies)+len(ti.EgressPolicies) > 0 {
			out = append(out, ti)
		}
	}
	return out
}

// dropPolicy removes a policy from every tiers list.
func dropPolicy(tiers []*proto.TierInfo, name string) []*proto.TierInfo {
	var out []*proto.TierInfo
	for _, ti := range tiers {
		keep := func(ids []*proto.PolicyID) []*proto.PolicyID {
			return slices.DeleteFunc(ids, func(id *proto.PolicyID) bool { return id.Name == name })
		}
		ti.IngressPolicies, ti.EgressPolicies = keep(ti.IngressPolicies), keep(ti.EgressPolicies)
		if len(ti.IngressPolicies)+len(ti.EgressPolicies) > 0 {
			out = append(out, ti)
		}
	}
	return out
}

func (w *deltaWorld) randAddrs(ep *proto.WorkloadEndpoint) {
	w.nextAddr++
	ep.Ipv4Nets = []string{fmt.Sprintf("10.65.%d.%d/32", w.nextAddr/250, 1+w.nextAddr%250)}
	ep.Ipv6Nets = nil
	if w.pick(3) == 0 {
		ep.Ipv6Nets = []string{fmt.Sprintf("fd00:65::%x/128", w.nextAddr)}
	}
	if w.pick(8) == 0 {
		w.nextAddr++
		ep.Ipv4Nets = append(ep.Ipv4Nets, fmt.Sprintf("10.65.%d.%d/32", w.nextAddr/250, 1+w.nextAddr%250))
	}
}

func (w *deltaWorld) randMAC() string {
	return fmt.Sprintf("02:00:0a:%02x:%02x:%02x", w.pick(256), w.pick(256), w.pick(256))
}

func (w *deltaWorld) randProfiles(ns int) []string {
	ids := []string{fmt.Sprintf("kns.ns-%d", ns)}
	if w.pick(2) == 0 {
		ids = append(ids, fmt.Sprintf("ksa.ns-%d.default", ns))
	}
	return ids
}

func (w *deltaWorld) addEndpoint(i int) {
	w.nextPod++
	ns := w.pick(3)
	ep := &proto.WorkloadEndpoint{
		State:      "active",
		Name:       deltaIface(i),
		Mac:        w.randMAC(),
		ProfileIds: w.randProfiles(ns),
		Tiers:      w.randTiers(),
	}
	if w.pick(10) == 0 {
		ep.State = "inactive"
	}
	w.randAddrs(ep)
	w.eps[i] = &proto.WorkloadEndpointUpdate{
		Id:       &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: fmt.Sprintf("ns-%d/pod-%d", ns, w.nextPod), EndpointId: "eth0"},
		Endpoint: ep,
	}
}

func (w *deltaWorld) epIndexes() []int {
	out := make([]int, 0, len(w.eps))
	for i := range w.eps {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// change makes one random change and says what it was; config is true for
// a change of the configuration.
func (w *deltaWorld) change() (what string, config bool) {
	for {
		switch k := w.pick(100); {
		case k < 14: // an endpoint added
			var free []int
			for i := range deltaIfaces {
				if w.eps[i] == nil {
					free = append(free, i)
				}
			}
			if len(free) == 0 {
				continue
			}
			i := free[w.pick(len(free))]
			w.addEndpoint(i)
			return "endpoint added on " + deltaIface(i), false
		case k < 24: // an endpoint removed
			idx := w.epIndexes()
			if len(idx) < 4 {
				continue
			}
			i := idx[w.pick(len(idx))]
			delete(w.eps, i)
			return "endpoint removed from " + deltaIface(i), false
		case k < 46: // an endpoint changed
			idx := w.epIndexes()
			if len(idx) == 0 {
				continue
			}
			i := idx[w.pick(len(idx))]
			u := gproto.Clone(w.eps[i]).(*proto.WorkloadEndpointUpdate)
			ep := u.Endpoint
			var field string
			switch w.pick(5) {
			case 0:
				w.randAddrs(ep)
				field = "IPs"
			case 1:
				ep.Mac = w.randMAC()
				field = "MAC"
			case 2:
				ns, _ := strconv.Atoi(strings.TrimPrefix(strings.Split(u.Id.WorkloadId, "/")[0], "ns-"))
				ep.ProfileIds = w.randProfiles(ns)
				field = "profiles"
			case 3:
				ep.Tiers = w.randTiers()
				field = "tiers"
			default:
				if ep.State == "active" {
					ep.State = "inactive"
				} else {
					ep.State = "active"
				}
				field = "state " + ep.State
			}
			w.eps[i] = u
			return fmt.Sprintf("endpoint on %s: %s", deltaIface(i), field), false
		case k < 52: // a policy added, used by a few endpoints
			name := w.addPolicy()
			tier := w.policies[name].Policy.Tier
			for _, i := range w.epIndexes() {
				if w.pick(4) != 0 {
					continue
				}
				u := gproto.Clone(w.eps[i]).(*proto.WorkloadEndpointUpdate)
				var ti *proto.TierInfo
				for _, t := range u.Endpoint.Tiers {
					if t.Name == tier {
						ti = t
					}
				}
				if ti == nil {
					ti = &proto.TierInfo{Name: tier, DefaultAction: "Deny"}
					if tier == deltaTierSec {
						ti.DefaultAction = "Pass"
						u.Endpoint.Tiers = append([]*proto.TierInfo{ti}, u.Endpoint.Tiers...)
					} else {
						u.Endpoint.Tiers = append(u.Endpoint.Tiers, ti)
					}
				}
				ti.IngressPolicies = append(ti.IngressPolicies, w.policies[name].Id)
				w.eps[i] = u
			}
			return "policy " + name + " added", false
		case k < 62: // a policy's rules changed
			names := w.policyNames()
			name := names[w.pick(len(names))]
			p := w.policies[name]
			w.policies[name] = &proto.ActivePolicyUpdate{Id: p.Id, Policy: w.randPolicyBody(name, p.Policy.Namespace, p.Policy.Tier)}
			return "policy " + name + " changed", false
		case k < 67: // a policy removed, from its users first
			names := w.policyNames()
			if len(names) < 3 {
				continue
			}
			name := names[w.pick(len(names))]
			delete(w.policies, name)
			for _, i := range w.epIndexes() {
				u := gproto.Clone(w.eps[i]).(*proto.WorkloadEndpointUpdate)
				u.Endpoint.Tiers = dropPolicy(u.Endpoint.Tiers, name)
				w.eps[i] = u
			}
			if w.hep != nil {
				u := gproto.Clone(w.hep).(*proto.HostEndpointUpdate)
				u.Endpoint.Tiers = dropPolicy(u.Endpoint.Tiers, name)
				w.hep = u
			}
			return "policy " + name + " removed", false
		case k < 78: // IP set members
			ids := w.setIDs()
			id := ids[w.pick(len(ids))]
			w.sets[id] = w.randMembers()
			return "IP set " + id + " members", false
		case k < 85: // a profile's rules
			id := fmt.Sprintf("kns.ns-%d", w.pick(3))
			w.profiles[id] = w.randProfile()
			return "profile " + id + " changed", false
		case k < 90: // the host endpoint added, changed or removed
			switch {
			case w.hep == nil:
				w.hep = &proto.HostEndpointUpdate{
					Id: &proto.HostEndpointID{EndpointId: "delta-node-" + deltaHostIf},
					Endpoint: &proto.HostEndpoint{
						Name:              deltaHostIf,
						ExpectedIpv4Addrs: []string{"192.168.7.10"},
						ProfileIds:        []string{"kns.ns-0"},
						Tiers:             w.randTiers(),
					},
				}
				return "host endpoint added", false
			case w.pick(3) == 0:
				w.hep = nil
				return "host endpoint removed", false
			default:
				u := gproto.Clone(w.hep).(*proto.HostEndpointUpdate)
				u.Endpoint.Tiers = w.randTiers()
				w.hep = u
				return "host endpoint policies", false
			}
		case k < 94: // an IP pool
			const id = "10.66.0.0-16"
			switch {
			case w.pools[id] == nil:
				w.pools[id] = &proto.IPAMPool{Cidr: "10.66.0.0/16", Masquerade: w.pick(2) == 0}
				return "IP pool added", false
			case w.pick(2) == 0:
				delete(w.pools, id)
				return "IP pool removed", false
			default:
				w.pools[id] = &proto.IPAMPool{Cidr: "10.66.0.0/16", Masquerade: !w.pools[id].Masquerade}
				return "IP pool masquerade toggled", false
			}
		case k < 97: // the configuration
			return w.changeConfig(), true
		default:
			return "nothing", false
		}
	}
}

// changeConfig moves DefaultEndpointToHostAction to another value.
func (w *deltaWorld) changeConfig() string {
	cur := w.config[render.KeyDefaultEndpointToHostAction]
	vals := slices.DeleteFunc([]string{"DROP", "RETURN", "ACCEPT"}, func(v string) bool { return v == cur })
	w.config[render.KeyDefaultEndpointToHostAction] = vals[w.pick(len(vals))]
	return "config DefaultEndpointToHostAction=" + w.config[render.KeyDefaultEndpointToHostAction]
}

// msgs renders the world as a state file's updates: IP sets, policies,
// profiles, pools, the host endpoint, the workload endpoints.
func (w *deltaWorld) msgs() []*proto.ToDataplane {
	var out []*proto.ToDataplane
	for _, id := range w.setIDs() {
		out = append(out, &proto.ToDataplane{Payload: &proto.ToDataplane_IpsetUpdate{IpsetUpdate: &proto.IPSetUpdate{Id: id, Type: proto.IPSetUpdate_NET, Members: w.sets[id]}}})
	}
	for _, name := range w.policyNames() {
		out = append(out, &proto.ToDataplane{Payload: &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: w.policies[name]}})
	}
	var profs []string
	for id := range w.profiles {
		profs = append(profs, id)
	}
	slices.Sort(profs)
	for _, id := range profs {
		out = append(out, &proto.ToDataplane{Payload: &proto.ToDataplane_ActiveProfileUpdate{ActiveProfileUpdate: &proto.ActiveProfileUpdate{Id: &proto.ProfileID{Name: id}, Profile: w.profiles[id]}}})
	}
	var pools []string
	for id := range w.pools {
		pools = append(pools, id)
	}
	slices.Sort(pools)
	for _, id := range pools {
		out = append(out, &proto.ToDataplane{Payload: &proto.ToDataplane_IpamPoolUpdate{IpamPoolUpdate: &proto.IPAMPoolUpdate{Id: id, Pool: w.pools[id]}}})
	}
	if w.hep != nil {
		out = append(out, &proto.ToDataplane{Payload: &proto.ToDataplane_HostEndpointUpdate{HostEndpointUpdate: w.hep}})
	}
	for _, i := range w.epIndexes() {
		out = append(out, &proto.ToDataplane{Payload: &proto.ToDataplane_WorkloadEndpointUpdate{WorkloadEndpointUpdate: w.eps[i]}})
	}
	return out
}

// deltaSeed is NFTEP_DELTA_SEED, or 1.
func deltaSeed() uint64 {
	if n, err := strconv.ParseUint(os.Getenv("NFTEP_DELTA_SEED"), 10, 64); err == nil {
		return n
	}
	return 1
}

// TestKernelApplyIncrementalMatchesFull applies a random walk of state
// files (endpoints added, removed and changed, policies added, changed and
// removed, IP set members, profiles, the host endpoint, an IP pool, the
// configuration) to node A with one run directory throughout and to node
// B with a new one each time, and requires the nodes to match after every
// step, with endpoint chains shared and not. An apply may be incremental
// (A's result says so), but never after a configuration change, nor after
// someone else committed to A's nf_tables (a table of its own, once; a
// flushed chain of nftep's, once). NFTEP_DELTA_SEED picks another walk.
func TestKernelApplyIncrementalMatchesFull(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft is not installed (the foreign commits use it)")
	}
	seed := deltaSeed()
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("%s=%v", render.KeySharedEndpointChains, shared), func(t *testing.T) {
			t.Logf("seed %d (NFTEP_DELTA_SEED)", seed)
			p := newDeltaPair(t)
			w := newDeltaWorld(seed, shared)
			ra, _ := p.apply(t, "first file", w.config, w.msgs())
			assert.False(t, ra.Incremental, "the first apply, with an empty run directory, reports Incremental")
			configSteps := 0
			for s := 1; s < deltaSteps; s++ {
				var whats []string
				config := false
				switch {
				case s == deltaSteps/4 && configSteps == 0:
					// Make sure the walk changes the configuration
					// at least once.
					whats, config = []string{w.changeConfig()}, true
				default:
					for range 1 + w.pick(3) {
						what, c := w.change()
						whats = append(whats, what)
						config = config || c
					}
				}
				foreign := ""
				switch s {
				case deltaSteps / 2:
					p.a.ns.Run(t, "nft", "add", "table", "inet", "other")
					foreign = "after a foreign table; "
				case deltaSteps * 3 / 4:
					p.a.ns.Run(t, "nft", "flush", "chain", "inet", render.DefaultTableName, "filter-from-wl-dispatch")
					foreign = "after a foreign flush; "
				}
				what := foreign + strings.Join(whats, ", ")
				ra, _ := p.apply(t, what, w.config, w.msgs())
				if config {
					configSteps++
					assert.False(t, ra.Incremental, "step %d (%s): a configuration change took the incremental path", p.step, what)
				}
				if foreign != "" {
					assert.False(t, ra.Incremental, "step %d (%s): the apply after a foreign commit took the incremental path", p.step, what)
				}
				if t.Failed() {
					t.FailNow() // the rest would repeat the difference
				}
			}
			ra, _ = p.apply(t, "the same file again", w.config, w.msgs())
			assert.Zero(t, ra.Operations, "the same file again: operations")
			_, err := p.a.ns.Output("nft", "list", "table", "inet", "other")
			assert.NoError(t, err, "the foreign table in A is gone")
			t.Logf("%d of %d applies to A were incremental (%d changed the configuration)", p.incr, p.step, configSteps)
		})
	}
}

// TestKernelApplyIncrementalSharedPolicies is the small deterministic
// case: file 1 has four endpoints, of which cali01, cali02 and cali03 use
// the same policies; file 2 adds cali04, removes cali02 (whose policies
// cali03 still uses) and changes one of those policies. A (incremental)
// and B (full) must match after each file, in both chain modes.
func TestKernelApplyIncrementalSharedPolicies(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("%s=%v", render.KeySharedEndpointChains, shared), func(t *testing.T) {
			p := newDeltaPair(t)
			config := map[string]string{
				render.KeyInterfacePrefix:      "cali",
				render.KeySharedEndpointChains: strconv.FormatBool(shared),
			}
			set := &proto.ToDataplane{Payload: &proto.ToDataplane_IpsetUpdate{IpsetUpdate: &proto.IPSetUpdate{
				Id: "s:frontend", Type: proto.IPSetUpdate_NET, Members: []string{"10.65.0.1/32", "10.70.0.0/24"},
			}}}
			policy := func(name string, port int32) *proto.ToDataplane {
				return &proto.ToDataplane{Payload: &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: &proto.ActivePolicyUpdate{
					Id: &proto.PolicyID{Name: name, Namespace: "shop", Kind: "NetworkPolicy"},
					Policy: &proto.Policy{Namespace: "shop", Tier: "default", OriginalSelector: "app == '" + name + "'",
						InboundRules: []*proto.Rule{{
							Action: "allow", Protocol: &proto.Protocol{NumberOrName: &proto.Protocol_Name{Name: "tcp"}},
							SrcIpSetIds: []string{"s:frontend"}, DstPorts: []*proto.PortRange{{First: port, Last: port}}, RuleId: name + "-in",
						}},
						OutboundRules: []*proto.Rule{{Action: "allow", RuleId: name + "-out"}},
					},
				}}}
			}
			profile := &proto.ToDataplane{Payload: &proto.ToDataplane_ActiveProfileUpdate{ActiveProfileUpdate: &proto.ActiveProfileUpdate{
				Id: &proto.ProfileID{Name: "kns.shop"}, Profile: &proto.Profile{OutboundRules: []*proto.Rule{{Action: "allow", RuleId: "egress"}}},
			}}}
			ep := func(i int, pols ...string) *proto.ToDataplane {
				var ids []*proto.PolicyID
				for _, n := range pols {
					ids = append(ids, &proto.PolicyID{Name: n, Namespace: "shop", Kind: "NetworkPolicy"})
				}
				addr := netip.AddrFrom4([4]byte{10, 65, 0, byte(i)})
				return &proto.ToDataplane{Payload: &proto.ToDataplane_WorkloadEndpointUpdate{WorkloadEndpointUpdate: &proto.WorkloadEndpointUpdate{
					Id: &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: fmt.Sprintf("shop/pod-%d", i), EndpointId: "eth0"},
					Endpoint: &proto.WorkloadEndpoint{
						State: "active", Name: deltaIface(i), Mac: fmt.Sprintf("02:00:0a:41:00:%02x", i),
						ProfileIds: []string{"kns.shop"}, Ipv4Nets: []string{addr.String() + "/32"},
						Ipv6Nets: []string{fmt.Sprintf("fd00:65::%x/128", i)},
						Tiers:    []*proto.TierInfo{{Name: "default", IngressPolicies: ids, EgressPolicies: ids, DefaultAction: "Deny"}},
					},
				}}}
			}
			file1 := []*proto.ToDataplane{set, policy("web", 80), policy("api", 8080), profile,
				ep(0, "api"), ep(1, "web", "api"), ep(2, "web", "api"), ep(3, "web", "api")}
			ra, _ := p.apply(t, "file 1", config, file1)
			assert.False(t, ra.Incremental, "the first apply reports Incremental")
			file2 := []*proto.ToDataplane{set, policy("web", 443), policy("api", 8080), profile,
				ep(0, "api"), ep(1, "web", "api"), ep(3, "web", "api"), ep(4, "api")}
			ra, _ = p.apply(t, "file 2: +cali04, -cali02, web 80→443", config, file2)
			assert.True(t, ra.Incremental, "file 2")

			// File 3 removes policy web, which cali01 and cali03 (unchanged,
			// outside the context of any change) still name: refused as a
			// full read refuses it, and nothing changes.
			before := readDeltaKernel(t, p.a)
			file3 := []*proto.ToDataplane{set, policy("api", 8080), profile,
				ep(0, "api"), ep(1, "web", "api"), ep(3, "web", "api"), ep(4, "api")}
			state := filepath.Join(p.dir, "bad.json")
			writeStateFile(t, state, config, file3)
			_, err := dataplane.Apply(context.Background(), p.a.opts, state)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "policy NetworkPolicy shop/web is not defined by any activePolicyUpdate")
			assert.Equal(t, before, readDeltaKernel(t, p.a), "a refused file changed the node")

			// The record still holds: the next good file is incremental.
			file4 := []*proto.ToDataplane{set, policy("web", 443), policy("api", 8080), profile,
				ep(0, "api"), ep(1, "api"), ep(3, "web", "api"), ep(4, "api")}
			ra, _ = p.apply(t, "file 4: cali01 without web", config, file4)
			assert.True(t, ra.Incremental, "file 4")

			// A record whose tables do not read (its checksum good): the
			// next apply computes the whole node, and A still matches B.
			require.NoError(t, dataplane.SpoilRecordTables(p.aRunDir))
			file5 := []*proto.ToDataplane{set, policy("web", 443), policy("api", 8080), profile,
				ep(0, "api"), ep(1, "api"), ep(3, "web", "api"), ep(4, "api"), ep(5, "web")}
			ra, _ = p.apply(t, "file 5: +cali05, after a record whose tables do not read", config, file5)
			assert.False(t, ra.Incremental, "file 5, after a record whose tables do not read")
			t.Logf("%d of %d applies to A were incremental", p.incr, p.step)
		})
	}
}

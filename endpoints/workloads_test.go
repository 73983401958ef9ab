package endpoints

// Workload endpoint scenarios: acceptance cases 19–33
// (docs/acceptance-cases.md) and 36–37. Each test names the cases it covers;
// multi-step scenarios number their steps.

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

const (
	ifAB = "cali12345-ab"
	ifCD = "cali12345-cd"
)

var (
	twAB = chainName(render.LayerFilter, render.KindToWorkload, ifAB)
	fwAB = chainName(render.LayerFilter, render.KindFromWorkload, ifAB)
	smAB = chainName(render.LayerFilter, render.KindSetMark, ifAB)
	twCD = chainName(render.LayerFilter, render.KindToWorkload, ifCD)
	fwCD = chainName(render.LayerFilter, render.KindFromWorkload, ifCD)
	smCD = chainName(render.LayerFilter, render.KindSetMark, ifCD)
)

// noPolicyRules are the rules of a workload chain with no tiers and no
// profiles: established accept, invalid drop, mark clear, final deny
// (acceptance case 41); fw adds the encap drops.
var (
	noPolicyTW = []string{
		"Allow established and related → accept",
		"Drop conntrack invalid → drop",
		"Clear accept and pass marks → set mark",
		"Drop if no profiles matched → drop",
	}
	noPolicyFW = []string{
		"Allow established and related → accept",
		"Drop conntrack invalid → drop",
		"Clear accept and pass marks → set mark",
		"Drop VXLAN encapped packets originating in workloads → drop",
		"Drop IPinIP encapped packets originating in workloads → drop",
		"Drop if no profiles matched → drop",
	}
)

// Cases 19, 20, 21, 23: an active endpoint's chains, dispatch elements,
// routes, statuses and sysctls.
func TestWorkloadAdd(t *testing.T) {
	h := newHarness(t)
	h.step(hostIfaces()...)

	// 1. The endpoint arrives before its interface is up.
	h.step(wlUpdate("pod-11", workloadEp(ifAB)))
	// Case 19: filter tw/fw/sm chains plus dispatch entries; nothing in
	// mangle or raw (the host dispatch chains there stay empty).
	h.wantEndpointChains(twAB, fwAB, smAB)
	h.wantRules(twAB, noPolicyTW...)
	h.wantRules(fwAB, noPolicyFW...)
	h.wantElems(render.MapFromWorkload, ifAB+" → goto "+fwAB)
	h.wantElems(render.MapToWorkload, ifAB+" → goto "+twAB)
	h.wantElems(render.MapEndpointMark, ifAB+" → goto "+smAB)
	h.wantElems(render.MapMangleToHost)
	h.wantElems(render.MapRawFromHost)
	// Case 20: routes, masked, with the MAC.
	h.wantRoutes(0, ifAB+": 10.0.240.0/24 01:02:03:04:05:06 1024")
	h.wantRoutes(1, ifAB+": 2001:db8:2::2/128 01:02:03:04:05:06 1024")
	// Case 21: down until the interface is up; no sysctls written yet.
	h.wantReports(wlKey("pod-11") + " down")
	if w := h.sysFake.TakeWrites(); len(w) != 0 {
		t.Errorf("sysctls written before the interface is up: %v", w)
	}
	h.wantCallbacks("UpdateWorkload →" + ifAB)

	// 2. The interface comes up.
	h.step(ifaceUp(ifAB))
	// Case 23: up, and exactly Felix's sysctls.
	h.wantReports(wlKey("pod-11") + " up")
	want := []string{
		"/proc/sys/net/ipv6/conf/cali12345-ab/accept_ra=0",
		"/proc/sys/net/ipv4/conf/cali12345-ab/route_localnet=1",
		"/proc/sys/net/ipv4/neigh/cali12345-ab/proxy_delay=0",
		"/proc/sys/net/ipv4/conf/cali12345-ab/proxy_arp=1",
		"/proc/sys/net/ipv4/conf/cali12345-ab/forwarding=1",
		"/proc/sys/net/ipv4/conf/cali12345-ab/rp_filter=1",
		"/proc/sys/net/ipv6/conf/cali12345-ab/proxy_ndp=1",
		"/proc/sys/net/ipv6/conf/cali12345-ab/forwarding=1",
	}
	if diff := cmp.Diff(want, writes(h)); diff != "" {
		t.Errorf("sysctl writes (-want +got):\n%s", diff)
	}
	// The interface going up re-renders nothing.
	if h.renders.total != 0 {
		t.Errorf("interface up rendered %d endpoints, want 0", h.renders.total)
	}

	// 3. Down again: down, and no more writes.
	h.step(ifaceDown(ifAB))
	h.wantReports(wlKey("pod-11") + " down")
	if w := writes(h); len(w) != 0 {
		t.Errorf("sysctls written while down: %v", w)
	}

	// 4. Up again: the sysctls are written again (a recreated interface
	// has the kernel's defaults).
	h.step(ifaceUp(ifAB))
	h.wantReports(wlKey("pod-11") + " up")
	if diff := cmp.Diff(want, writes(h)); diff != "" {
		t.Errorf("sysctl writes after coming up again (-want +got):\n%s", diff)
	}
}

func writes(h *harness) []string {
	var out []string
	for _, w := range h.sysFake.TakeWrites() {
		out = append(out, w.String())
	}
	return out
}

func (h *harness) wantCallbacks(want ...string) {
	h.t.Helper()
	if diff := cmp.Diff(want, h.cb.calls, cmpEmpty); diff != "" {
		h.t.Errorf("callbacks of the step (-want +got):\n%s", diff)
	}
}

// Case 22 and quirk 13.5 (docs/felix-differences.md): failing sysctls keep
// the endpoint down, and a later successful retry reports it up (Felix left
// it down until its next event).
func TestQuirk13_5_SysctlRetryReportsUp(t *testing.T) {
	h := newHarness(t)
	h.step(hostIfaces()...)
	rpFilter := "/proc/sys/net/ipv4/conf/" + ifAB + "/rp_filter"
	h.sysFake.SetError(rpFilter, errors.New("injected failure"))

	// 1. Endpoint and interface up, but a fatal write fails: down.
	h.step(wlUpdate("pod-11", workloadEp(ifAB)), ifaceUp(ifAB))
	h.wantReports(wlKey("pod-11") + " down")
	h.wantStatuses(map[string]string{wlKey("pod-11"): StatusDown})

	// 2. The next batch, with nothing new, retries; still failing: no report.
	h.step()
	h.wantReports()
	if got := h.sysctl(rpFilter); got != "<unset>" {
		t.Errorf("rp_filter = %q while failing", got)
	}

	// 3. The failure clears; the next batch's retry succeeds: up, reported.
	h.sysFake.SetError(rpFilter, nil)
	h.step()
	h.wantReports(wlKey("pod-11") + " up")
	if got := h.sysctl(rpFilter); got != "1" {
		t.Errorf("rp_filter = %q, want 1", got)
	}
}

// Cases 24 and 25: NAT external IPs get /32 and /128 routes with the MAC
// when floating IPs are on or the orchestrator is OpenStack; the chains do
// not change.
func TestWorkloadNATRoutes(t *testing.T) {
	nat := func(ep *proto.WorkloadEndpoint) *proto.WorkloadEndpoint {
		ep.Ipv4Nat = []*proto.NatInfo{{ExtIp: "172.16.1.3", IntIp: "10.0.240.2"}, {ExtIp: "172.18.1.4", IntIp: "10.0.240.2"}}
		ep.Ipv6Nat = []*proto.NatInfo{{ExtIp: "2001:db8:3::2", IntIp: "2001:db8:2::2"}, {ExtIp: "2001:db8:4::2", IntIp: "2001:db8:2::2"}}
		return ep
	}
	withNAT4 := []string{
		ifAB + ": 10.0.240.0/24 01:02:03:04:05:06 1024",
		ifAB + ": 172.16.1.3/32 01:02:03:04:05:06 1024",
		ifAB + ": 172.18.1.4/32 01:02:03:04:05:06 1024",
	}
	withNAT6 := []string{
		ifAB + ": 2001:db8:2::2/128 01:02:03:04:05:06 1024",
		ifAB + ": 2001:db8:3::2/128 01:02:03:04:05:06 1024",
		ifAB + ": 2001:db8:4::2/128 01:02:03:04:05:06 1024",
	}
	for _, tc := range []struct {
		name         string
		orchestrator string
		opts         []harnessOpt
		want4, want6 []string
	}{
		{"floating IPs on", "k8s", nil, withNAT4, withNAT6},
		{"floating IPs off", "k8s", []harnessOpt{noFloatingIPs},
			[]string{ifAB + ": 10.0.240.0/24 01:02:03:04:05:06 1024"},
			[]string{ifAB + ": 2001:db8:2::2/128 01:02:03:04:05:06 1024"}},
		{"floating IPs off, OpenStack", "openstack", []harnessOpt{noFloatingIPs}, withNAT4, withNAT6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.opts...)
			id := &proto.WorkloadEndpointID{OrchestratorId: tc.orchestrator, WorkloadId: "pod-11", EndpointId: "eth0"}
			// 1. Without NAT.
			h.step(append(hostIfaces(), &proto.WorkloadEndpointUpdate{Id: id, Endpoint: workloadEp(ifAB)}, ifaceUp(ifAB))...)
			tw, fw := rules(h.chain(twAB)), rules(h.chain(fwAB))
			// 2. With NAT.
			h.step(&proto.WorkloadEndpointUpdate{Id: id, Endpoint: nat(workloadEp(ifAB))})
			h.wantRoutes(0, tc.want4...)
			h.wantRoutes(1, tc.want6...)
			h.wantRules(twAB, tw...)
			h.wantRules(fwAB, fw...)
		})
	}
}

// Case 26: removing the endpoint empties the dispatch maps, removes its
// routes and chains, and reports a status removal.
func TestWorkloadRemove(t *testing.T) {
	h := newHarness(t)
	// 1. Add, up.
	h.step(append(hostIfaces(), wlUpdate("pod-11", workloadEp(ifAB)), ifaceUp(ifAB))...)
	h.wantStatuses(map[string]string{wlKey("pod-11"): StatusUp})

	// 2. Remove.
	h.step(wlRemove("pod-11"))
	h.wantEndpointChains()
	h.wantElems(render.MapFromWorkload)
	h.wantElems(render.MapToWorkload)
	h.wantElems(render.MapEndpointMark)
	h.wantElems(render.MapFromEndpointMark)
	if got := elems(h.arp, render.ARPSetOwn); len(got) != 0 {
		t.Errorf("ARP elements after removal: %v", got)
	}
	h.wantRoutes(0)
	h.wantRoutes(1)
	h.wantReports(wlKey("pod-11") + " removed")
	h.wantStatuses(nil)
	h.wantCallbacks("RemoveWorkload " + ifAB)

	// 3. A removal of an unknown endpoint changes nothing and reports nothing.
	h.step(wlRemove("pod-99"))
	h.wantReports()
	h.wantCallbacks()
}

// Case 27: moving the endpoint to another interface.
func TestWorkloadMove(t *testing.T) {
	h := newHarness(t)
	// 1. On cali12345-ab.
	h.step(append(hostIfaces(), wlUpdate("pod-11", workloadEp(ifAB)), ifaceUp(ifAB), ifaceUp(ifCD))...)

	// 2. Renamed to cali12345-cd (up).
	h.step(wlUpdate("pod-11", workloadEp(ifCD)))
	h.wantEndpointChains(twCD, fwCD, smCD)
	h.wantElems(render.MapFromWorkload, ifCD+" → goto "+fwCD)
	h.wantElems(render.MapToWorkload, ifCD+" → goto "+twCD)
	h.wantElems(render.MapEndpointMark, ifCD+" → goto "+smCD)
	h.wantRoutes(0, ifCD+": 10.0.240.0/24 01:02:03:04:05:06 1024")
	h.wantRoutes(1, ifCD+": 2001:db8:2::2/128 01:02:03:04:05:06 1024")
	h.wantStatuses(map[string]string{wlKey("pod-11"): StatusUp})
	h.wantCallbacks("UpdateWorkload " + ifAB + "→" + ifCD)
	if got := h.sysctl("/proc/sys/net/ipv4/conf/" + ifCD + "/rp_filter"); got != "1" {
		t.Errorf("new interface's rp_filter = %q, want 1", got)
	}
}

// Cases 28 and 31: the tier jumps go into tw (ingress) and fw (egress)
// according to the policy's directions.
func TestWorkloadPolicyDirections(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tier   *proto.TierInfo
		tw, fw []string
	}{
		{"both directions (case 28)", tier("default", "policy1"), []string{pi("default", "policy1")}, []string{po("default", "policy1")}},
		{"ingress only (case 31)", ingressTier("default", "policy1"), []string{pi("default", "policy1")}, nil},
		{"egress only (case 31)", egressTier("default", "policy1"), nil, []string{po("default", "policy1")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.step(append(hostIfaces(), wlUpdate("pod-11", workloadEp(ifAB, tc.tier)))...)
			h.wantJumps(twAB, tc.tw...)
			h.wantJumps(fwAB, tc.fw...)
		})
	}
}

// Cases 29 and 30: two endpoints on one interface name. The lower ID owns
// it; removing the owner promotes the other.
func TestWorkloadShadowing(t *testing.T) {
	withPolicy := func() *proto.WorkloadEndpoint { return workloadEp(ifAB, tier("default", "policy1")) }
	noPolicy := func() *proto.WorkloadEndpoint { return workloadEp(ifAB) }
	hasPolicy := []string{pi("default", "policy1")}

	t.Run("earlier ID takes over (case 29)", func(t *testing.T) {
		h := newHarness(t)
		// 1. pod-11 with policy1.
		h.step(append(hostIfaces(), wlUpdate("pod-11", withPolicy()), ifaceUp(ifAB))...)
		h.wantJumps(twAB, hasPolicy...)
		// 2. pod-10a (no policy) on the same interface sorts first and
		// takes over. pod-11 is displaced: torn down first, then reported.
		h.step(wlUpdate("pod-10a", noPolicy()))
		h.wantRules(twAB, noPolicyTW...)
		h.wantCallbacks("RemoveWorkload "+ifAB, "UpdateWorkload →"+ifAB)
		h.wantStatuses(map[string]string{wlKey("pod-10a"): StatusUp, wlKey("pod-11"): StatusError})
		// 3. Removing pod-11 keeps pod-10a's chains.
		h.step(wlRemove("pod-11"))
		h.wantRules(twAB, noPolicyTW...)
		h.wantReports(wlKey("pod-11") + " removed")
		// 4. Removing pod-10a leaves nothing.
		h.step(wlRemove("pod-10a"))
		h.wantEndpointChains()
		h.wantElems(render.MapToWorkload)
		h.wantRoutes(0)
		h.wantStatuses(nil)
	})

	t.Run("later ID waits, then is promoted (case 30)", func(t *testing.T) {
		h := newHarness(t)
		// 1. pod-11 with policy1.
		h.step(append(hostIfaces(), wlUpdate("pod-11", withPolicy()), ifaceUp(ifAB))...)
		// 2. pod-11a (no policy) sorts after pod-11: pod-11 stays.
		h.step(wlUpdate("pod-11a", noPolicy()))
		h.wantJumps(twAB, hasPolicy...)
		h.wantCallbacks()
		h.wantStatuses(map[string]string{wlKey("pod-11"): StatusUp, wlKey("pod-11a"): StatusError})
		// 3. Removing pod-11 promotes pod-11a within the same batch.
		h.step(wlRemove("pod-11"))
		h.wantRules(twAB, noPolicyTW...)
		h.wantStatuses(map[string]string{wlKey("pod-11a"): StatusUp})
		h.wantRoutes(0, ifAB+": 10.0.240.0/24 01:02:03:04:05:06 1024")
		// 4. Removing pod-11a leaves nothing.
		h.step(wlRemove("pod-11a"))
		h.wantEndpointChains()
		h.wantRoutes(0)
		h.wantStatuses(nil)
	})

	t.Run("three endpoints, lowest ID first", func(t *testing.T) {
		h := newHarness(t)
		// 1. All three at once: the lowest, pod-10a, wins.
		h.step(append(hostIfaces(), ifaceUp(ifAB),
			wlUpdate("pod-11a", noPolicy()), wlUpdate("pod-11", withPolicy()), wlUpdate("pod-10a", noPolicy()))...)
		h.wantStatuses(map[string]string{wlKey("pod-10a"): StatusUp, wlKey("pod-11"): StatusError, wlKey("pod-11a"): StatusError})
		// 2. pod-10a goes: pod-11 (next in order) is promoted, not pod-11a.
		h.step(wlRemove("pod-10a"))
		h.wantJumps(twAB, hasPolicy...)
		h.wantStatuses(map[string]string{wlKey("pod-11"): StatusUp, wlKey("pod-11a"): StatusError})
	})
}

// Case 32: spoofed source prefixes. The RPF-skip sets get the prefixes of
// their family, and v4 rp_filter is 0 while there is an IPv4 exemption.
func TestWorkloadSpoofing(t *testing.T) {
	spoofing := func(prefixes ...string) *proto.WorkloadEndpoint {
		ep := workloadEp(ifAB)
		ep.AllowSpoofedSourcePrefixes = prefixes
		return ep
	}
	rpFilter := "/proc/sys/net/ipv4/conf/" + ifAB + "/rp_filter"
	h := newHarness(t)

	// 1. Prefixes of both families, interface up.
	h.step(append(hostIfaces(), wlUpdate("pod-11", spoofing("8.8.8.8/32", "2001:feed::1/64")), ifaceUp(ifAB))...)
	h.wantElems(render.SetRPFSkipV4, ifAB+" . 8.8.8.8")
	h.wantElems(render.SetRPFSkipV6, ifAB+" . 2001:feed::/64")
	if got := h.sysctl(rpFilter); got != "0" {
		t.Errorf("1: rp_filter = %q, want 0", got)
	}
	// 2. Cleared: the default rp_filter and empty sets.
	h.step(wlUpdate("pod-11", spoofing()))
	h.wantElems(render.SetRPFSkipV4)
	h.wantElems(render.SetRPFSkipV6)
	if got := h.sysctl(rpFilter); got != "1" {
		t.Errorf("2: rp_filter = %q, want 1", got)
	}
	// 3. Re-enabled.
	h.step(wlUpdate("pod-11", spoofing("8.8.8.8/32", "2001:feed::1/64")))
	h.wantElems(render.SetRPFSkipV4, ifAB+" . 8.8.8.8")
	h.wantElems(render.SetRPFSkipV6, ifAB+" . 2001:feed::/64")
	if got := h.sysctl(rpFilter); got != "0" {
		t.Errorf("3: rp_filter = %q, want 0", got)
	}
	// 4. Changed to another non-empty list: applied (Felix kept the old
	// entry: quirk 13.1). Only an IPv6 exemption left: rp_filter, which is
	// IPv4-only, goes back to the default.
	h.step(wlUpdate("pod-11", spoofing("2001:beef::/48")))
	h.wantElems(render.SetRPFSkipV4)
	h.wantElems(render.SetRPFSkipV6, ifAB+" . 2001:beef::/48")
	if got := h.sysctl(rpFilter); got != "1" {
		t.Errorf("4: rp_filter = %q, want 1", got)
	}
	// 5. Removed: empty sets.
	h.step(wlRemove("pod-11"))
	h.wantElems(render.SetRPFSkipV4)
	h.wantElems(render.SetRPFSkipV6)
}

// Overlapping spoofed prefixes of one interface would be overlapping
// elements of the concatenated interval sets, which the kernel refuses
// (EEXIST) with the whole transaction: each family is reduced to disjoint
// prefixes, a prefix inside another collapsing into it, repeats once. An
// IPv4-mapped IPv6 prefix counts as the IPv4 prefix it maps.
func TestWorkloadSpoofingOverlappingPrefixes(t *testing.T) {
	h := newHarness(t)
	ep := workloadEp(ifAB)
	ep.AllowSpoofedSourcePrefixes = []string{"10.1.0.0/16", "10.0.0.0/8", "10.1.2.3", "10.0.0.0/8",
		"::ffff:10.2.0.0/112", "::ffff:192.168.0.0/120", "8.8.8.8", "8.8.8.8/32",
		"2001:feed::/32", "2001:feed:1::/48", "2001:beef::1"}
	h.step(append(hostIfaces(), ifaceUp(ifAB), wlUpdate("pod-11", ep), wlUpdate("pod-12", workloadEp(ifCD)))...)
	h.wantElems(render.SetRPFSkipV4, ifAB+" . 10.0.0.0/8", ifAB+" . 192.168.0.0/24", ifAB+" . 8.8.8.8")
	h.wantElems(render.SetRPFSkipV6, ifAB+" . 2001:beef::1", ifAB+" . 2001:feed::/32")
	h.wantStatuses(map[string]string{wlKey("pod-11"): StatusUp, wlKey("pod-12"): StatusDown})
}

// IDs, tier, policy and profile names are the datastore's: whatever they
// hold, the comments that quote them are ones nft takes, and the endpoint
// is programmed as usual.
func TestWorkloadOddNamesInComments(t *testing.T) {
	h := newHarness(t)
	ep := workloadEp(ifAB, tier(`t"x`, "p\\q\n"), tier("é\xff"+strings.Repeat("é", 70), "pol"))
	ep.ProfileIds = []string{`prof"\`}
	h.step(append(hostIfaces(), ifaceUp(ifAB),
		&proto.WorkloadEndpointUpdate{Id: &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: "pod\t", EndpointId: `e"0`}, Endpoint: ep},
		wlUpdate("pod-12", workloadEp(ifCD)))...)
	h.wantElems(render.MapToWorkload, ifAB+" → goto "+twAB, ifCD+" → goto "+twCD)
	h.wantStatuses(map[string]string{"wl k8s/pod\t/e\"0": StatusUp, wlKey("pod-12"): StatusDown})
	h.wantValidKeys()
	if got, want := h.chain(twAB).Rules[0].Comment, "endpoint k8s/pod_/e_0: Allow established and related"; got != want {
		t.Errorf("comment %q, want %q", got, want)
	}
}

// Case 33: an admin-down endpoint denies everything in tw and fw, has no
// routes, still gets its sysctls, and is down.
func TestWorkloadAdminDown(t *testing.T) {
	h := newHarness(t)
	ep := workloadEp(ifAB, tier("default", "policy1"))
	ep.State = "inactive"
	// 1. Inactive endpoint, interface up.
	h.step(append(hostIfaces(), wlUpdate("pod-11", ep), ifaceUp(ifAB))...)
	h.wantRules(twAB, "Endpoint admin disabled → drop")
	h.wantRules(fwAB, "Endpoint admin disabled → drop")
	h.wantElems(render.MapToWorkload, ifAB+" → goto "+twAB)
	h.wantEndpointChains(twAB, fwAB, smAB)
	h.wantRoutes(0)
	h.wantRoutes(1)
	h.wantStatuses(map[string]string{wlKey("pod-11"): StatusDown})
	if got := h.sysctl("/proc/sys/net/ipv4/conf/" + ifAB + "/proxy_arp"); got != "1" {
		t.Errorf("proxy_arp = %q, want 1", got)
	}
	// 2. Activated: routes and up.
	h.step(wlUpdate("pod-11", workloadEp(ifAB, tier("default", "policy1"))))
	h.wantJumps(twAB, pi("default", "policy1"))
	h.wantRoutes(0, ifAB+": 10.0.240.0/24 01:02:03:04:05:06 1024")
	h.wantStatuses(map[string]string{wlKey("pod-11"): StatusUp})
}

// A workload-prefixed interface that no endpoint owns gets the workload
// interface settings as soon as it comes up, as in Felix (accept_ra=0
// before any endpoint exists); an endpoint that later takes it keeps them
// and adds its spoofing exemption; a gone interface is forgotten.
func TestUnownedWorkloadInterfaceIsConfigured(t *testing.T) {
	h := newHarness(t)
	h.step(hostIfaces()...)
	want := map[string]string{
		"/proc/sys/net/ipv4/conf/" + ifAB + "/route_localnet": "1",
		"/proc/sys/net/ipv4/conf/" + ifAB + "/proxy_arp":      "1",
		"/proc/sys/net/ipv4/conf/" + ifAB + "/forwarding":     "1",
		"/proc/sys/net/ipv4/conf/" + ifAB + "/rp_filter":      "1",
		"/proc/sys/net/ipv4/neigh/" + ifAB + "/proxy_delay":   "0",
		"/proc/sys/net/ipv6/conf/" + ifAB + "/proxy_ndp":      "1",
		"/proc/sys/net/ipv6/conf/" + ifAB + "/forwarding":     "1",
		"/proc/sys/net/ipv6/conf/" + ifAB + "/accept_ra":      "0",
	}

	// 1. The interface comes up; no endpoint has it.
	h.step(ifaceUp(ifAB))
	for path, v := range want {
		if got := h.sysctl(path); got != v {
			t.Errorf("step 1: %s = %q, want %q", path, got, v)
		}
	}
	// A host interface is not a workload interface: untouched.
	if got := h.sysctl("/proc/sys/net/ipv6/conf/eth0/accept_ra"); got != "<unset>" {
		t.Errorf("step 1: eth0 accept_ra = %q, want it untouched", got)
	}

	// 2. An endpoint with an IPv4 spoofing allowance takes it: rp_filter 0.
	ep := workloadEp(ifAB)
	ep.AllowSpoofedSourcePrefixes = []string{"192.168.0.0/16"}
	h.step(wlUpdate("pod-11", ep))
	if got := h.sysctl("/proc/sys/net/ipv4/conf/" + ifAB + "/rp_filter"); got != "0" {
		t.Errorf("step 2: rp_filter = %q, want 0", got)
	}
	h.wantStatuses(map[string]string{wlKey("pod-11"): StatusUp})

	// 3. The endpoint goes, then the interface: nothing is written, and
	//    a new interface of that name is configured when it comes up.
	h.step(wlRemove("pod-11"))
	h.step(ifaceGone(ifAB))
	h.sysFake.TakeWrites()
	h.step(ifaceUp(ifAB))
	if got := h.sysctl("/proc/sys/net/ipv6/conf/" + ifAB + "/accept_ra"); got != "0" {
		t.Errorf("step 3: accept_ra = %q, want 0", got)
	}
	if got := len(h.sysFake.TakeWrites()); got == 0 {
		t.Errorf("step 3: the re-created interface was not configured")
	}
}

package endpoints

// Felix's known quirks and the behaviour we chose instead, one test each,
// named after the quirk's number in docs/felix-differences.md.

import (
	"strings"
	"testing"

	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

// Quirks 13.1 and 13.2: a rename removes everything of the old name:
// chains, dispatch, spoof elements, policy-group references and the ARP
// chain. Felix left the old rpf-skip rule, a group reference and the ARP
// chain behind.
func TestQuirk13_1_13_2_RenameCleansUpOldName(t *testing.T) {
	h := newHarness(t)
	ep := func(iface string, tiers ...*proto.TierInfo) *proto.WorkloadEndpoint {
		e := workloadEp(iface, tiers...)
		e.AllowSpoofedSourcePrefixes = []string{"8.8.8.8/32"}
		return e
	}
	// 1. On cali12345-ab with a shared group [A1 A2].
	h.step(append(groupSelectors(), wlUpdate("pod-11", ep(ifAB, tier("default", "A1", "A2"))))...)
	oldGroups := h.groupChains()
	if got := elems(h.arp, render.ARPSetOwn); len(oldGroups) != 2 || len(got) != 1 || !strings.HasPrefix(got[0], ifAB) {
		t.Fatalf("1: want two group chains and an ARP element of %s; got %v and %v", ifAB, oldGroups, got)
	}

	// 2. Renamed to cali12345-cd, now with group [B1 B2].
	h.step(wlUpdate("pod-11", ep(ifCD, tier("default", "B1", "B2"))))
	h.wantElems(render.SetRPFSkipV4, ifCD+" . 8.8.8.8")
	h.wantElems(render.MapFromWorkload, ifCD+" → goto "+fwCD)
	if got := elems(h.arp, render.ARPSetOwn); len(got) != 1 || !strings.HasPrefix(got[0], ifCD) {
		t.Errorf("2: ARP elements = %v, want only %s's", got, ifCD)
	}
	for _, g := range oldGroups {
		if h.table.Chain(g) != nil {
			t.Errorf("2: old name's group chain %s left behind", g)
		}
	}
	h.wantEndpointChains(append(h.groupChains(), twCD, fwCD, smCD)...)
	if got := h.sysctl("/proc/sys/net/ipv4/conf/" + ifCD + "/rp_filter"); got != "<unset>" {
		t.Errorf("2: rp_filter of the new, down interface written: %q", got)
	}

	// 3. Removal leaves nothing at all.
	h.step(wlRemove("pod-11"))
	h.wantEndpointChains()
	h.wantElems(render.SetRPFSkipV4)
	if got := elems(h.arp, render.ARPSetOwn); len(got) != 0 {
		t.Errorf("3: ARP elements = %v", got)
	}
}

// Quirk 13.3: an update of a shadowed endpoint drops its shadowed copy, so
// stale data is never promoted later.
func TestQuirk13_3_UpdateOfShadowedDropsStaleEntry(t *testing.T) {
	h := newHarness(t)
	// 1. pod-10a owns cali12345-ab; pod-11 waits in its shadow.
	h.step(append(hostIfaces(), ifaceUp(ifAB), ifaceUp(ifCD),
		wlUpdate("pod-10a", workloadEp(ifAB)), wlUpdate("pod-11", workloadEp(ifAB, tier("default", "policy1"))))...)
	h.wantStatuses(map[string]string{wlKey("pod-10a"): StatusUp, wlKey("pod-11"): StatusError})
	// 2. pod-11 moves to a name of its own.
	h.step(wlUpdate("pod-11", workloadEp(ifCD, tier("default", "policy1"))))
	h.wantStatuses(map[string]string{wlKey("pod-10a"): StatusUp, wlKey("pod-11"): StatusUp})
	// 3. pod-10a goes. Felix would now promote pod-11's stale copy onto
	// cali12345-ab; here the name is simply free.
	h.step(wlRemove("pod-10a"))
	h.wantEndpointChains(twCD, fwCD, smCD)
	h.wantElems(render.MapToWorkload, ifCD+" → goto "+twCD)
	h.wantRoutes(0, ifCD+": 10.0.240.0/24 01:02:03:04:05:06 1024")
	h.wantStatuses(map[string]string{wlKey("pod-11"): StatusUp})
}

// Quirk 13.4: displaced and shadowed endpoints are reported (as error:
// they exist but are not programmed, like a host endpoint that lost its
// interface), in the same batch as the winner.
func TestQuirk13_4_DisplacedAndShadowedGetStatus(t *testing.T) {
	h := newHarness(t)
	// 1. pod-11 owns the name.
	h.step(append(hostIfaces(), ifaceUp(ifAB), wlUpdate("pod-11", workloadEp(ifAB)))...)
	h.wantReports(wlKey("pod-11") + " up")
	// 2. pod-11a arrives and is shadowed on arrival.
	h.step(wlUpdate("pod-11a", workloadEp(ifAB)))
	h.wantReports(wlKey("pod-11a") + " error")
	// 3. pod-10a arrives and displaces pod-11.
	h.step(wlUpdate("pod-10a", workloadEp(ifAB)))
	h.wantReports(wlKey("pod-10a")+" up", wlKey("pod-11")+" error")
	var reason string
	for _, s := range h.m.Statuses() {
		if s.ID == "k8s/pod-11/endpoint-id-11" {
			reason = s.Reason
		}
	}
	if want := "interface cali12345-ab belongs to workload endpoint k8s/pod-10a/endpoint-id-11"; reason != want {
		t.Errorf("reason = %q, want %q", reason, want)
	}
}

// Quirk 13.6 (and 13.7): a selector-only change that dirties the host
// endpoints after ResolveUpdateBatch re-resolves them, so the `*` endpoint
// keeps its chains and default; Felix reused a map without `*`. Its
// AddInterface callback fires once.
func TestQuirk13_6_StarSurvivesSelectorOnlyChange(t *testing.T) {
	h := newHarness(t)
	// 1. A `*` endpoint and an eth0 endpoint using polA.
	h.step(append(hostIfaces(), policyUpdate("polA", "x"),
		hepUpdate("star", hostEp("*", tier("default", "polA"))), hepUpdate("id1", hostEp("eth0", tier("default", "polA"))))...)
	h.wantJumps(render.ChainFromHost, fhAny)
	h.wantCallbacks("UpdateHostEndpoint star", "UpdateHostEndpoint id1", "AddInterface "+AllInterfaces+" star", "AddInterface eth0 id1")
	// 2. Only polA's selector changes.
	h.step(policyUpdate("polA", "y"))
	h.wantJumps(render.ChainFromHost, fhAny)
	h.wantEndpointChains(append([]string{thAny, fhAny, thfwAny, fhfwAny, mangleAny}, eth0Chains...)...)
	h.wantJumps(fhAny, render.ChainFailsafeIn, pi("default", "polA"))
	h.wantCallbacks()
	h.wantReports()
	// 3. Another host endpoint change: still no second AddInterface.
	h.step(hepUpdate("id2", hostEp("eth9")))
	h.wantCallbacks("UpdateHostEndpoint id2")
}

// Quirk 13.8: host endpoint marks are released when the interface loses
// its endpoint (Felix never released them).
func TestQuirk13_8_HostEndpointMarksReleased(t *testing.T) {
	h := newHarness(t)
	// 1. id1 on eth0 gets a mark.
	h.step(append(hostIfaces(), hepUpdate("id1", hostEp("eth0")))...)
	got := elems(h.table, render.MapFromEndpointMark)
	if len(got) != 1 {
		t.Fatalf("1: endpoint mark elements = %v, want one", got)
	}
	mark := h.m.endpointMark("eth0") // already allocated: returns it
	// 2. Removed: the mark is free for anyone.
	h.step(hepRemove("id1"))
	h.wantElems(render.MapFromEndpointMark)
	if err := h.m.marks.SetEndpointMark("someone-else", mark); err != nil {
		t.Errorf("2: eth0's mark %#x was not released: %v", mark, err)
	}
}

// Quirk 13.9: workload prefixes are literal. With prefix "ta.", Felix's
// regexp also matched "tab1" and ignored its addresses; here tab1 is a host
// interface like any other.
func TestQuirk13_9_PrefixesAreLiteral(t *testing.T) {
	h := newHarness(t, func(_ *Config, r *render.Config) { r.InterfacePrefixes = []string{"cali", "ta."} })
	h.step(ifaceUp("tab1"), ifaceAddrs("tab1", "10.9.9.9"), ifaceAddrs("ta.1", "10.9.9.8"),
		hepUpdate("id1", hostEpIPs([]string{"10.9.9.9"}, nil)), hepUpdate("id2", hostEpIPs([]string{"10.9.9.8"}, nil)))
	h.wantStatuses(map[string]string{hepKey("id1"): StatusUp, hepKey("id2"): StatusError})
}

// Quirk 13.10: a bad endpoint is rejected with a reason and an error
// status, and never stops the others (Felix panicked on a bad net).
// Rejection fails closed: the interface leaves the dispatch maps, so its
// traffic meets the unknown-interface drop.
func TestQuirk13_10_BadEndpointDoesNotStopOthers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*proto.WorkloadEndpoint)
		reason string
	}{
		{"unparsable IPv4 net", func(e *proto.WorkloadEndpoint) { e.Ipv4Nets = []string{"10.0.240.300/24"} }, `ipv4Nets[0]: "10.0.240.300/24"`},
		{"IPv6 net in ipv4_nets", func(e *proto.WorkloadEndpoint) { e.Ipv4Nets = []string{"2001:db8::1/128"} }, "not an IPv4 CIDR or address"},
		{"unparsable IPv6 net", func(e *proto.WorkloadEndpoint) { e.Ipv6Nets = []string{"2001:db8::g/128"} }, `ipv6Nets[0]: "2001:db8::g/128"`},
		{"bad MAC", func(e *proto.WorkloadEndpoint) { e.Mac = "01:02:03:04:05" }, `mac: "01:02:03:04:05" is not a MAC address`},
		{"bad NAT IP", func(e *proto.WorkloadEndpoint) { e.Ipv4Nat = []*proto.NatInfo{{ExtIp: "nope"}} }, `ipv4Nat[0].extIp: "nope"`},
		{"bad spoof prefix", func(e *proto.WorkloadEndpoint) { e.AllowSpoofedSourcePrefixes = []string{"8.8.8/8"} }, "allowSpoofedSourcePrefixes[0]"},
		{"no interface name", func(e *proto.WorkloadEndpoint) { e.Name = "" }, "name: missing"},
		{"interface name too long", func(e *proto.WorkloadEndpoint) { e.Name = "cali0123456789ab" }, "longer than 15 bytes"},
		// Names nft cannot take would fail the whole transaction.
		{"non-ASCII interface name", func(e *proto.WorkloadEndpoint) { e.Name = "calié" }, "nftables cannot match it"},
		{"quote in interface name", func(e *proto.WorkloadEndpoint) { e.Name = `cali"x` }, `has character '"'`},
		{"backslash in interface name", func(e *proto.WorkloadEndpoint) { e.Name = `cali\x` }, "nftables cannot match it"},
		{"space in interface name", func(e *proto.WorkloadEndpoint) { e.Name = "cali x" }, "nftables cannot match it"},
		{"IPv4-mapped prefix too short for IPv4", func(e *proto.WorkloadEndpoint) { e.Ipv4Nets = []string{"::ffff:10.0.0.0/95"} }, "not an IPv4 CIDR or address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			bad := workloadEp(ifAB, tier("default", "policy1"))
			// 1. A good endpoint on ab, and a good one on cd.
			h.step(append(hostIfaces(), ifaceUp(ifAB), ifaceUp(ifCD),
				wlUpdate("pod-11", workloadEp(ifAB)), wlUpdate("pod-12", workloadEp(ifCD)))...)
			// 2. pod-11 turns bad: its chains, dispatch and routes go.
			tc.mutate(bad)
			h.step(wlUpdate("pod-11", bad))
			h.wantStatuses(map[string]string{wlKey("pod-11"): StatusError, wlKey("pod-12"): StatusUp})
			h.wantElems(render.MapToWorkload, ifCD+" → goto "+twCD)
			h.wantElems(render.MapFromWorkload, ifCD+" → goto "+fwCD)
			h.wantElems(render.SetWorkloadIfaces, ifCD)
			h.wantEndpointChains(twCD, fwCD, smCD)
			h.wantValidKeys()
			h.wantRoutes(0, ifCD+": 10.0.240.0/24 01:02:03:04:05:06 1024")
			var reason string
			for _, s := range h.m.Statuses() {
				if s.ID == "k8s/pod-11/endpoint-id-11" {
					reason = s.Reason
				}
			}
			if !strings.Contains(reason, tc.reason) {
				t.Errorf("2: reason %q does not mention %q", reason, tc.reason)
			}
			// 3. Fixed: back in service.
			h.step(wlUpdate("pod-11", workloadEp(ifAB)))
			h.wantStatuses(map[string]string{wlKey("pod-11"): StatusUp, wlKey("pod-12"): StatusUp})
			h.wantEndpointChains(twAB, fwAB, smAB, twCD, fwCD, smCD)
		})
	}
}

// Felix promoted a shadowed endpoint only when the owner was removed. A
// rename frees the name just the same, so here it promotes too.
func TestRenamePromotesShadowed(t *testing.T) {
	h := newHarness(t)
	// 1. pod-10a owns ab, pod-11 is shadowed.
	h.step(append(hostIfaces(), ifaceUp(ifAB), ifaceUp(ifCD),
		wlUpdate("pod-10a", workloadEp(ifAB)), wlUpdate("pod-11", workloadEp(ifAB, tier("default", "policy1"))))...)
	// 2. pod-10a moves to cd: pod-11 takes ab in the same batch.
	h.step(wlUpdate("pod-10a", workloadEp(ifCD)))
	h.wantStatuses(map[string]string{wlKey("pod-10a"): StatusUp, wlKey("pod-11"): StatusUp})
	h.wantJumps(twAB, pi("default", "policy1"))
	h.wantRules(twCD, noPolicyTW...)
	h.wantRoutes(0, ifAB+": 10.0.240.0/24 01:02:03:04:05:06 1024", ifCD+": 10.0.240.0/24 01:02:03:04:05:06 1024")
}

// An active endpoint renamed onto a name a lower ID owns is shadowed, and
// leaves its old name (Felix kept it programmed there).
func TestRenameIntoShadowLeavesOldName(t *testing.T) {
	h := newHarness(t)
	// 1. pod-10a on ab, pod-11 on cd.
	h.step(append(hostIfaces(), wlUpdate("pod-10a", workloadEp(ifAB)), wlUpdate("pod-11", workloadEp(ifCD)))...)
	// 2. pod-11 renamed to ab: shadowed, and cd is empty.
	h.step(wlUpdate("pod-11", workloadEp(ifAB)))
	h.wantEndpointChains(twAB, fwAB, smAB)
	h.wantElems(render.MapToWorkload, ifAB+" → goto "+twAB)
	h.wantRoutes(0, ifAB+": 10.0.240.0/24 01:02:03:04:05:06 1024")
	h.wantStatuses(map[string]string{wlKey("pod-10a"): StatusDown, wlKey("pod-11"): StatusError})
}

// Within one batch, the last message for an ID wins, and an update
// followed by a removal never reaches the tables (OnUpdate only records).
func TestPendingLastMessageWins(t *testing.T) {
	h := newHarness(t)
	h.step(append(hostIfaces(), wlUpdate("pod-11", workloadEp(ifAB)), wlRemove("pod-11"))...)
	h.wantEndpointChains()
	h.wantReports()
	if h.renders.total != 0 {
		t.Errorf("rendered %d endpoints, want 0", h.renders.total)
	}
	h.step(wlRemove("pod-11"), wlUpdate("pod-11", workloadEp(ifCD)))
	h.wantEndpointChains(twCD, fwCD, smCD)
}

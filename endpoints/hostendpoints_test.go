package endpoints

// Host endpoint scenarios: acceptance cases 1–18 (docs/acceptance-cases.md).

import (
	"slices"
	"strings"
	"testing"

	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

// Host endpoint chain names on eth0 and on the `*` pseudo interface.
var (
	thEth0       = chainName(render.LayerFilter, render.KindToHost, "eth0")
	fhEth0       = chainName(render.LayerFilter, render.KindFromHost, "eth0")
	thfwEth0     = chainName(render.LayerFilter, render.KindToHostForward, "eth0")
	fhfwEth0     = chainName(render.LayerFilter, render.KindFromHostForward, "eth0")
	smEth0       = chainName(render.LayerFilter, render.KindSetMark, "eth0")
	mangleThEth0 = chainName(render.LayerMangle, render.KindToHost, "eth0")
	mangleFhEth0 = chainName(render.LayerMangle, render.KindFromHost, "eth0")
	rawThEth0    = chainName(render.LayerRaw, render.KindToHost, "eth0")
	rawFhEth0    = chainName(render.LayerRaw, render.KindFromHost, "eth0")

	thEth1     = chainName(render.LayerFilter, render.KindToHost, "eth1")
	fhEth1     = chainName(render.LayerFilter, render.KindFromHost, "eth1")
	thfwEth1   = chainName(render.LayerFilter, render.KindToHostForward, "eth1")
	fhfwEth1   = chainName(render.LayerFilter, render.KindFromHostForward, "eth1")
	smEth1     = chainName(render.LayerFilter, render.KindSetMark, "eth1")
	mangleThE1 = chainName(render.LayerMangle, render.KindToHost, "eth1")

	thAny     = chainName(render.LayerFilter, render.KindToHost, AllInterfaces)
	fhAny     = chainName(render.LayerFilter, render.KindFromHost, AllInterfaces)
	thfwAny   = chainName(render.LayerFilter, render.KindToHostForward, AllInterfaces)
	fhfwAny   = chainName(render.LayerFilter, render.KindFromHostForward, AllInterfaces)
	mangleAny = chainName(render.LayerMangle, render.KindToHost, AllInterfaces)
)

// eth0Chains are the chains of a host endpoint with normal tiers on eth0.
var eth0Chains = []string{thEth0, fhEth0, thfwEth0, fhfwEth0, smEth0, mangleThEth0}

// Rule summaries of host endpoint chains without any tier:
// normal chains deny all but established and failsafe traffic, forward
// chains allow by default.
var (
	noTierFH = []string{
		"Allow established and related → accept",
		"Drop conntrack invalid → drop",
		"Failsafe ports → jump " + render.ChainFailsafeIn,
		"Clear accept and pass marks → set mark",
		"Drop if no profiles matched → drop",
	}
	noTierForward = []string{
		"Allow established and related → accept",
		"Drop conntrack invalid → drop",
		"Clear accept and pass marks → set mark",
		"Allow forwarded traffic by default → set mark",
		"Return for accepted forward traffic → return",
	}
)

func hostEp(name string, tiers ...*proto.TierInfo) *proto.HostEndpoint {
	return &proto.HostEndpoint{Name: name, Tiers: tiers}
}

// hostEpIPs matches by expected addresses (no name).
func hostEpIPs(v4, v6 []string, tiers ...*proto.TierInfo) *proto.HostEndpoint {
	return &proto.HostEndpoint{ExpectedIpv4Addrs: v4, ExpectedIpv6Addrs: v6, Tiers: tiers}
}

func eth0IP() []string { return []string{"10.0.240.10"} }

func hepKey(id string) string { return "hep " + id }

// Case 1: with no host endpoints, every dispatch chain holds only its vmap
// lookup and default, every map is empty, and nothing is reported.
func TestHostNoEndpoints(t *testing.T) {
	h := newHarness(t)
	h.step(hostIfaces()...)
	h.wantEndpointChains()
	h.wantRules(render.ChainFromWorkload, "Dispatch to endpoint chain by interface → vmap @"+render.MapFromWorkload, "Unknown interface → drop")
	h.wantRules(render.ChainToWorkload, "Dispatch to endpoint chain by interface → vmap @"+render.MapToWorkload, "Unknown interface → drop")
	for _, c := range []string{
		render.ChainFromHost, render.ChainToHost, render.ChainFromHostForward, render.ChainToHostForward,
		render.ChainMangleFromHost, render.ChainMangleToHost, render.ChainRawFromHost, render.ChainRawToHost,
	} {
		if got := len(h.chain(c).Rules); got != 1 {
			t.Errorf("%s has %d rules, want only the vmap lookup: %v", c, got, rules(h.chain(c)))
		}
	}
	h.wantRules(render.ChainSetEndpointMark,
		"Set the endpoint mark of the input interface → vmap @"+render.MapEndpointMark,
		"Unknown endpoint → drop", "Unknown endpoint → drop", // cali*, tap*
		"Non-Cali endpoint mark → set mark")
	h.wantRules(render.ChainFromEndpointMark,
		"Dispatch to endpoint chain by endpoint mark → vmap @"+render.MapFromEndpointMark, "Unknown interface → drop")
	for _, s := range h.table.SetNames() {
		h.wantElems(s)
	}
	h.wantReports()
	h.wantCallbacks()
}

// Case 2: a `*` endpoint becomes every host dispatch chain's default, and
// is up whatever the interfaces do.
func TestHostStarEndpoint(t *testing.T) {
	h := newHarness(t)
	h.step(append(hostIfaces(), hepUpdate("id1", hostEp("*", tier("default", "polA"))))...)
	h.wantStatuses(map[string]string{hepKey("id1"): StatusUp})
	h.wantEndpointChains(thAny, fhAny, thfwAny, fhfwAny, mangleAny)
	h.wantJumps(fhAny, render.ChainFailsafeIn, pi("default", "polA"))
	h.wantJumps(thAny, render.ChainFailsafeOut, po("default", "polA"))
	h.wantJumps(render.ChainFromHost, fhAny)
	h.wantJumps(render.ChainToHost, thAny)
	h.wantJumps(render.ChainFromHostForward, fhfwAny)
	h.wantJumps(render.ChainToHostForward, thfwAny)
	// The mangle egress default skips traffic to local workloads.
	h.wantRules(render.ChainMangleToHost,
		"Dispatch to endpoint chain by interface → vmap @"+render.MapMangleToHost,
		"Skip egress WHEP policy for traffic to local workload → return",
		"Skip egress WHEP policy for traffic to local workload → return",
		"Host endpoint * → goto "+mangleAny)
	// No pre-DNAT tiers: no pre-DNAT default; raw never has one.
	h.wantJumps(render.ChainMangleFromHost)
	h.wantJumps(render.ChainRawFromHost)
	for _, s := range []string{render.MapFromHost, render.MapToHost, render.MapMangleToHost, render.MapEndpointMark} {
		h.wantElems(s)
	}
	h.wantCallbacks("UpdateHostEndpoint id1", "AddInterface "+AllInterfaces+" id1")

	// An interface going down does not change a `*`-only endpoint.
	h.step(ifaceDown("eth0"))
	h.wantReports()
	h.wantStatuses(map[string]string{hepKey("id1"): StatusUp})
}

// Cases 3–6: a named endpoint on eth0, a competitor matching by IP, and who
// wins as they come and go.
func TestHostEndpointOwnership(t *testing.T) {
	tierA, tierB := tier("default", "polA"), tier("default", "polB")

	t.Run("cases 3-5", func(t *testing.T) {
		h := newHarness(t)
		// 1. (case 3) id1 named eth0 with tierA.
		h.step(append(hostIfaces(), hepUpdate("id1", hostEp("eth0", tierA)))...)
		h.wantEndpointChains(eth0Chains...)
		h.wantJumps(fhEth0, render.ChainFailsafeIn, pi("default", "polA"))
		h.wantJumps(thEth0, render.ChainFailsafeOut, po("default", "polA"))
		h.wantRules(fhfwEth0, noTierForward...)
		h.wantRules(thfwEth0, noTierForward...)
		h.wantJumps(mangleThEth0, render.ChainMangleFailsafeOut, layerPolicy(render.LayerMangle, render.Egress, "default", "polA"))
		h.wantElems(render.MapFromHost, "eth0 → goto "+fhEth0)
		h.wantElems(render.MapToHost, "eth0 → goto "+thEth0)
		h.wantElems(render.MapFromHostForward, "eth0 → goto "+fhfwEth0)
		h.wantElems(render.MapToHostForward, "eth0 → goto "+thfwEth0)
		h.wantElems(render.MapMangleToHost, "eth0 → goto "+mangleThEth0)
		h.wantElems(render.MapEndpointMark, "eth0 → goto "+smEth0)
		h.wantElems(render.MapMangleFromHost)
		h.wantElems(render.MapRawFromHost)
		h.wantElems(render.MapRawToHost)
		h.wantReports(hepKey("id1") + " up")
		h.wantCallbacks("UpdateHostEndpoint id1", "AddInterface eth0 id1")

		// 2. (case 4) id2, a higher ID matching eth0 by IPv4, changes
		// nothing; it is in error.
		h.step(hepUpdate("id2", hostEpIPs(eth0IP(), nil, tierB)))
		h.wantJumps(fhEth0, render.ChainFailsafeIn, pi("default", "polA"))
		h.wantStatuses(map[string]string{hepKey("id1"): StatusUp, hepKey("id2"): StatusError})

		// 3. (case 5) Removing id1 hands eth0 to id2.
		h.step(hepRemove("id1"))
		h.wantJumps(fhEth0, render.ChainFailsafeIn, pi("default", "polB"))
		h.wantStatuses(map[string]string{hepKey("id2"): StatusUp})
		h.wantCallbacks("RemoveHostEndpoint id1", "UpdateInterface eth0 id2")

		// 4. Removing id2 empties everything.
		h.step(hepRemove("id2"))
		h.wantEndpointChains()
		h.wantElems(render.MapFromHost)
		h.wantElems(render.MapEndpointMark)
		h.wantStatuses(nil)
		h.wantCallbacks("RemoveHostEndpoint id2", "RemoveInterface eth0")
	})

	t.Run("case 6", func(t *testing.T) {
		h := newHarness(t)
		// 1. id1 named eth0 with tierA.
		h.step(append(hostIfaces(), hepUpdate("id1", hostEp("eth0", tierA)))...)
		// 2. id0, a lower ID matching eth0 by IPv4, wins.
		h.step(hepUpdate("id0", hostEpIPs(eth0IP(), nil, tierB)))
		h.wantJumps(fhEth0, render.ChainFailsafeIn, pi("default", "polB"))
		h.wantStatuses(map[string]string{hepKey("id0"): StatusUp, hepKey("id1"): StatusError})
		// 3. Removing id1 leaves id0.
		h.step(hepRemove("id1"))
		h.wantJumps(fhEth0, render.ChainFailsafeIn, pi("default", "polB"))
		h.wantStatuses(map[string]string{hepKey("id0"): StatusUp})
		// 4. Removing id0 empties everything.
		h.step(hepRemove("id0"))
		h.wantEndpointChains()
		h.wantStatuses(nil)
	})
}

// Cases 7, 8, 9, 14, 15, 16, 17: one host endpoint, one batch.
func TestHostEndpointVariants(t *testing.T) {
	tierA := tier("default", "polA")
	for _, tc := range []struct {
		name   string
		ep     *proto.HostEndpoint
		status string
		check  func(h *harness)
	}{
		{
			name:   "case 7: untracked",
			ep:     &proto.HostEndpoint{Name: "eth0", UntrackedTiers: []*proto.TierInfo{tierA}},
			status: StatusUp,
			check: func(h *harness) {
				h.wantEndpointChains(append(eth0Chains, rawThEth0, rawFhEth0)...)
				h.wantRules(rawFhEth0,
					"Failsafe ports → jump "+render.ChainRawFailsafeIn,
					"Clear accept and pass marks → set mark",
					"Start of tier default → set mark",
					"Policy default.polA → jump "+layerPolicy(render.LayerRaw, render.Ingress, "default", "polA"),
					"Untrack if policy accepted → notrack",
					"Return if policy accepted → return")
				h.wantElems(render.MapRawFromHost, "eth0 → goto "+rawFhEth0)
				h.wantElems(render.MapRawToHost, "eth0 → goto "+rawThEth0)
				// The normal filter chains have no tier; forward allows.
				h.wantRules(fhEth0, noTierFH...)
				h.wantRules(fhfwEth0, noTierForward...)
			},
		},
		{
			name:   "case 8: apply on forward",
			ep:     &proto.HostEndpoint{Name: "eth0", ForwardTiers: []*proto.TierInfo{tierA}},
			status: StatusUp,
			check: func(h *harness) {
				h.wantJumps(fhfwEth0, pi("default", "polA"))
				h.wantJumps(thfwEth0, po("default", "polA"))
				h.wantRules(fhEth0, noTierFH...)
			},
		},
		{
			name:   "case 8: pre-DNAT",
			ep:     &proto.HostEndpoint{Name: "eth0", PreDnatTiers: []*proto.TierInfo{tierA}},
			status: StatusUp,
			check: func(h *harness) {
				h.wantEndpointChains(append(eth0Chains, mangleFhEth0)...)
				h.wantRules(mangleFhEth0,
					"Allow established and related → accept",
					"Drop conntrack invalid → drop",
					"Failsafe ports → jump "+render.ChainMangleFailsafeIn,
					"Clear accept and pass marks → set mark",
					"Start of tier default → set mark",
					"Policy default.polA → jump "+layerPolicy(render.LayerMangle, render.Ingress, "default", "polA"),
					"Return if policy accepted → return")
				h.wantElems(render.MapMangleFromHost, "eth0 → goto "+mangleFhEth0)
				h.wantRules(fhEth0, noTierFH...)
			},
		},
		{
			name:   "case 9: ingress only",
			ep:     hostEp("eth0", ingressTier("default", "polA")),
			status: StatusUp,
			check: func(h *harness) {
				h.wantJumps(fhEth0, render.ChainFailsafeIn, pi("default", "polA"))
				h.wantJumps(thEth0, render.ChainFailsafeOut)
			},
		},
		{
			name:   "case 9: egress only",
			ep:     hostEp("eth0", egressTier("default", "polA")),
			status: StatusUp,
			check: func(h *harness) {
				h.wantJumps(fhEth0, render.ChainFailsafeIn)
				h.wantJumps(thEth0, render.ChainFailsafeOut, po("default", "polA"))
			},
		},
		{
			name:   "case 14: named interface does not exist",
			ep:     hostEp("eth1", tierA),
			status: StatusError,
			check:  func(h *harness) { h.wantEndpointChains() },
		},
		{
			name:   "case 15: IPv4 address alone",
			ep:     hostEpIPs([]string{"10.0.240.10"}, nil, tierA),
			status: StatusUp,
			check:  func(h *harness) { h.wantEndpointChains(eth0Chains...) },
		},
		{
			name:   "case 15: IPv6 address alone",
			ep:     hostEpIPs(nil, []string{"2001:db8::10.0.240.10"}, tierA),
			status: StatusUp,
			check:  func(h *harness) { h.wantEndpointChains(eth0Chains...) },
		},
		{
			name:   "case 16: name and a matching IP",
			ep:     &proto.HostEndpoint{Name: "eth0", ExpectedIpv4Addrs: eth0IP(), Tiers: []*proto.TierInfo{tierA}},
			status: StatusUp,
			check:  func(h *harness) { h.wantEndpointChains(eth0Chains...) },
		},
		{
			name:   "case 16: another name excludes IP matching",
			ep:     &proto.HostEndpoint{Name: "eth1", ExpectedIpv4Addrs: eth0IP(), Tiers: []*proto.TierInfo{tierA}},
			status: StatusError,
			check:  func(h *harness) { h.wantEndpointChains() },
		},
		{
			name:   "case 17: unmatched IPv4",
			ep:     hostEpIPs([]string{"8.8.8.8"}, nil, tierA),
			status: StatusError,
			check:  func(h *harness) { h.wantEndpointChains() },
		},
		{
			name:   "case 17: unmatched IPv6",
			ep:     hostEpIPs(nil, []string{"fe08::2"}, tierA),
			status: StatusError,
			check:  func(h *harness) { h.wantEndpointChains() },
		},
		{
			name:   "unparsable expected address never matches",
			ep:     hostEpIPs([]string{"10.0.240.300"}, nil, tierA),
			status: StatusError,
			check:  func(h *harness) { h.wantEndpointChains() },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.step(append(hostIfaces(), hepUpdate("id1", tc.ep))...)
			h.wantStatuses(map[string]string{hepKey("id1"): tc.status})
			tc.check(h)
		})
	}
}

// Case 10: the untracked, forward and pre-DNAT variants follow the same
// ownership rules, and replacing one with a tracked version moves the
// policy back to the normal filter chains.
func TestHostEndpointVariantOwnership(t *testing.T) {
	tierA := tier("default", "polA")
	for _, tc := range []struct {
		name string
		ep   func(*proto.TierInfo) *proto.HostEndpoint
		// chain holds the variant's policy jump for polA (ingress side).
		chain, policy string
	}{
		{"untracked", func(t *proto.TierInfo) *proto.HostEndpoint {
			return &proto.HostEndpoint{ExpectedIpv4Addrs: eth0IP(), UntrackedTiers: []*proto.TierInfo{t}}
		}, rawFhEth0, layerPolicy(render.LayerRaw, render.Ingress, "default", "polA")},
		{"forward", func(t *proto.TierInfo) *proto.HostEndpoint {
			return &proto.HostEndpoint{ExpectedIpv4Addrs: eth0IP(), ForwardTiers: []*proto.TierInfo{t}}
		}, fhfwEth0, pi("default", "polA")},
		{"pre-DNAT", func(t *proto.TierInfo) *proto.HostEndpoint {
			return &proto.HostEndpoint{ExpectedIpv4Addrs: eth0IP(), PreDnatTiers: []*proto.TierInfo{t}}
		}, mangleFhEth0, layerPolicy(render.LayerMangle, render.Ingress, "default", "polA")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			hasPolicy := func(chain string) bool {
				c := h.table.Chain(chain)
				if c == nil {
					return false
				}
				for _, j := range jumps(c) {
					if j == tc.policy || j == pi("default", "polA") {
						return true
					}
				}
				return false
			}
			// 1. id1 named eth0 with a normal tier.
			h.step(append(hostIfaces(), hepUpdate("id1", hostEp("eth0", tier("default", "polB"))))...)
			// 2. id0, lower, matches eth0 by IP with the variant: it wins.
			h.step(hepUpdate("id0", tc.ep(tierA)))
			if !hasPolicy(tc.chain) {
				t.Errorf("2: %s lacks the %s policy: %v", tc.chain, tc.name, h.endpointChains())
			}
			h.wantRules(fhEth0, noTierFH...)
			h.wantStatuses(map[string]string{hepKey("id0"): StatusUp, hepKey("id1"): StatusError})
			// 3. id0 replaced by a tracked version: the policy moves back
			// to the normal filter chains.
			h.step(hepUpdate("id0", hostEpIPs(eth0IP(), nil, tierA)))
			h.wantJumps(fhEth0, render.ChainFailsafeIn, pi("default", "polA"))
			if tc.chain != fhfwEth0 && h.table.Chain(tc.chain) != nil {
				t.Errorf("3: %s still present", tc.chain)
			}
			if tc.chain == fhfwEth0 {
				h.wantRules(fhfwEth0, noTierForward...)
			}
			// 4. Removing id0 reverts to id1.
			h.step(hepRemove("id0"))
			h.wantJumps(fhEth0, render.ChainFailsafeIn, pi("default", "polB"))
			h.wantStatuses(map[string]string{hepKey("id1"): StatusUp})
		})
	}
}

// Cases 11–13: a second interface, endpoints on both, one endpoint on both.
func TestHostEndpointTwoInterfaces(t *testing.T) {
	tierA := tier("default", "polA")
	eth1 := []any{ifaceUp("eth1"), ifaceAddrs("eth1", "10.0.240.30")}
	eth1Chains := []string{thEth1, fhEth1, thfwEth1, fhfwEth1, smEth1, mangleThE1}

	t.Run("case 11", func(t *testing.T) {
		h := newHarness(t)
		// 1. id1 on eth0.
		h.step(append(hostIfaces(), hepUpdate("id1", hostEp("eth0", tierA)))...)
		// 2. eth1 appears: no change.
		h.step(eth1...)
		h.wantEndpointChains(eth0Chains...)
		h.wantReports()
		// 3. id22 matching eth1's IP: chains for both, both up.
		h.step(hepUpdate("id22", hostEpIPs([]string{"10.0.240.30"}, nil, tierA)))
		h.wantEndpointChains(append(eth0Chains, eth1Chains...)...)
		h.wantStatuses(map[string]string{hepKey("id1"): StatusUp, hepKey("id22"): StatusUp})
		// 4. eth1 goes down: id22 down, id1 untouched.
		h.step(ifaceDown("eth1"))
		h.wantReports(hepKey("id22") + " down")
	})

	t.Run("case 12", func(t *testing.T) {
		h := newHarness(t)
		// 1. id1 on eth0, eth1 present.
		h.step(append(append(hostIfaces(), eth1...), hepUpdate("id1", hostEp("eth0", tierA)))...)
		// 2. id0 matches both interfaces' IPs: it takes both.
		h.step(hepUpdate("id0", hostEpIPs([]string{"10.0.240.10", "10.0.240.30"}, nil, tier("default", "polB"))))
		h.wantEndpointChains(append(eth0Chains, eth1Chains...)...)
		h.wantJumps(fhEth0, render.ChainFailsafeIn, pi("default", "polB"))
		h.wantJumps(fhEth1, render.ChainFailsafeIn, pi("default", "polB"))
		h.wantStatuses(map[string]string{hepKey("id0"): StatusUp, hepKey("id1"): StatusError})
	})

	t.Run("case 13", func(t *testing.T) {
		h := newHarness(t)
		h.step(append(append(hostIfaces(), eth1...), hepUpdate("id1", hostEp("eth0", tierA)), hepUpdate("id22", hostEp("eth1", tierA)))...)
		h.wantEndpointChains(append(eth0Chains, eth1Chains...)...)
		h.wantStatuses(map[string]string{hepKey("id1"): StatusUp, hepKey("id22"): StatusUp})
	})
}

// Case 18: an endpoint configured before its interface is reported is in
// error; once the interface's state and addresses arrive it is programmed
// and up.
func TestHostEndpointBeforeInterface(t *testing.T) {
	h := newHarness(t)
	// 1. No interfaces known yet.
	h.step(hepUpdate("id1", hostEp("eth0", tier("default", "polA"))))
	h.wantEndpointChains()
	h.wantStatuses(map[string]string{hepKey("id1"): StatusError})
	// 2. eth0's state and addresses.
	h.step(ifaceUp("eth0"), ifaceAddrs("eth0", "10.0.240.10"))
	h.wantEndpointChains(eth0Chains...)
	h.wantStatuses(map[string]string{hepKey("id1"): StatusUp})
	// 3. Down: down. Then the interface goes away (nil addresses).
	h.step(ifaceDown("eth0"))
	h.wantStatuses(map[string]string{hepKey("id1"): StatusDown})
	h.step(InterfaceStateUpdate{Name: "eth0", State: IfaceGone}, InterfaceAddrsUpdate{Name: "eth0"})
	h.wantEndpointChains()
	h.wantStatuses(map[string]string{hepKey("id1"): StatusError})
}

// Addresses of workload interfaces never make them host endpoint
// candidates.
func TestHostEndpointIgnoresWorkloadInterfaces(t *testing.T) {
	h := newHarness(t)
	h.step(append(hostIfaces(), ifaceAddrs("cali1", "10.0.240.99"), ifaceAddrs("tap2", "10.0.240.98"),
		hepUpdate("id1", hostEpIPs([]string{"10.0.240.99", "10.0.240.98"}, nil)))...)
	h.wantEndpointChains()
	h.wantStatuses(map[string]string{hepKey("id1"): StatusError})
}

// Linux allows interface names that nftables cannot take (quotes,
// backslashes, non-ASCII bytes); in a dispatch map one would fail the whole
// transaction. Such an interface is left out of resolution: an endpoint
// that won it has no chains there and reports an error, even when it is
// programmed on other interfaces (its policy is not enforced on that one);
// the others are unaffected.
func TestHostEndpointUnnamableInterface(t *testing.T) {
	h := newHarness(t)
	const quoted, nonASCII = `et"h1`, "ethé"
	// 1. id1 names the quoted interface; id2 matches eth0 and the
	// non-ASCII interface by address; id3 is a plain endpoint on lo.
	h.step(append(hostIfaces(),
		ifaceUp(quoted), ifaceAddrs(quoted, "10.0.241.1"),
		ifaceUp(nonASCII), ifaceAddrs(nonASCII, "10.0.242.1"),
		hepUpdate("id1", hostEp(quoted, tier("default", "polA"))),
		hepUpdate("id2", hostEpIPs([]string{"10.0.240.10", "10.0.242.1"}, nil, tier("default", "polA"))),
		hepUpdate("id3", hostEp("lo", tier("default", "polA"))),
	)...)
	lo := func(kind string) string { return chainName(render.LayerFilter, kind, "lo") }
	loChains := []string{lo(render.KindToHost), lo(render.KindFromHost), lo(render.KindToHostForward),
		lo(render.KindFromHostForward), lo(render.KindSetMark), chainName(render.LayerMangle, render.KindToHost, "lo")}
	h.wantEndpointChains(append(slices.Clone(eth0Chains), loChains...)...)
	h.wantElems(render.MapFromHost, "eth0 → goto "+fhEth0, "lo → goto "+lo(render.KindFromHost))
	h.wantStatuses(map[string]string{hepKey("id1"): StatusError, hepKey("id2"): StatusError, hepKey("id3"): StatusUp})
	h.wantValidKeys()
	reasons := map[string]string{}
	for _, s := range h.m.Statuses() {
		reasons[s.ID] = s.Reason
	}
	for id, want := range map[string]string{"id1": `not programmed on interface "et\"h1"`, "id2": `not programmed on interface "ethé"`} {
		if !strings.Contains(reasons[id], want) {
			t.Errorf("1: %s: reason %q does not mention %q", id, reasons[id], want)
		}
	}
	// 2. The unnamable interfaces go: id1 matches nothing (the usual
	// error), id2 is up on eth0.
	h.step(InterfaceAddrsUpdate{Name: quoted}, InterfaceAddrsUpdate{Name: nonASCII})
	h.wantEndpointChains(append(slices.Clone(eth0Chains), loChains...)...)
	h.wantStatuses(map[string]string{hepKey("id1"): StatusError, hepKey("id2"): StatusUp, hepKey("id3"): StatusUp})
	for _, s := range h.m.Statuses() {
		if s.ID == "id1" && !strings.Contains(s.Reason, "no interface matches it") {
			t.Errorf("2: id1: reason %q", s.Reason)
		}
	}
}

package endpoints

// Policy groups: acceptance cases 36 and 37 (docs/acceptance-cases.md).
// Grouping itself is render's; the manager supplies the selectors it learnt
// from ActivePolicyUpdate, re-renders endpoints when a selector changes, and
// refcounts the shared group chains across endpoints.

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

// selectors: A* policies select "a", B* policies "b".
func groupSelectors() []any {
	return []any{
		policyUpdate("A1", "a"), policyUpdate("A2", "a"),
		policyUpdate("B1", "b"), policyUpdate("B2", "b"),
	}
}

// isGroupChain reports whether name is a policy-group chain of any layer.
func isGroupChain(name string) bool {
	for _, k := range []string{render.KindGroupIn, render.KindGroupOut} {
		for _, l := range []render.Layer{render.LayerFilter, render.LayerMangle, render.LayerRaw} {
			if strings.HasPrefix(name, string(l)+"-"+k+"-") {
				return true
			}
		}
	}
	return false
}

// policyJumps describes the policy jumps of a chain, expanding group
// chains: "default.A1" for an inlined policy, "[default.A1 default.A2]"
// for a group.
func (h *harness) policyJumps(chain string) []string {
	h.t.Helper()
	var out []string
	short := func(target string) string {
		// filter-pi-default.A1 → default.A1
		parts := strings.SplitN(target, "-", 3)
		return parts[len(parts)-1]
	}
	for _, j := range jumps(h.chain(chain)) {
		switch {
		case isGroupChain(j):
			var members []string
			for _, m := range jumps(h.chain(j)) {
				members = append(members, short(m))
			}
			out = append(out, "["+strings.Join(members, " ")+"]")
		case strings.Contains(j, "-pi-") || strings.Contains(j, "-po-"):
			out = append(out, short(j))
		}
	}
	return out
}

func (h *harness) groupChains() []string {
	var out []string
	for _, n := range h.table.ChainNames() {
		if isGroupChain(n) {
			out = append(out, n)
		}
	}
	return out
}

// Case 36: how one endpoint's policies group.
func TestPolicyGrouping(t *testing.T) {
	pols := func(tier string, names ...string) *proto.TierInfo {
		return ingressTier(tier, names...)
	}
	for _, tc := range []struct {
		name string
		tier *proto.TierInfo
		want []string
	}{
		{"single policy: inlined", pols("default", "A1"), []string{"default.A1"}},
		{"same selector: one group", pols("default", "A1", "A2"), []string{"[default.A1 default.A2]"}},
		{"different selectors: two inlined", pols("default", "A1", "B1"), []string{"default.A1", "default.B1"}},
		{"A1,A2,B1,B2: two groups", pols("default", "A1", "A2", "B1", "B2"),
			[]string{"[default.A1 default.A2]", "[default.B1 default.B2]"}},
		{"A1,B1,B2,A2: three groups", pols("default", "A1", "B1", "B2", "A2"),
			[]string{"default.A1", "[default.B1 default.B2]", "default.A2"}},
		{"non-default tier", pols("tier1", "A1", "B1", "B2", "A2"),
			[]string{"tier1.A1", "[tier1.B1 tier1.B2]", "tier1.A2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.step(append(groupSelectors(), wlUpdate("pod-11", workloadEp(ifAB, tc.tier)))...)
			if diff := cmp.Diff(tc.want, h.policyJumps(twAB)); diff != "" {
				t.Errorf("policy jumps of tw (-want +got):\n%s", diff)
			}
		})
	}
}

// Case 37: group chains shared across endpoints.
func TestPolicyGroupSharing(t *testing.T) {
	a1a2 := func() *proto.TierInfo { return tier("default", "A1", "A2") }

	t.Run("two workloads", func(t *testing.T) {
		h := newHarness(t)
		// 1. Two workloads with the same group, in both directions.
		h.step(append(groupSelectors(),
			wlUpdate("pod-11", workloadEp(ifAB, a1a2())), wlUpdate("pod-12", workloadEp(ifCD, a1a2())))...)
		groupIn, groupOut := jumps(h.chain(twAB))[0], jumps(h.chain(fwAB))[0]
		if !isGroupChain(groupIn) || !isGroupChain(groupOut) || groupIn == groupOut {
			t.Fatalf("1: want distinct ingress and egress group chains, got %q and %q", groupIn, groupOut)
		}
		if got := jumps(h.chain(twCD))[0]; got != groupIn {
			t.Errorf("1: second endpoint jumps to %q, want the shared %q", got, groupIn)
		}
		if diff := cmp.Diff([]string{groupIn, groupOut}, h.groupChains(), sortStrings); diff != "" {
			t.Errorf("1: group chains (-want +got):\n%s", diff)
		}
		// 2. Removing one endpoint keeps the shared chains.
		h.step(wlRemove("pod-11"))
		if diff := cmp.Diff([]string{groupIn, groupOut}, h.groupChains(), sortStrings); diff != "" {
			t.Errorf("2: group chains (-want +got):\n%s", diff)
		}
		// 3. A selector change regroups the remaining endpoint (only it is
		// re-rendered) and the old group chains go.
		h.step(policyUpdate("A2", "a-changed"))
		if diff := cmp.Diff([]string{"default.A1", "default.A2"}, h.policyJumps(twCD)); diff != "" {
			t.Errorf("3: policy jumps (-want +got):\n%s", diff)
		}
		if got := h.groupChains(); len(got) != 0 {
			t.Errorf("3: group chains left: %v", got)
		}
		if h.renders.total != 1 {
			t.Errorf("3: selector change rendered %d endpoints, want 1", h.renders.total)
		}
		// 4. An unchanged selector re-renders nothing.
		h.step(policyUpdate("A2", "a-changed"))
		if h.renders.total != 0 {
			t.Errorf("4: unchanged selector rendered %d endpoints, want 0", h.renders.total)
		}
		// 5. Updating the endpoint back to a shared group recreates it;
		// removing it removes every group chain.
		h.step(policyUpdate("A2", "a"))
		if len(h.groupChains()) != 2 {
			t.Errorf("5: group chains: %v", h.groupChains())
		}
		h.step(wlRemove("pod-12"))
		if got := h.groupChains(); len(got) != 0 {
			t.Errorf("5: group chains left: %v", got)
		}
	})

	t.Run("workload and host endpoint", func(t *testing.T) {
		for _, order := range []string{"workload first", "host first"} {
			t.Run(order, func(t *testing.T) {
				h := newHarness(t)
				wl := wlUpdate("pod-11", workloadEp(ifAB, a1a2()))
				hep := hepUpdate("id1", hostEp("eth0", a1a2()))
				first, second := []any{wl}, []any{hep}
				if order == "host first" {
					first, second = second, first
				}
				// 1 and 2. Both endpoints, one after the other.
				h.step(append(append(hostIfaces(), groupSelectors()...), first...)...)
				h.step(second...)
				group := jumps(h.chain(twAB))[0]
				if got := jumps(h.chain(fhEth0))[1]; got != group {
					t.Fatalf("host fh jumps to %q, want the workload's group %q", got, group)
				}
				// 3. Removing the workload keeps the group for the host.
				h.step(wlRemove("pod-11"))
				if h.table.Chain(group) == nil {
					t.Errorf("3: shared group %q removed while the host endpoint uses it", group)
				}
				// 4. Removing the host endpoint removes it.
				h.step(hepRemove("id1"))
				if got := h.groupChains(); len(got) != 0 {
					t.Errorf("4: group chains left: %v", got)
				}
			})
		}
	})

	for _, tc := range []struct {
		name  string
		ep    func(name string) *proto.HostEndpoint
		chain string // eth0's chain holding the ingress group jump
		layer render.Layer
	}{
		{"two host endpoints", func(n string) *proto.HostEndpoint { return hostEp(n, a1a2()) }, fhEth0, render.LayerFilter},
		{"two host endpoints, pre-DNAT", func(n string) *proto.HostEndpoint {
			return &proto.HostEndpoint{Name: n, PreDnatTiers: []*proto.TierInfo{a1a2()}}
		}, mangleFhEth0, render.LayerMangle},
		{"two host endpoints, apply on forward", func(n string) *proto.HostEndpoint {
			return &proto.HostEndpoint{Name: n, ForwardTiers: []*proto.TierInfo{a1a2()}}
		}, fhfwEth0, render.LayerFilter},
		{"two host endpoints, untracked", func(n string) *proto.HostEndpoint {
			return &proto.HostEndpoint{Name: n, UntrackedTiers: []*proto.TierInfo{a1a2()}}
		}, rawFhEth0, render.LayerRaw},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			// 1. Two host endpoints on eth0 and eth1 with the same group.
			h.step(append(append(hostIfaces(), groupSelectors()...),
				ifaceUp("eth1"), ifaceAddrs("eth1", "10.0.240.30"),
				hepUpdate("id1", tc.ep("eth0")), hepUpdate("id2", tc.ep("eth1")))...)
			var group string
			for _, j := range jumps(h.chain(tc.chain)) {
				if isGroupChain(j) {
					group = j
				}
			}
			if !strings.HasPrefix(group, string(tc.layer)+"-gi-") {
				t.Fatalf("1: %s jumps to group %q, want a %s ingress group: %v", tc.chain, group, tc.layer, rules(h.chain(tc.chain)))
			}
			// 2. Removing one keeps the group; removing both removes it.
			h.step(hepRemove("id1"))
			if h.table.Chain(group) == nil {
				t.Errorf("2: shared group %q removed while id2 uses it", group)
			}
			h.step(hepRemove("id2"))
			if got := h.groupChains(); len(got) != 0 {
				t.Errorf("3: group chains left: %v", got)
			}
		})
	}
}

var sortStrings = cmpopts.SortSlices(func(a, b string) bool { return a < b })

// With SharedEndpointChains, endpoints with identical chain bodies share
// one content-addressed chain, refcounted like the group chains.
func TestSharedEndpointChains(t *testing.T) {
	h := newHarness(t, func(_ *Config, r *render.Config) { r.SharedEndpointChains = true })
	// 1. Two endpoints with the same policy.
	h.step(append(hostIfaces(),
		wlUpdate("pod-11", workloadEp(ifAB, tier("default", "policy1"))), wlUpdate("pod-12", workloadEp(ifCD, tier("default", "policy1"))))...)
	toAB, toCD := elems(h.table, render.MapToWorkload)[0], elems(h.table, render.MapToWorkload)[1]
	shared := strings.TrimPrefix(toAB, ifAB+" → goto ")
	if toCD != ifCD+" → goto "+shared {
		t.Fatalf("1: dispatch %q and %q do not share a chain", toAB, toCD)
	}
	// 2. One goes: the shared chain stays for the other.
	h.step(wlRemove("pod-11"))
	if h.table.Chain(shared) == nil {
		t.Errorf("2: shared chain %s removed while pod-12 uses it", shared)
	}
	// 3. The other changes policy: the old body is no longer used.
	h.step(wlUpdate("pod-12", workloadEp(ifCD, tier("default", "policy2"))))
	if h.table.Chain(shared) != nil {
		t.Errorf("3: unused shared chain %s left behind", shared)
	}
	// 4. Removed: no endpoint chain at all (the set-mark chain is owned).
	h.step(wlRemove("pod-12"))
	h.wantEndpointChains()
}

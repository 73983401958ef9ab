package render

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nftep/nftep/proto"
)

// selectors returns a SelectorFunc over name → selector.
func selectors(m map[string]string) SelectorFunc {
	return func(id *proto.PolicyID) (string, bool) {
		s, ok := m[id.GetName()]
		return s, ok
	}
}

func groupNames(gs []policyGroup) [][]string {
	var out [][]string
	for _, g := range gs {
		var names []string
		for _, p := range g.policies {
			names = append(names, p.GetName())
		}
		out = append(out, names)
	}
	return out
}

// TestGroupPolicies is acceptance case 36 (docs/acceptance-cases.md):
// consecutive policies with one selector group, never reordered.
func TestGroupPolicies(t *testing.T) {
	sel := selectors(map[string]string{"a1": "a", "a2": "a", "b1": "b", "b2": "b"})
	for _, tc := range []struct {
		name string
		in   []*proto.PolicyID
		want [][]string
	}{
		{"single", pols(gnp("a1")), [][]string{{"a1"}}},
		{"same selector", pols(gnp("a1"), gnp("a2")), [][]string{{"a1", "a2"}}},
		{"different selectors", pols(gnp("a1"), gnp("b1")), [][]string{{"a1"}, {"b1"}}},
		{"A1,A2,B1,B2", pols(gnp("a1"), gnp("a2"), gnp("b1"), gnp("b2")), [][]string{{"a1", "a2"}, {"b1", "b2"}}},
		{"A1,B1,B2,A2: never reordered", pols(gnp("a1"), gnp("b1"), gnp("b2"), gnp("a2")), [][]string{{"a1"}, {"b1", "b2"}, {"a2"}}},
		{"unknown selectors group as empty", pols(gnp("x"), gnp("y")), [][]string{{"x", "y"}}},
	} {
		for _, tierName := range []string{"default", "tier1"} {
			t.Run(tc.name+"/"+tierName, func(t *testing.T) {
				got := groupNames(groupPolicies(tierName, Ingress, tc.in, sel))
				if d := cmp.Diff(tc.want, got); d != "" {
					t.Errorf("groups (-want +got):\n%s", d)
				}
			})
		}
	}
}

// TestGroupUID is acceptance case 51: unique across selector, direction and
// policy lists, delimiter-ambiguous cases included, and stable.
func TestGroupUID(t *testing.T) {
	g := func(sel string, dir Dir, names ...string) policyGroup {
		var ids []*proto.PolicyID
		for _, n := range names {
			ids = append(ids, gnp(n))
		}
		return policyGroup{tier: "default", dir: dir, selector: sel, policies: ids}
	}
	groups := []policyGroup{
		g("a", Ingress, "p1", "p2"),
		g("a", Egress, "p1", "p2"),
		g("b", Ingress, "p1", "p2"),
		g("a", Ingress, "p2", "p1"),
		g("a", Ingress, "p1", "p2", "p3"),
		// Delimiter games: the same bytes split differently.
		g("a\n1", Ingress, "p1"),
		g("a", Ingress, "1\np1"),
		g("a", Ingress, "p1\np2"),
		g("", Ingress, "a", "p1"),
		{tier: "default", dir: Ingress, selector: "a", policies: pols(staged("p1"), gnp("p2"))},
		{tier: "other", dir: Ingress, selector: "a", policies: pols(gnp("p1"), gnp("p2"))},
	}
	seen := map[string]int{}
	for i, gr := range groups {
		uid := gr.uid()
		if len(uid) != groupUIDLen {
			t.Errorf("uid %q has length %d", uid, len(uid))
		}
		if j, dup := seen[uid]; dup {
			t.Errorf("groups %d and %d share uid %s", j, i, uid)
		}
		seen[uid] = i
		if again := gr.uid(); again != uid {
			t.Errorf("uid not stable: %s then %s", uid, again)
		}
	}
	// Pinned: a change here renames every group chain on every node.
	if got, want := groups[0].uid(), pinnedGroupUID; got != want {
		t.Errorf("uid of the pinned group changed: %s, was %s", got, want)
	}
}

const pinnedGroupUID = "nlj-TWVPxcpbAoPxHSSK"

// TestGroupChainReturnOnVerdict is acceptance case 51: a "Return on
// verdict" before the 6th, 11th… non-staged policy, staged ones skipped.
func TestGroupChainReturnOnVerdict(t *testing.T) {
	cfg := DefaultConfig()
	var ids []*proto.PolicyID
	for i := 1; i <= 12; i++ {
		ids = append(ids, gnp(fmt.Sprintf("p%d", i)))
		if i == 3 {
			ids = append(ids, staged("s1"))
		}
	}
	c := policyGroup{tier: "default", dir: Ingress, selector: "x", policies: ids}.chain(LayerFilter, cfg.Marks)
	var got []string
	for _, r := range c.Rules {
		got = append(got, r.Comment)
	}
	want := []string{
		"Policy default.p1", "Policy default.p2", "Policy default.p3", "Policy default.p4", "Policy default.p5",
		"Return on verdict",
		"Policy default.p6", "Policy default.p7", "Policy default.p8", "Policy default.p9", "Policy default.p10",
		"Return on verdict",
		"Policy default.p11", "Policy default.p12",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("group chain (-want +got):\n%s", d)
	}
	// The first jump of each block is unconditional, the others are not.
	for i, r := range c.Rules {
		unconditional := len(r.Match) == 0
		wantUncond := i == 0 || (i > 0 && c.Rules[i-1].Comment == "Return on verdict")
		if r.Comment != "Return on verdict" && unconditional != wantUncond {
			t.Errorf("rule %d (%s): unconditional=%v, want %v", i, r.Comment, unconditional, wantUncond)
		}
	}
}

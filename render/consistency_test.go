package render

import (
	"strings"
	"testing"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// TestEveryRuleSaysWhy: every rule and every map element of every golden
// case carries a comment that nft takes (within the 128-byte limit, nothing
// nft cannot print back), even when the IDs and names it quotes hold
// quotes, backslashes, control characters or invalid UTF-8; and the model
// validates.
func TestEveryRuleSaysWhy(t *testing.T) {
	long := wep("cali1234", "10.65.0.2", tier("a-very-long-tier-name-for-testing-comment-limits", pols(gnp("p")), nil))
	cases := append(goldenCaseList(), goldenCase{name: "long endpoint id", render: func(cfg Config) ([]Output, []*nft.Chain) {
		return one(Workload(cfg, WorkloadInput{ID: wlID(strings.Repeat("ns", 40), strings.Repeat("pod", 40)), Endpoint: long}))
	}})
	for _, gc := range cases {
		cfg := gc.configFor()
		outs, extra := gc.render(cfg)
		m := buildModel(t, cfg, nil, outs...)
		for _, c := range extra {
			m.SetChain(c)
		}
		for _, n := range m.ChainNames() {
			if isPolicyPlaceholder(n) {
				continue
			}
			for i, r := range m.Chain(n).Rules {
				if r.Comment == "" || r.Comment != nft.SanitizeComment(r.Comment) {
					t.Errorf("%s: chain %s rule %d: comment %q", gc.name, n, i, r.Comment)
				}
			}
		}
		for _, n := range m.SetNames() {
			for k, e := range m.Set(n).Elements {
				if e.Comment == "" || e.Comment != nft.SanitizeComment(e.Comment) {
					t.Errorf("%s: set %s element %s: comment %q", gc.name, n, k, e.Comment)
				}
			}
		}
		if err := m.Validate(); err != nil {
			t.Errorf("%s: %v", gc.name, err)
		}
	}
}

// TestStarDispatchTargetsExist: every chain HostDispatch sends to for a
// "*" endpoint is one that Host renders for it, and without "*" the host
// dispatch chains reference nothing but their maps.
func TestStarDispatchTargetsExist(t *testing.T) {
	cfg := DefaultConfig()
	for _, star := range []*proto.HostEndpoint{
		{Name: "*"},
		{Name: "*", PreDnatTiers: []*proto.TierInfo{tier("default", pols(gnp("p")), nil)}},
		{Name: "*", UntrackedTiers: []*proto.TierInfo{tier("default", pols(gnp("u")), nil)}},
	} {
		rendered := map[string]bool{}
		for _, c := range Host(cfg, HostInput{ID: "star", Interface: AnyInterface, Endpoint: star}).Chains {
			rendered[c.Name] = true
		}
		gotos := 0
		for _, c := range HostDispatch(cfg, star) {
			for _, r := range c.Rules {
				if v, ok := r.Action.(nft.Verdict); ok && v.Kind == nft.Goto {
					gotos++
					if !rendered[v.Chain] {
						t.Errorf("%s goes to %s, which Host does not render for %v", c.Name, v.Chain, star)
					}
				}
			}
		}
		// filter from/to/fwd from/to and mangle to always; mangle from
		// only with pre-DNAT tiers; raw never.
		want := 5
		if len(star.PreDnatTiers) > 0 {
			want = 6
		}
		if gotos != want {
			t.Errorf("%v: %d default gotos, want %d", star, gotos, want)
		}
	}
	for _, c := range HostDispatch(cfg, nil) {
		if len(c.Rules) != 1 {
			t.Errorf("without *, %s has %d rules, want only the vmap", c.Name, len(c.Rules))
		}
	}
}

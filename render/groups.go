package render

import (
	"crypto/sha3"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// groupUIDLen is the length of a policy group's ID: 20 base64 characters are
// 120 bits of SHA3-224, so a collision among the groups of one node is not a
// practical concern.
const groupUIDLen = 20

// returnOnVerdictEvery is the block size of a group chain: a group chain
// checks for a verdict (accept or pass) before every fifth jump, so a long
// group stops soon after a policy decided, without paying a mark test per
// jump for short groups (as Felix's PolicyGroupToIptablesChains in
// felix/rules/endpoints.go).
const returnOnVerdictEvery = 5

// policyGroup is a run of consecutive policies of one tier and direction
// with the same selector. A group of two or more non-staged policies gets a
// chain of its own, so that endpoints selecting the same run share it.
type policyGroup struct {
	tier     string
	dir      Dir
	selector string
	policies []*proto.PolicyID
}

// groupPolicies splits pols into groups of consecutive equal selectors,
// keeping their order (A1,B1,B2,A2 → [A1],[B1,B2],[A2]).
func groupPolicies(tier string, dir Dir, pols []*proto.PolicyID, sel SelectorFunc) []policyGroup {
	var groups []policyGroup
	for _, p := range pols {
		s := ""
		if sel != nil {
			if v, ok := sel(p); ok {
				s = v
			}
		}
		if n := len(groups); n > 0 && groups[n-1].selector == s {
			groups[n-1].policies = append(groups[n-1].policies, p)
			continue
		}
		groups = append(groups, policyGroup{tier: tier, dir: dir, selector: s, policies: []*proto.PolicyID{p}})
	}
	return groups
}

// active returns the group's non-staged policies: the only ones jumped to.
func (g policyGroup) active() []*proto.PolicyID {
	var out []*proto.PolicyID
	for _, p := range g.policies {
		if !isStaged(p) {
			out = append(out, p)
		}
	}
	return out
}

// inlined reports whether the group's policies are jumped to directly from
// the endpoint chain: a chain for at most one policy would only add a jump.
func (g policyGroup) inlined() bool { return len(g.active()) <= 1 }

// uid identifies the group by everything its chain depends on. Each field is
// length-prefixed, so no choice of selector or names can make two different
// groups hash the same input (the "delimiter-ambiguous" lists of acceptance
// case 51, docs/acceptance-cases.md).
func (g policyGroup) uid() string {
	var b strings.Builder
	field := func(s string) { fmt.Fprintf(&b, "%d:%s\n", len(s), s) }
	field(g.tier)
	field(dirWord(g.dir))
	field(g.selector)
	field(fmt.Sprint(len(g.policies)))
	for _, p := range g.policies {
		field(policyName(p))
	}
	sum := sha3.Sum224([]byte(b.String()))
	return base64.RawURLEncoding.EncodeToString(sum[:])[:groupUIDLen]
}

func (g policyGroup) chainName(layer Layer) string {
	kind := KindGroupIn
	if g.dir == Egress {
		kind = KindGroupOut
	}
	return string(layer) + "-" + kind + "-" + g.uid()
}

// chain renders the group chain: a jump per non-staged policy; the first of
// each block of returnOnVerdictEvery is unconditional (a "Return on
// verdict" rule right before it, or the chain's start, guarantees no verdict
// yet), the others skip once a policy accepted or passed.
func (g policyGroup) chain(layer Layer, m Marks) *nft.Chain {
	c := &nft.Chain{Name: g.chainName(layer)}
	verdictBits := m.Accept | m.Pass
	for i, p := range g.active() {
		target := policyChainName(layer, g.dir, g.tier, p)
		why := "Policy " + g.tier + "." + policyName(p)
		switch {
		case i == 0:
			c.Rules = append(c.Rules, rule(why, jump(target)))
		case i%returnOnVerdictEvery == 0:
			c.Rules = append(c.Rules,
				rule("Return on verdict", ret, markAny(verdictBits)),
				rule(why, jump(target)))
		default:
			c.Rules = append(c.Rules, rule(why, jump(target), markClear(verdictBits)))
		}
	}
	return c
}

func dirWord(d Dir) string {
	if d == Egress {
		return "egress"
	}
	return "ingress"
}

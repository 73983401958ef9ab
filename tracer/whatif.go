package tracer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/nftep/nftep/nft"
)

// Alternative is a near miss: a rule on the packet's path that failed on
// exactly one of its matches, and would have changed the verdict had that
// match held.
type Alternative struct {
	// Step is the rule, as the original walk evaluated it.
	Step Step
	// Match is the one match that did not hold.
	Match nft.Match
	// Condition says in words what would have to be true of the packet
	// ("the source address were in @ipset-s.app-pod-a-v4 (Felix IP set
	// s:app-pod-a)").
	Condition string
	// Verdict is the verdict the packet would then get.
	Verdict string
}

// maxAlternatives bounds Alternatives: the ones nearest the decision come
// first, and a reader wants the few that matter.
const maxAlternatives = 5

// Alternatives finds what would change res, the verdict of p in m: each rule
// the walk evaluated that failed on exactly one match is walked again as if
// that match held, and kept when the verdict changes. The rules nearest the
// decision come first.
func Alternatives(m *nft.Model, p Packet, res *Result) ([]Alternative, error) {
	var out []Alternative
	seen := map[RuleRef]bool{}
	for i := len(res.Steps) - 1; i >= 0 && len(out) < maxAlternatives; i-- {
		st := res.Steps[i]
		if st.Matched || len(st.Failed) != 1 || seen[st.ref()] || !flowCondition(st.Failed[0]) {
			continue
		}
		seen[st.ref()] = true
		alt, err := trace(m, p, map[RuleRef]bool{st.ref(): true})
		if err != nil {
			return nil, err
		}
		if alt.Verdict == res.Verdict {
			continue
		}
		out = append(out, Alternative{Step: st, Match: st.Failed[0], Condition: describe(m, st.Failed[0]), Verdict: alt.Verdict})
	}
	return out, nil
}

// flowCondition says whether m tests the flow itself (its addresses,
// ports, protocol and interfaces) rather than the state nftep's own rules
// keep in the mark, or conntrack's view of the connection: only the former
// are conditions a user can change by changing policy or the packet.
func flowCondition(m nft.Match) bool {
	switch m.(type) {
	case nft.Mark, nft.CtStateMatch, nft.CtStatusMatch, nft.CtCount, nft.Limit:
		return false
	}
	return true
}

// describe says in words what makes match m hold.
func describe(m *nft.Model, x nft.Match) string {
	switch x := x.(type) {
	case nft.Addr:
		what := dirWord(x.Dir, "source", "destination") + " address"
		if x.Set != "" {
			return fmt.Sprintf("the %s were %sin %s", what, not(x.Negate), setName(m, x.Set))
		}
		ps := make([]string, len(x.Prefixes))
		for i, p := range x.Prefixes {
			ps[i] = p.String()
		}
		return fmt.Sprintf("the %s were %sin %s", what, not(x.Negate), strings.Join(ps, ", "))
	case nft.Port:
		what := dirWord(x.Dir, "source", "destination") + " port"
		if x.Set != "" {
			return fmt.Sprintf("the %s were %sin %s", what, not(x.Negate), setName(m, x.Set))
		}
		rs := make([]string, len(x.Ranges))
		for i, r := range x.Ranges {
			rs[i] = fmt.Sprint(r.First)
			if r.Last != r.First {
				rs[i] += fmt.Sprintf("-%d", r.Last)
			}
		}
		return fmt.Sprintf("the %s were %s%s", what, not(x.Negate), strings.Join(rs, " or "))
	case nft.L4Proto:
		ps := make([]string, len(x.Protos))
		for i, p := range x.Protos {
			ps[i] = protoName(p)
		}
		return fmt.Sprintf("the protocol were %s%s", not(x.Negate), strings.Join(ps, " or "))
	case nft.IfName:
		name := x.Name
		if x.Wildcard {
			name += "*"
		}
		return fmt.Sprintf("the packet %s %s%s", dirWord(x.Dir, "came in on", "went out of"), not(x.Negate), name)
	case nft.CtStateMatch:
		return fmt.Sprintf("the connection's state were %s%s", not(x.Negate), ctName(x.States))
	case nft.Lookup:
		keys := make([]string, len(x.Keys))
		for i, k := range x.Keys {
			keys[i] = selectorWord(k)
		}
		return fmt.Sprintf("the packet's %s were %sin %s", strings.Join(keys, " and "), not(x.Negate), setName(m, x.Set))
	case nft.RPF:
		return "the reverse-path check failed"
	}
	r := nft.Rule{Match: []nft.Match{x}}
	return fmt.Sprintf("`%s` held", r.String())
}

// setName is @name, with the set's comment (which names the Felix IP set).
func setName(m *nft.Model, name string) string {
	if s := m.Set(name); s != nil && s.Comment != "" {
		return fmt.Sprintf("@%s (%s)", name, s.Comment)
	}
	return "@" + name
}

func selectorWord(k nft.Selector) string {
	words := map[nft.Selector]string{
		nft.SelIIFName: "input interface", nft.SelOIFName: "output interface",
		nft.SelIPSaddr: "source address", nft.SelIP6Saddr: "source address",
		nft.SelIPDaddr: "destination address", nft.SelIP6Daddr: "destination address",
		nft.SelL4Proto: "protocol", nft.SelTHSport: "source port", nft.SelTHDport: "destination port",
		nft.SelMark: "mark",
	}
	if w, ok := words[k]; ok {
		return w
	}
	return string(k)
}

func dirWord(d nft.Direction, in, out string) string {
	if d == nft.Out {
		return out
	}
	return in
}

func not(neg bool) string {
	if neg {
		return "not "
	}
	return ""
}

// Chains lists the chains the walk entered, in order, each once.
func (r *Result) Chains() []string {
	var out []string
	for _, s := range r.Steps {
		if !slices.Contains(out, s.Chain) {
			out = append(out, s.Chain)
		}
	}
	return out
}

package nft

import (
	"slices"
	"strings"

	"github.com/google/nftables/expr"
)

// Lookup matches when the concatenation of Keys is (or with Negate, is not) in
// the named set: `iifname . ip saddr @raw-rpf-skip-v4`. The set's key type
// must be the concatenation of the selectors' types, and it must be a set,
// not a map: kernels such as Debian 12's 6.1 refuse a membership lookup in
// a map (`iifname != @filter-from-wl`) with EINVAL.
type Lookup struct {
	Keys   []Selector
	Set    string
	Negate bool
}

func (m Lookup) printMatch(c *ruleContext) string {
	keys := make([]string, len(m.Keys))
	for i, k := range m.Keys {
		keys[i] = c.selector(k)
	}
	return strings.Join(keys, concatSep) + " " + neq(m.Negate) + "@" + m.Set
}

func (m Lookup) encodeMatch(e *encoder) error {
	src, err := e.loadKeys(m.Keys)
	if err != nil {
		return err
	}
	e.add(&expr.Lookup{SourceRegister: src, SetName: m.Set, Invert: m.Negate})
	return nil
}

func (m Lookup) checkMatch(rc *ruleCheck) error {
	if slices.Contains(m.Keys, SelARPSaddrIP) {
		for _, k := range m.Keys {
			if k != SelARPSaddrIP && !arpSelectors(k) {
				return invalidf("lookup key %s with %s: an arp table has no %s", SelARPSaddrIP, k, k)
			}
		}
	}
	types, err := rc.selectors(m.Keys)
	if err != nil {
		return err
	}
	// A plain set only: older kernels refuse a lookup without a
	// destination register in a map (EINVAL; Debian 12's 6.1 does, 6.18
	// accepts it), and one such rule fails the whole transaction.
	return rc.set(m.Set, types, DataNone)
}

func (m Lookup) arp() arpUse {
	var arpOnlyKey bool
	var rest []Selector
	for _, k := range m.Keys {
		if k == SelARPSaddrIP {
			arpOnlyKey = true
		} else {
			rest = append(rest, k)
		}
	}
	switch {
	case arpOnlyKey:
		return arpOnly // with keys an arp table cannot read: refused by checkMatch
	case !arpSelectors(rest...):
		return arpNo
	}
	return arpAlso
}

func (m Lookup) sets(fn func(string)) {
	fn(m.Set)
}

// decodeLookup reads a lookup of selectors in a named set.
func decodeLookup(d *decoder, xs []kexpr, ctx *encoder) (Match, int) {
	keys, n := decodeLoads(xs, len(xs))
	if n == 0 {
		return nil, 0
	}
	l, ok := at[*expr.Lookup](xs, n)
	if !ok || l.IsDestRegSet || d.isAnon(l) {
		return nil, 0
	}
	return Lookup{Keys: keys, Set: l.SetName, Negate: l.Invert}, n + 1
}

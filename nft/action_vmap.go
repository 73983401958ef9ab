package nft

import (
	"fmt"

	"github.com/google/nftables/expr"
)

// VMap looks the selector up in a verdict map and applies the verdict it
// finds: `iifname vmap @filter-from-wl`. With no element for the key the
// rule does nothing and evaluation goes on.
//
// Mask, for the SelMark key only, looks up the mark's bits under the mask
// instead of the whole mark: `meta mark & 0xffe00000 vmap @m`, so bits
// other users set outside the mask do not make the lookup miss. 0 (and
// 0xffffffff, which nft prints the same way) means the whole mark.
type VMap struct {
	Key  Selector
	Map  string
	Mask uint32
}

func (a VMap) printAction(c *ruleContext) string {
	if a.Mask != 0 && a.Mask != markAllOnes {
		// Unlike a mark compare, a masked key is never shown as a
		// prefix length.
		return fmt.Sprintf("%s & 0x%08x vmap @%s", c.selector(a.Key), a.Mask, a.Map)
	}
	return c.selector(a.Key) + " vmap @" + a.Map
}

func (a VMap) encodeAction(e *encoder) error {
	src, err := e.loadKeys([]Selector{a.Key})
	if err != nil {
		return err
	}
	if a.Mask != 0 && a.Mask != markAllOnes {
		if a.Key != SelMark {
			return fmt.Errorf("vmap mask on key %q (only %q takes one)", a.Key, SelMark)
		}
		e.add(&expr.Bitwise{SourceRegister: src, DestRegister: src, Len: 4, Mask: u32(a.Mask), Xor: u32(0)})
	}
	// A vmap lookup writes the verdict register; without
	// IsDestRegSet the kernel rejects the rule (google/nftables #176).
	e.add(&expr.Lookup{SourceRegister: src, SetName: a.Map, IsDestRegSet: true, DestRegister: regVerdict})
	return nil
}

func (a VMap) checkAction(rc *ruleCheck) error {
	types, err := rc.selectors([]Selector{a.Key})
	if err != nil {
		return err
	}
	if a.Mask != 0 && a.Key != SelMark {
		return invalidf("vmap mask 0x%08x on key %q: only %q takes a mask", a.Mask, a.Key, SelMark)
	}
	return rc.set(a.Map, types, DataVerdict)
}

func (a VMap) inARP() bool { return arpSelectors(a.Key) }

func (a VMap) refs(chain, set func(string)) {
	set(a.Map)
}

// decodeVMap reads `key [& mask] vmap @map`.
func decodeVMap(d *decoder, xs []kexpr, ctx *encoder) (Action, bool) {
	keys, n := decodeLoads(xs, 1)
	if n != 1 {
		return nil, false
	}
	a := VMap{Key: keys[0]}
	if mask, xor, ok := bitwiseAt(xs, n); ok && a.Key == SelMark && xor == 0 {
		a.Mask = mask
		n++
	}
	l, ok := at[*expr.Lookup](xs, n)
	if !ok || n+1 != len(xs) || !l.IsDestRegSet || l.DestRegister != regVerdict || d.isAnon(l) {
		return nil, false
	}
	a.Map = l.SetName
	return a, true
}

package nft

import (
	"encoding/binary"
	"fmt"

	"github.com/google/nftables/expr"
)

// SetMark rewrites the packet mark as mark = (mark & And) ^ Xor. Setting a
// field under a mask is And = ^mask, Xor = value; clearing bits is And =
// ^bits, Xor = 0; setting bits is And = ^bits, Xor = bits.
//
// With Return the rule then returns from its chain (`meta mark set … return`):
// one rule where a mark-then-return-if-marked pair would take two. Every
// rule a commit adds makes the kernel revalidate the whole table
// (nf_tables_validate walks every rule reachable from the base chains), so
// the rules a table holds are time on every rule change, not only on the
// packet path.
type SetMark struct {
	And    uint32
	Xor    uint32
	Return bool
}

// SetMarkFromMap sets the whole mark to the value a data map holds for the
// selector: `meta mark set iifname map @filter-endpoint-mark`.
//
// There is no masked form (`meta mark set meta mark & ~mask | iifname map
// @m`): nft 1.0.6 refuses it ("Right hand side of binary operation (|) must
// be constant"). Kernels from 6.13 could run it as a bitwise with a second
// source register (NFTA_BITWISE_SREG2), but nft 1.0.6 could not list such
// a rule, so nftep does not program it.
type SetMarkFromMap struct {
	Key Selector
	Map string
}

func (a SetMark) printAction(c *ruleContext) string {
	if a.Return {
		return "meta mark set " + setMarkString(a) + " return"
	}
	return "meta mark set " + setMarkString(a)
}

func (a SetMark) encodeAction(e *encoder) error {
	if a.And == 0 {
		// mark = Xor: nft's `meta mark set 0x10` is an immediate.
		e.add(&expr.Immediate{Register: reg1, Data: u32(a.Xor)})
	} else {
		e.add(&expr.Meta{Key: expr.MetaKeyMARK, Register: reg1},
			&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: u32(a.And), Xor: u32(a.Xor)})
	}
	e.add(&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg1})
	if a.Return {
		e.add(&expr.Verdict{Kind: expr.VerdictReturn})
	}
	return nil
}

func (a SetMark) checkAction(rc *ruleCheck) error {
	if a.And == markAllOnes && a.Xor == 0 {
		return invalidf("mark set that changes nothing (And 0xffffffff, Xor 0)")
	}
	return nil
}

func (a SetMark) inARP() bool { return true }

func (a SetMark) refs(chain, set func(string)) {}

func (a SetMarkFromMap) printAction(c *ruleContext) string {
	return "meta mark set " + c.selector(a.Key) + " map @" + a.Map
}

func (a SetMarkFromMap) encodeAction(e *encoder) error {
	src, err := e.loadKeys([]Selector{a.Key})
	if err != nil {
		return err
	}
	e.add(&expr.Lookup{SourceRegister: src, SetName: a.Map, IsDestRegSet: true, DestRegister: reg1},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg1})
	return nil
}

func (a SetMarkFromMap) checkAction(rc *ruleCheck) error {
	types, err := rc.selectors([]Selector{a.Key})
	if err != nil {
		return err
	}
	return rc.set(a.Map, types, DataMark)
}

func (a SetMarkFromMap) inARP() bool { return arpSelectors(a.Key) }

func (a SetMarkFromMap) refs(chain, set func(string)) {
	set(a.Map)
}

// setMarkString prints mark = (mark & And) ^ Xor the way nft's
// netlink_parse_bitwise_bool rewrites a bitwise: the Xor bits outside And
// become an OR, those inside stay an XOR, and And grows by the OR bits:
// mark & (And|o) ^ (Xor&And) | o, where o = Xor &^ And; each part is left
// out when it does nothing.
func setMarkString(a SetMark) string {
	if a.And == 0 {
		return fmt.Sprintf("0x%08x", a.Xor)
	}
	o := a.Xor &^ a.And
	x := a.Xor & a.And
	m := a.And | o
	s := "meta mark"
	if m != markAllOnes {
		s += fmt.Sprintf(" & 0x%08x", m)
	}
	if x != 0 {
		s += fmt.Sprintf(" ^ 0x%08x", x)
	}
	if o != 0 {
		s += fmt.Sprintf(" | 0x%08x", o)
	}
	return s
}

// metaSetMark says whether expression i sets the mark from reg 1.
func metaSetMark(xs []kexpr, i int) bool {
	m, ok := at[*expr.Meta](xs, i)
	return ok && m.Key == expr.MetaKeyMARK && m.SourceRegister && m.Register == reg1
}

// decodeSetMark reads `meta mark set …` from a constant or from the mark.
func decodeSetMark(d *decoder, xs []kexpr, ctx *encoder) (Action, bool) {
	if v, ok := at[*expr.Verdict](xs, len(xs)-1); ok && v.Kind == expr.VerdictReturn && len(xs) > 1 {
		a, ok := decodeSetMark(d, xs[:len(xs)-1], ctx)
		if sm, isMark := a.(SetMark); ok && isMark && !sm.Return {
			sm.Return = true
			return sm, true
		}
		return nil, false
	}
	switch len(xs) {
	case 2:
		im, ok := at[*expr.Immediate](xs, 0)
		if !ok || im.Register != reg1 || len(im.Data) != 4 || !metaSetMark(xs, 1) {
			return nil, false
		}
		return SetMark{Xor: binary.NativeEndian.Uint32(im.Data)}, true
	case 3:
		mask, xor, ok := bitwiseAt(xs, 1)
		if !metaLoad(xs, 0, expr.MetaKeyMARK) || !ok || !metaSetMark(xs, 2) {
			return nil, false
		}
		return SetMark{And: mask, Xor: xor}, true
	}
	return nil, false
}

// decodeSetMarkFromMap reads `meta mark set key map @map`.
func decodeSetMarkFromMap(d *decoder, xs []kexpr, ctx *encoder) (Action, bool) {
	keys, n := decodeLoads(xs, 1)
	if n != 1 || len(xs) != 3 || !metaSetMark(xs, 2) {
		return nil, false
	}
	l, ok := at[*expr.Lookup](xs, 1)
	if !ok || !l.IsDestRegSet || l.DestRegister != reg1 || d.isAnon(l) {
		return nil, false
	}
	return SetMarkFromMap{Key: keys[0], Map: l.SetName}, true
}

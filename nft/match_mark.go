package nft

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/google/nftables/expr"
)

// Mark matches the packet mark under a mask: `meta mark & 0x00010000 ==
// 0x00010000`. A zero Mask means the whole mark. Negate turns == into !=.
type Mark struct {
	Mask   uint32
	Value  uint32
	Negate bool
}

func (m Mark) printMatch(c *ruleContext) string {
	if m.Mask == 0 || m.Mask == markAllOnes {
		return fmt.Sprintf("meta mark %s0x%08x", neq(m.Negate), m.Value)
	}
	if inv := ^m.Mask; inv&(inv+1) == 0 {
		// nft prints a mask of leading ones as a prefix length.
		return fmt.Sprintf("meta mark %s0x%08x/%d", neq(m.Negate), m.Value, bits.OnesCount32(m.Mask))
	}
	op := "=="
	if m.Negate {
		op = "!="
	}
	return fmt.Sprintf("meta mark & 0x%08x %s 0x%08x", m.Mask, op, m.Value)
}

func (m Mark) encodeMatch(e *encoder) error {
	e.add(&expr.Meta{Key: expr.MetaKeyMARK, Register: reg1})
	if m.Mask != 0 && m.Mask != 0xffffffff {
		e.add(&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: u32(m.Mask), Xor: u32(0)})
	}
	e.add(&expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: u32(m.Value)})
	return nil
}

func (m Mark) checkMatch(rc *ruleCheck) error {
	if m.Mask != 0 && m.Value&^m.Mask != 0 {
		return invalidf("mark value 0x%08x has bits outside mask 0x%08x: it never matches", m.Value, m.Mask)
	}
	return nil
}

func (m Mark) arp() arpUse { return arpAlso }

func (m Mark) sets(fn func(string)) {}

// decodeMark reads `meta mark [& mask] ==|!= value`.
func decodeMark(d *decoder, xs []kexpr, ctx *encoder) (Match, int) {
	if !metaLoad(xs, 0, expr.MetaKeyMARK) {
		return nil, 0
	}
	m, n := Mark{}, 1
	if mask, xor, ok := bitwiseAt(xs, 1); ok {
		if xor != 0 {
			return nil, 0
		}
		m.Mask, n = mask, 2
	}
	c, ok := cmpAt(xs, n)
	if !ok || len(c.Data) != 4 {
		return nil, 0
	}
	if m.Negate, ok = negateOf(c.Op); !ok {
		return nil, 0
	}
	m.Value = binary.NativeEndian.Uint32(c.Data)
	return m, n + 1
}

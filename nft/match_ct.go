package nft

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/google/nftables/expr"
)

// Conntrack matches: state, status and connection count.

// CtState is a set of conntrack states.
type CtState uint32

// Conntrack state bits as the kernel defines them (NF_CT_STATE_*_BIT).
const (
	CtStateInvalid     CtState = 1 << 0
	CtStateEstablished CtState = 1 << 1
	CtStateRelated     CtState = 1 << 2
	CtStateNew         CtState = 1 << 3
	CtStateUntracked   CtState = 1 << 6
)

// CtStateMatch matches when the packet's conntrack state is any of States:
// `ct state established,related`. Negate matches when it is none of them.
type CtStateMatch struct {
	States CtState
	Negate bool
}

// CtStatus is a set of conntrack status bits.
type CtStatus uint32

// Conntrack status bits (IPS_*).
const (
	CtStatusSNAT CtStatus = 1 << 4
	CtStatusDNAT CtStatus = 1 << 5
)

// CtStatusMatch matches when any of Status is set: `ct status dnat`; Negate
// when none is.
type CtStatusMatch struct {
	Status CtStatus
	Negate bool
}

// CtCount matches when the number of connections tracked for this rule's
// flows is over Over: `ct count over 10`.
type CtCount struct {
	Over uint32
}

func (m CtStateMatch) printMatch(c *ruleContext) string {
	return "ct state " + flagsString(uint32(m.States), m.Negate, true, ctStateNames)
}

func (m CtStateMatch) encodeMatch(e *encoder) error {
	e.add(&expr.Ct{Key: expr.CtKeySTATE, Register: reg1})
	e.flags(uint32(m.States), m.Negate, true)
	return nil
}

func (m CtStateMatch) checkMatch(rc *ruleCheck) error {
	return checkFlags("ct state", uint32(m.States), ctStateNames)
}

func (m CtStateMatch) arp() arpUse { return arpNo }

func (m CtStateMatch) sets(fn func(string)) {}

func (m CtStatusMatch) printMatch(c *ruleContext) string {
	return "ct status " + flagsString(uint32(m.Status), m.Negate, false, ctStatusNames)
}

func (m CtStatusMatch) encodeMatch(e *encoder) error {
	e.add(&expr.Ct{Key: expr.CtKeySTATUS, Register: reg1})
	e.flags(uint32(m.Status), m.Negate, false)
	return nil
}

func (m CtStatusMatch) checkMatch(rc *ruleCheck) error {
	return checkFlags("ct status", uint32(m.Status), ctStatusNames)
}

func (m CtStatusMatch) arp() arpUse { return arpNo }

func (m CtStatusMatch) sets(fn func(string)) {}

func (m CtCount) printMatch(c *ruleContext) string {
	return fmt.Sprintf("ct count over %d", m.Over)
}

func (m CtCount) encodeMatch(e *encoder) error {
	e.add(&expr.Connlimit{Count: m.Over, Flags: expr.NFT_CONNLIMIT_F_INV})
	return nil
}

func (m CtCount) checkMatch(rc *ruleCheck) error {
	return nil
}

func (m CtCount) arp() arpUse { return arpNo }

func (m CtCount) sets(fn func(string)) {}

// flags matches a bitmask field (ct state, ct status) in reg 1. "Any of"
// is nft's `ct state established,related`: (x & mask) != 0. "None of" is
// (x & mask) == 0, which nft 1.0.6 prints `ct state ! established,related`.
// For one negated ct state nft writes x != bit, printed `ct state !=
// invalid`; a packet has exactly one ct state, so that is the same test.
func (e *encoder) flags(mask uint32, negate, oneHot bool) {
	if negate && oneHot && mask&(mask-1) == 0 {
		e.add(&expr.Cmp{Op: expr.CmpOpNeq, Register: reg1, Data: u32(mask)})
		return
	}
	e.add(&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: u32(mask), Xor: u32(0)})
	op := expr.CmpOpNeq
	if negate {
		op = expr.CmpOpEq
	}
	e.add(&expr.Cmp{Op: op, Register: reg1, Data: u32(0)})
}

// flagsString prints a ct state or status match as nft 1.0.6 does (see
// encoder.flags for the encodings): `established,related`, `!= invalid`
// (one negated ct state), `! established,related` (none of several).
func flagsString(v uint32, negate, oneHot bool, names []flagName) string {
	list := flagList(v, names)
	switch {
	case !negate:
		return list
	case oneHot && v&(v-1) == 0:
		return "!= " + list
	default:
		return "! " + list
	}
}

type flagName struct {
	bit  uint32
	name string
}

func flagList(v uint32, names []flagName) string {
	var parts []string
	for _, n := range names {
		if v&n.bit != 0 {
			parts = append(parts, n.name)
			v &^= n.bit
		}
	}
	if v != 0 {
		parts = append(parts, fmt.Sprintf("0x%x", v))
	}
	return strings.Join(parts, ",")
}

// ctStateNames and ctStatusNames are nft's ct.c symbol tables, in bit order
// (the order nft prints them).
var (
	ctStateNames = []flagName{
		{uint32(CtStateInvalid), "invalid"},
		{uint32(CtStateEstablished), "established"},
		{uint32(CtStateRelated), "related"},
		{uint32(CtStateNew), "new"},
		{uint32(CtStateUntracked), "untracked"},
	}
	ctStatusNames = []flagName{
		{1 << 0, "expected"},
		{1 << 1, "seen-reply"},
		{1 << 2, "assured"},
		{1 << 3, "confirmed"},
		{uint32(CtStatusSNAT), "snat"},
		{uint32(CtStatusDNAT), "dnat"},
		{1 << 9, "dying"},
	}
)

// ctLoad says whether expression 0 loads ct key into reg 1.
func ctLoad(xs []kexpr, key expr.CtKey) bool {
	c, ok := at[*expr.Ct](xs, 0)
	return ok && c.Key == key && !c.SourceRegister && c.Register == reg1
}

// decodeFlags is the inverse of encoder.flags on the expressions after the
// load: the mask, whether it is negated, and how many expressions it took.
func decodeFlags(xs []kexpr, oneHot bool) (mask uint32, negate bool, n int) {
	if c, ok := cmpAt(xs, 0); ok && oneHot && c.Op == expr.CmpOpNeq && len(c.Data) == 4 {
		return binary.NativeEndian.Uint32(c.Data), true, 1
	}
	mask, xor, ok := bitwiseAt(xs, 0)
	c, ok2 := cmpAt(xs, 1)
	if !ok || !ok2 || xor != 0 || len(c.Data) != 4 || binary.NativeEndian.Uint32(c.Data) != 0 {
		return 0, false, 0
	}
	switch c.Op {
	case expr.CmpOpNeq:
		return mask, false, 2
	case expr.CmpOpEq:
		return mask, true, 2
	}
	return 0, false, 0
}

// decodeCtState reads `ct state …`.
func decodeCtState(d *decoder, xs []kexpr, ctx *encoder) (Match, int) {
	if !ctLoad(xs, expr.CtKeySTATE) {
		return nil, 0
	}
	mask, neg, n := decodeFlags(xs[1:], true)
	if n == 0 {
		return nil, 0
	}
	return CtStateMatch{States: CtState(mask), Negate: neg}, 1 + n
}

// decodeCtStatus reads `ct status …`.
func decodeCtStatus(d *decoder, xs []kexpr, ctx *encoder) (Match, int) {
	if !ctLoad(xs, expr.CtKeySTATUS) {
		return nil, 0
	}
	mask, neg, n := decodeFlags(xs[1:], false)
	if n == 0 {
		return nil, 0
	}
	return CtStatusMatch{Status: CtStatus(mask), Negate: neg}, 1 + n
}

// decodeCtCount reads `ct count over N`.
func decodeCtCount(d *decoder, xs []kexpr, ctx *encoder) (Match, int) {
	c, ok := at[*expr.Connlimit](xs, 0)
	if !ok {
		return nil, 0
	}
	return CtCount{Over: c.Count}, 1
}

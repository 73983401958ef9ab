package nft

import (
	"bytes"

	"github.com/google/nftables/expr"
)

// IfName matches the input (In) or output (Out) interface name: `iifname
// "cali12ab"`, or with Wildcard `iifname "cali*"` (a prefix match).
type IfName struct {
	Dir      Direction
	Name     string // at most 15 bytes (IFNAMSIZ-1), without the '*'
	Wildcard bool
	Negate   bool
}

func (m IfName) printMatch(c *ruleContext) string {
	name := m.Name
	if m.Wildcard {
		name += "*"
	}
	return dirWord(m.Dir, "iifname", "oifname") + " " + neq(m.Negate) + quote(name)
}

func (m IfName) encodeMatch(e *encoder) error {
	key := expr.MetaKeyIIFNAME
	if m.Dir == Out {
		key = expr.MetaKeyOIFNAME
	}
	data := ifnameBytes(m.Name)
	if m.Wildcard {
		// Unpadded data compares only its own length: a prefix match.
		data = []byte(m.Name)
	}
	e.add(&expr.Meta{Key: key, Register: reg1}, &expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: data})
	return nil
}

func (m IfName) checkMatch(rc *ruleCheck) error {
	if err := checkDir(m.Dir); err != nil {
		return err
	}
	return checkIfName(m.Name, m.Wildcard)
}

func (m IfName) arp() arpUse { return arpAlso }

func (m IfName) sets(fn func(string)) {}

// decodeIfName reads `iifname "x"` (a 16-byte NUL-padded compare) and
// `iifname "x*"` (an unpadded one).
func decodeIfName(d *decoder, xs []kexpr, ctx *encoder) (Match, int) {
	m := IfName{}
	switch {
	case metaLoad(xs, 0, expr.MetaKeyIIFNAME):
		m.Dir = In
	case metaLoad(xs, 0, expr.MetaKeyOIFNAME):
		m.Dir = Out
	default:
		return nil, 0
	}
	c, ok := cmpAt(xs, 1)
	if !ok {
		return nil, 0
	}
	if m.Negate, ok = negateOf(c.Op); !ok {
		return nil, 0
	}
	if len(c.Data) == 16 {
		m.Name = string(bytes.TrimRight(c.Data, "\x00"))
	} else {
		m.Name, m.Wildcard = string(c.Data), true
	}
	return m, 2
}

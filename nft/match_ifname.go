package nft

import "github.com/google/nftables/expr"

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

package nft

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
)

// PortRange is an inclusive range of ports; First == Last for one port.
type PortRange struct {
	First, Last uint16
}

// Port matches the transport source (In) or destination (Out) port: `th
// dport 22`, `th dport 1000-2000`, `th dport { 22, 80-90 }` or a named set
// `th dport @set`. The rule must also match an L4Proto with ports.
type Port struct {
	Dir    Direction
	Ranges []PortRange
	Set    string
	Negate bool
}

func (m Port) printMatch(c *ruleContext) string {
	lhs := c.transport() + " " + dirWord(m.Dir, "sport", "dport") + " " + neq(m.Negate)
	switch {
	case m.Set != "":
		return lhs + "@" + m.Set
	case len(m.Ranges) == 1:
		return lhs + portRangeString(m.Ranges[0])
	default:
		rs := slices.Clone(m.Ranges)
		slices.SortFunc(rs, func(a, b PortRange) int { return int(a.First) - int(b.First) })
		items := make([]string, len(rs))
		for i, r := range rs {
			items[i] = portRangeString(r)
		}
		return lhs + anonSetString(items)
	}
}

func (m Port) encodeMatch(e *encoder) error {
	return e.port(m)
}

func (m Port) checkMatch(rc *ruleCheck) error {
	if err := checkDir(m.Dir); err != nil {
		return err
	}
	if !portL4(rc.l4) {
		return invalidf("port match needs an earlier protocol match of tcp, udp, sctp, dccp or udplite")
	}
	if (m.Set == "") == (len(m.Ranges) == 0) {
		return invalidf("port match needs exactly one of Ranges and Set")
	}
	if m.Set != "" {
		return rc.set(m.Set, []KeyType{TypeInetService}, DataNone)
	}
	return checkPortRanges(m.Ranges)
}

func (m Port) arp() arpUse { return arpNo }

func (m Port) sets(fn func(string)) {
	if m.Set != "" {
		fn(m.Set)
	}
}

func (e *encoder) port(m Port) error {
	off := uint32(2)
	if m.Dir == In {
		off = 0
	}
	e.add(&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: off, Len: 2})
	be := binaryutil.BigEndian.PutUint16
	switch {
	case m.Set != "":
		e.add(&expr.Lookup{SourceRegister: reg1, SetName: m.Set, Invert: m.Negate})
	case len(m.Ranges) == 1:
		r := m.Ranges[0]
		switch {
		case r.First == r.Last:
			e.add(&expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: be(r.First)})
		case m.Negate:
			e.add(&expr.Range{Op: expr.CmpOpNeq, Register: reg1, FromData: be(r.First), ToData: be(r.Last)})
		default:
			e.add(&expr.Cmp{Op: expr.CmpOpGte, Register: reg1, Data: be(r.First)},
				&expr.Cmp{Op: expr.CmpOpLte, Register: reg1, Data: be(r.Last)})
		}
	case len(m.Ranges) > 1:
		var fields []keyField
		interval := false
		for _, r := range m.Ranges {
			fields = append(fields, keyField{be(r.First), be(r.Last)})
			interval = interval || r.First != r.Last
		}
		e.lookupAnon(nftables.TypeInetService, interval, anonElements(fields, interval), m.Negate)
	default:
		return fmt.Errorf("no ranges and no set")
	}
	return nil
}

func portRangeString(r PortRange) string {
	if r.First == r.Last {
		return strconv.Itoa(int(r.First))
	}
	return fmt.Sprintf("%d-%d", r.First, r.Last)
}

// decodePort reads a port match: a compare, a range (two compares, or a
// negated range expression), an anonymous set of ranges, or a named set.
func decodePort(d *decoder, xs []kexpr, ctx *encoder) (Match, int) {
	p, ok := payloadLoad(xs, 0, expr.PayloadBaseTransportHeader)
	if !ok || p.Len != 2 || (p.Offset != 0 && p.Offset != 2) {
		return nil, 0
	}
	m := Port{Dir: Out}
	if p.Offset == 0 {
		m.Dir = In
	}
	be := binaryutil.BigEndian.Uint16
	if c, ok := cmpAt(xs, 1); ok && len(c.Data) == 2 {
		if neg, ok := negateOf(c.Op); ok {
			m.Negate = neg
			m.Ranges = []PortRange{{be(c.Data), be(c.Data)}}
			return m, 2
		}
		c2, ok := cmpAt(xs, 2)
		if c.Op == expr.CmpOpGte && ok && c2.Op == expr.CmpOpLte && len(c2.Data) == 2 {
			m.Ranges = []PortRange{{be(c.Data), be(c2.Data)}}
			return m, 3
		}
		return nil, 0
	}
	if r, ok := at[*expr.Range](xs, 1); ok {
		if r.Op != expr.CmpOpNeq || r.Register != reg1 || len(r.FromData) != 2 || len(r.ToData) != 2 {
			return nil, 0
		}
		m.Negate = true
		m.Ranges = []PortRange{{be(r.FromData), be(r.ToData)}}
		return m, 2
	}
	l, ok := at[*expr.Lookup](xs, 1)
	if !ok || l.IsDestRegSet || l.SourceRegister != reg1 {
		return nil, 0
	}
	m.Negate = l.Invert
	if !d.isAnon(l) {
		m.Set = l.SetName
		return m, 2
	}
	fields, ok := d.anonFields(l, TypeInetService)
	if !ok {
		return nil, 0
	}
	for _, f := range fields {
		m.Ranges = append(m.Ranges, PortRange{be(f.first), be(f.last)})
	}
	return m, 2
}

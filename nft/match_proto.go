package nft

import (
	"fmt"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// NFProto matches the packet's layer-3 family: `meta nfproto ipv4`.
type NFProto struct {
	Family IPFamily
}

// L4Proto matches the layer-4 protocol: `meta l4proto tcp`, or with several
// protocols `meta l4proto { tcp, udp }`.
type L4Proto struct {
	Protos []uint8
	Negate bool
}

func (m NFProto) printMatch(c *ruleContext) string {
	c.nfDep, c.nfDepF = len(c.parts), m.Family
	c.family = m.Family
	return "meta nfproto " + map[IPFamily]string{IPv4: "ipv4", IPv6: "ipv6"}[m.Family]
}

func (m NFProto) encodeMatch(e *encoder) error {
	e.add(&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: reg1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{nfprotoNum(m.Family)}})
	e.nfproto = m.Family
	return nil
}

func (m NFProto) checkMatch(rc *ruleCheck) error {
	return rc.pinFamily(m.Family)
}

func (m NFProto) arp() arpUse { return arpNo }

func (m NFProto) sets(fn func(string)) {}

func (m L4Proto) printMatch(c *ruleContext) string {
	if len(m.Protos) == 1 {
		if !m.Negate {
			c.l4Dep, c.l4proto = len(c.parts), int(m.Protos[0])
		}
		return "meta l4proto " + neq(m.Negate) + protoName(m.Protos[0])
	}
	ps := slices.Clone(m.Protos)
	slices.Sort(ps)
	items := make([]string, len(ps))
	for i, p := range ps {
		items[i] = protoName(p)
	}
	return "meta l4proto " + neq(m.Negate) + anonSetString(items)
}

func (m L4Proto) encodeMatch(e *encoder) error {
	e.add(&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1})
	switch {
	case len(m.Protos) == 1:
		e.add(&expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: []byte{m.Protos[0]}})
		if !m.Negate {
			e.l4proto = int(m.Protos[0])
		}
	case len(m.Protos) > 1:
		var els []nftables.SetElement
		for _, p := range m.Protos {
			els = append(els, nftables.SetElement{Key: []byte{p}})
		}
		e.lookupAnon(nftables.TypeInetProto, false, els, m.Negate)
	default:
		return fmt.Errorf("no protocols")
	}
	return nil
}

func (m L4Proto) checkMatch(rc *ruleCheck) error {
	if len(m.Protos) == 0 {
		return invalidf("protocol match without protocols")
	}
	seen := map[uint8]bool{}
	for _, p := range m.Protos {
		if seen[p] {
			return invalidf("protocol %s listed twice", protoName(p))
		}
		seen[p] = true
	}
	if !m.Negate {
		rc.l4 = slices.Clone(m.Protos)
	}
	return nil
}

func (m L4Proto) arp() arpUse { return arpNo }

func (m L4Proto) sets(fn func(string)) {}

// decodeNFProto reads `meta nfproto F`: explicit, or a dependency that
// decoder.absorb removes again.
func decodeNFProto(d *decoder, xs []kexpr, ctx *encoder) (Match, int) {
	c, ok := cmpAt(xs, 1)
	if !metaLoad(xs, 0, expr.MetaKeyNFPROTO) || !ok || c.Op != expr.CmpOpEq || len(c.Data) != 1 {
		return nil, 0
	}
	switch c.Data[0] {
	case unix.NFPROTO_IPV4:
		return NFProto{Family: IPv4}, 2
	case unix.NFPROTO_IPV6:
		return NFProto{Family: IPv6}, 2
	}
	return nil, 0
}

// decodeL4Proto reads `meta l4proto P` and `meta l4proto { P, Q }`.
func decodeL4Proto(d *decoder, xs []kexpr, ctx *encoder) (Match, int) {
	if !metaLoad(xs, 0, expr.MetaKeyL4PROTO) {
		return nil, 0
	}
	if c, ok := cmpAt(xs, 1); ok && len(c.Data) == 1 {
		if neg, ok := negateOf(c.Op); ok {
			return L4Proto{Protos: []uint8{c.Data[0]}, Negate: neg}, 2
		}
	}
	if l, ok := at[*expr.Lookup](xs, 1); ok && !l.IsDestRegSet && d.isAnon(l) {
		fields, ok := d.anonFields(l, TypeInetProto)
		if !ok {
			return nil, 0
		}
		m := L4Proto{Negate: l.Invert}
		for _, f := range fields {
			m.Protos = append(m.Protos, f.first[0])
		}
		return m, 2
	}
	return nil, 0
}

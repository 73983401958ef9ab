package nft

import (
	"slices"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// ICMP matches an ICMP (Family IPv4) or ICMPv6 (IPv6) type and optionally its
// code: `icmp type echo-request`, `icmpv6 type 135 code 0`.
type ICMP struct {
	Family IPFamily
	Type   uint8
	Code   *uint8
	Negate bool
}

func (m ICMP) printMatch(c *ruleContext) string {
	// The encoder guards the family unless the context has it. Before
	// its own `meta l4proto` the guard is a dependency nft drops;
	// after an explicit `meta l4proto P` it comes second, and nft
	// prints it (only the l4proto is the icmp payload's dependency).
	guard := ""
	if c.family != m.Family && c.l4proto == int(icmpProto(m.Family)) {
		guard = "meta nfproto " + map[IPFamily]string{IPv4: "ipv4", IPv6: "ipv6"}[m.Family] + " "
	}
	c.killFamily(m.Family)
	if c.l4proto == int(icmpProto(m.Family)) {
		c.killL4()
	}
	c.l4proto = int(icmpProto(m.Family))
	c.family = m.Family
	word := "icmp"
	types, codes := icmpTypeNames, icmpCodeNames
	if m.Family == IPv6 {
		word, types, codes = "icmpv6", icmp6TypeNames, icmp6CodeNames
	}
	s := guard + word + " type " + neq(m.Negate) + symbolOr(types, m.Type)
	if m.Code != nil {
		s += " " + word + " code " + symbolOr(codes, *m.Code)
	}
	return s
}

func (m ICMP) encodeMatch(e *encoder) error {
	proto := icmpProto(m.Family)
	// The family guard even after an explicit `meta l4proto P`: an
	// IPv4 packet can carry protocol 58 (and IPv6 protocol 1), and
	// the type is read from its transport header all the same. After
	// such an l4proto the guard comes second, and nft prints it:
	// `meta nfproto ipv6 icmpv6 type …` (print.go).
	e.needFamily(m.Family)
	if e.l4proto != int(proto) {
		e.add(&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{proto}})
		e.l4proto = int(proto)
	}
	// Type and code are adjacent bytes; nft loads both at once.
	data := []byte{m.Type}
	if m.Code != nil {
		data = append(data, *m.Code)
	}
	e.add(&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: uint32(len(data))},
		&expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: data})
	return nil
}

func (m ICMP) checkMatch(rc *ruleCheck) error {
	if err := rc.pinFamily(m.Family); err != nil {
		return err
	}
	p := icmpProto(m.Family)
	if rc.l4 != nil && !slices.Equal(rc.l4, []uint8{p}) {
		return invalidf("icmp match in a rule that matches protocol %v", rc.l4)
	}
	if m.Negate && m.Code != nil {
		return invalidf("a negated icmp match with a code: nft cannot express it")
	}
	rc.l4 = []uint8{p}
	return nil
}

func (m ICMP) arp() arpUse { return arpNo }

func (m ICMP) sets(fn func(string)) {}

func icmpProto(f IPFamily) byte {
	if f == IPv6 {
		return unix.IPPROTO_ICMPV6
	}
	return unix.IPPROTO_ICMP
}

// ICMP symbol tables of nft (proto.c, datatype.c); `nft describe icmp type`
// lists them. Values without a name print as decimal numbers.
var (
	icmpTypeNames = map[uint8]string{
		0: "echo-reply", 3: "destination-unreachable", 4: "source-quench", 5: "redirect",
		8: "echo-request", 9: "router-advertisement", 10: "router-solicitation", 11: "time-exceeded",
		12: "parameter-problem", 13: "timestamp-request", 14: "timestamp-reply", 15: "info-request",
		16: "info-reply", 17: "address-mask-request", 18: "address-mask-reply",
	}
	icmpCodeNames = map[uint8]string{
		0: "net-unreachable", 1: "host-unreachable", 2: "prot-unreachable", 3: "port-unreachable",
		4: "frag-needed", 9: "net-prohibited", 10: "host-prohibited", 13: "admin-prohibited",
	}
	icmp6TypeNames = map[uint8]string{
		1: "destination-unreachable", 2: "packet-too-big", 3: "time-exceeded", 4: "parameter-problem",
		128: "echo-request", 129: "echo-reply", 130: "mld-listener-query", 131: "mld-listener-report",
		132: "mld-listener-done", 133: "nd-router-solicit", 134: "nd-router-advert",
		135: "nd-neighbor-solicit", 136: "nd-neighbor-advert", 137: "nd-redirect",
		138: "router-renumbering", 141: "ind-neighbor-solicit", 142: "ind-neighbor-advert",
		143: "mld2-listener-report",
	}
	icmp6CodeNames = map[uint8]string{
		0: "no-route", 1: "admin-prohibited", 3: "addr-unreachable", 4: "port-unreachable",
		5: "policy-fail", 6: "reject-route",
	}
)

// decodeICMP reads an icmp type (and code) compare where the context holds
// the family and its icmp protocol (dependencies decoded before it).
func decodeICMP(d *decoder, xs []kexpr, ctx *encoder) (Match, int) {
	f := ctx.nfproto
	if (f != IPv4 && f != IPv6) || ctx.l4proto != int(icmpProto(f)) {
		return nil, 0
	}
	p, ok := payloadLoad(xs, 0, expr.PayloadBaseTransportHeader)
	if !ok || p.Offset != 0 || (p.Len != 1 && p.Len != 2) {
		return nil, 0
	}
	c, ok := cmpAt(xs, 1)
	if !ok || len(c.Data) != int(p.Len) {
		return nil, 0
	}
	m := ICMP{Family: f, Type: c.Data[0]}
	if m.Negate, ok = negateOf(c.Op); !ok {
		return nil, 0
	}
	if p.Len == 2 {
		code := c.Data[1]
		m.Code = &code
	}
	return m, 2
}

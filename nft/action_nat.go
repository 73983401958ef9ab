package nft

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Masquerade rewrites the source address of the connection's first packet
// to the primary address of the output interface: `masquerade`, `masquerade
// to :32768-65535 fully-random`. Like every NAT statement it ends the base
// chain (the kernel's nat expressions accept). It is valid only in chains
// reached from a `type nat` base chain at postrouting; the kernel refuses it
// elsewhere (EOPNOTSUPP).
type Masquerade struct {
	// Ports, when set, limits the new source port to this range. The rule
	// must match a transport protocol with ports (tcp, udp, …) first: nft
	// and the kernel need one to map ports.
	Ports *PortRange
	// FullyRandom picks source ports with a full PRNG
	// (NF_NAT_RANGE_PROTO_RANDOM_FULLY), not the hash-based default.
	FullyRandom bool
}

// SNAT rewrites the source of the connection's first packet to Addr (IPv4
// only): `snat ip to 192.168.60.11`, `snat ip to 192.168.60.11:32768-65535
// fully-random`. Like Masquerade, it ends the base chain and needs a nat
// chain at postrouting.
type SNAT struct {
	Addr        netip.Addr
	Ports       *PortRange
	FullyRandom bool
}

// The nat flags nft sets (include/uapi/linux/netfilter/nf_nat.h).
const (
	natProtoSpecified  = unix.NF_NAT_RANGE_PROTO_SPECIFIED
	natProtoRandomFull = unix.NF_NAT_RANGE_PROTO_RANDOM_FULLY
)

func natTail(fullyRandom bool) string {
	if fullyRandom {
		return " fully-random"
	}
	return ""
}

func (a Masquerade) printAction(c *ruleContext) string {
	s := "masquerade"
	if a.Ports != nil {
		s += " to :" + fmt.Sprintf("%d-%d", a.Ports.First, a.Ports.Last)
	}
	return s + natTail(a.FullyRandom)
}

func (a SNAT) printAction(c *ruleContext) string {
	s := "snat ip to " + a.Addr.String()
	if a.Ports != nil {
		s += fmt.Sprintf(":%d-%d", a.Ports.First, a.Ports.Last)
	}
	return s + natTail(a.FullyRandom)
}

// encodeAction writes what nft 1.0.6 writes (`nft --debug=netlink`):
//
//	masquerade fully-random           [ masq flags 0x10 ]
//	masquerade to :1-2 fully-random   [ immediate reg 1 0x0100 ] [ immediate reg 2 0x0200 ]
//	                                  [ masq proto_min reg 1 proto_max reg 2 flags 0x12 ]
//
// google/nftables' expr.Masq drops the flags when it has ports; our
// expression writer (expr.go) keeps them.
func (a Masquerade) encodeAction(e *encoder) error {
	m := &expr.Masq{FullyRandom: a.FullyRandom}
	if a.Ports != nil {
		be := binaryutil.BigEndian.PutUint16
		e.add(&expr.Immediate{Register: reg1, Data: be(a.Ports.First)},
			&expr.Immediate{Register: reg2, Data: be(a.Ports.Last)})
		m.ToPorts, m.RegProtoMin, m.RegProtoMax = true, reg1, reg2
	}
	e.add(m)
	return nil
}

// snat ip to A                      [ immediate reg 1 A ] [ nat snat ip addr_min reg 1 ]
// snat ip to A:1-2 fully-random     [ immediate reg 1 A ] [ immediate reg 2 1 ] [ immediate reg 3 2 ]
//
//	[ nat snat ip addr_min reg 1 proto_min reg 2 proto_max reg 3 flags 0x12 ]
func (a SNAT) encodeAction(e *encoder) error {
	if !a.Addr.Is4() {
		return fmt.Errorf("snat to %v: only IPv4 addresses", a.Addr)
	}
	// nft sends addr_min alone; the kernel then sets addr_max to the same
	// register and lists both, so send both.
	n := &expr.NAT{Type: expr.NATTypeSourceNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: reg1, RegAddrMax: reg1, FullyRandom: a.FullyRandom}
	e.add(&expr.Immediate{Register: reg1, Data: a.Addr.AsSlice()})
	if a.Ports != nil {
		be := binaryutil.BigEndian.PutUint16
		e.add(&expr.Immediate{Register: reg2, Data: be(a.Ports.First)},
			&expr.Immediate{Register: reg3, Data: be(a.Ports.Last)})
		n.RegProtoMin, n.RegProtoMax, n.Specified = reg2, reg3, true
	}
	e.add(n)
	return nil
}

func checkNATPorts(rc *ruleCheck, p *PortRange) error {
	if p == nil {
		return nil
	}
	if p.First == 0 || p.First >= p.Last {
		return invalidf("nat port range %d-%d: want 1 <= first < last", p.First, p.Last)
	}
	if !portL4(rc.l4) {
		return invalidf("nat port range needs an earlier protocol match of tcp, udp, sctp, dccp or udplite")
	}
	return nil
}

func (a Masquerade) checkAction(rc *ruleCheck) error { return checkNATPorts(rc, a.Ports) }

func (a SNAT) checkAction(rc *ruleCheck) error {
	if !a.Addr.Is4() {
		return invalidf("snat address %v: only IPv4 (IPv6 masquerades)", a.Addr)
	}
	if rc.family == IPv6 {
		return invalidf("snat to an IPv4 address in a rule that matches IPv6")
	}
	return checkNATPorts(rc, a.Ports)
}

func (a Masquerade) inARP() bool { return false }
func (a SNAT) inARP() bool       { return false }

func (a Masquerade) refs(chain, set func(string)) {}
func (a SNAT) refs(chain, set func(string))       {}

// immPort reads a two-byte immediate into register reg.
func immPort(xs []kexpr, i int, reg uint32) (uint16, bool) {
	im, ok := at[*expr.Immediate](xs, i)
	if !ok || im.Register != reg || len(im.Data) != 2 {
		return 0, false
	}
	return binaryutil.BigEndian.Uint16(im.Data), true
}

// decodeMasquerade reads `masquerade [to :a-b] [fully-random]`.
func decodeMasquerade(d *decoder, xs []kexpr, ctx *encoder) (Action, bool) {
	switch len(xs) {
	case 1:
		m, ok := at[*expr.Masq](xs, 0)
		if !ok || m.ToPorts {
			return nil, false
		}
		return Masquerade{FullyRandom: m.FullyRandom}, true
	case 3:
		lo, ok1 := immPort(xs, 0, reg1)
		hi, ok2 := immPort(xs, 1, reg2)
		m, ok := at[*expr.Masq](xs, 2)
		if !ok1 || !ok2 || !ok || !m.ToPorts {
			return nil, false
		}
		return Masquerade{Ports: &PortRange{lo, hi}, FullyRandom: m.FullyRandom}, true
	}
	return nil, false
}

// decodeSNAT reads `snat ip to A[:a-b] [fully-random]`.
func decodeSNAT(d *decoder, xs []kexpr, ctx *encoder) (Action, bool) {
	if len(xs) != 2 && len(xs) != 4 {
		return nil, false
	}
	im, ok := at[*expr.Immediate](xs, 0)
	if !ok || im.Register != reg1 || len(im.Data) != 4 {
		return nil, false
	}
	n, ok := at[*expr.NAT](xs, len(xs)-1)
	if !ok || n.Type != expr.NATTypeSourceNAT || n.Family != unix.NFPROTO_IPV4 {
		return nil, false
	}
	a := SNAT{Addr: netip.AddrFrom4([4]byte(im.Data)), FullyRandom: n.FullyRandom}
	if len(xs) == 4 {
		lo, ok1 := immPort(xs, 1, reg2)
		hi, ok2 := immPort(xs, 2, reg3)
		if !ok1 || !ok2 {
			return nil, false
		}
		a.Ports = &PortRange{lo, hi}
	}
	return a, true
}

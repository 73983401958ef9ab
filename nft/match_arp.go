package nft

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
)

// ARP matches: operation and sender address, in arp tables only.

// ARP operations (the oper field of an ARP packet) that nft names: `arp
// operation request`. Other values print as decimal numbers.
const (
	ARPOpRequest   uint16 = 1
	ARPOpReply     uint16 = 2
	ARPOpRRequest  uint16 = 3 // RARP
	ARPOpRReply    uint16 = 4
	ARPOpInRequest uint16 = 8 // InARP
	ARPOpInReply   uint16 = 9
	ARPOpNAK       uint16 = 10
)

// ARPOperation matches an ARP packet's operation: `arp operation reply`,
// with Negate `arp operation != reply`. Only in arp-family tables.
type ARPOperation struct {
	Op     uint16
	Negate bool
}

// ARPSenderIP matches an ARP packet's sender protocol address: `arp saddr
// ip 10.0.0.1`, with Negate `arp saddr ip != 10.0.0.1`. IPv4 only, and only
// in arp-family tables. Like nft, it reads the address at the offset of an
// Ethernet/IPv4 ARP packet (hardware address length 6) without checking the
// header's hardware type or lengths.
type ARPSenderIP struct {
	Addr   netip.Addr
	Negate bool
}

func (m ARPOperation) printMatch(c *ruleContext) string {
	return "arp operation " + neq(m.Negate) + arpOpString(m.Op)
}

func (m ARPOperation) encodeMatch(e *encoder) error {
	// The arp family has no implicit dependencies: nft loads the
	// field straight from the ARP header (network header + 6).
	e.add(&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: arpOpOffset, Len: 2},
		&expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: binaryutil.BigEndian.PutUint16(m.Op)})
	return nil
}

func (m ARPOperation) checkMatch(rc *ruleCheck) error {
	return nil
}

func (m ARPOperation) arp() arpUse { return arpOnly }

func (m ARPOperation) sets(fn func(string)) {}

func (m ARPSenderIP) printMatch(c *ruleContext) string {
	return "arp saddr ip " + neq(m.Negate) + m.Addr.String()
}

func (m ARPSenderIP) encodeMatch(e *encoder) error {
	if !m.Addr.Is4() {
		return fmt.Errorf("arp sender address %s is not IPv4", m.Addr)
	}
	a := m.Addr.As4()
	e.add(&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: arpSPAOffset, Len: 4},
		&expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: a[:]})
	return nil
}

func (m ARPSenderIP) checkMatch(rc *ruleCheck) error {
	if !m.Addr.Is4() {
		return invalidf("arp sender address %v is not an IPv4 address", m.Addr)
	}
	return nil
}

func (m ARPSenderIP) arp() arpUse { return arpOnly }

func (m ARPSenderIP) sets(fn func(string)) {}

// ARP header offsets (RFC 826) of an Ethernet/IPv4 ARP packet, as nft's
// proto_arp uses them: the operation after hardware and protocol type and
// lengths, the sender IPv4 address after the 6-byte sender hardware address.
const (
	arpOpOffset  = 6
	arpSPAOffset = 14
)

// arpOpNames is nft's arp_op symbol table (proto.c); `nft describe arp
// operation` lists it.
var arpOpNames = map[uint16]string{
	ARPOpRequest: "request", ARPOpReply: "reply", ARPOpRRequest: "rrequest", ARPOpRReply: "rreply",
	ARPOpInRequest: "inrequest", ARPOpInReply: "inreply", ARPOpNAK: "nak",
}

func arpOpString(op uint16) string {
	if n, ok := arpOpNames[op]; ok {
		return n
	}
	return strconv.Itoa(int(op))
}

// decodeARPOperation reads `arp operation [!=] op`, in arp tables only.
func decodeARPOperation(d *decoder, xs []kexpr, ctx *encoder) (Match, int) {
	p, ok := payloadLoad(xs, 0, expr.PayloadBaseNetworkHeader)
	c, ok2 := cmpAt(xs, 1)
	if d.family != FamilyARP || !ok || !ok2 || p.Offset != arpOpOffset || p.Len != 2 || len(c.Data) != 2 {
		return nil, 0
	}
	neg, ok := negateOf(c.Op)
	if !ok {
		return nil, 0
	}
	return ARPOperation{Op: binaryutil.BigEndian.Uint16(c.Data), Negate: neg}, 2
}

// decodeARPSenderIP reads `arp saddr ip [!=] a`, in arp tables only.
func decodeARPSenderIP(d *decoder, xs []kexpr, ctx *encoder) (Match, int) {
	p, ok := payloadLoad(xs, 0, expr.PayloadBaseNetworkHeader)
	c, ok2 := cmpAt(xs, 1)
	if d.family != FamilyARP || !ok || !ok2 || p.Offset != arpSPAOffset || p.Len != 4 || len(c.Data) != 4 {
		return nil, 0
	}
	neg, ok := negateOf(c.Op)
	if !ok {
		return nil, 0
	}
	return ARPSenderIP{Addr: netip.AddrFrom4([4]byte(c.Data)), Negate: neg}, 2
}

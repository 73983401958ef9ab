package nft

// Kernel encoding of rules: each match and action becomes the expressions
// nft itself generates for the same text (checked against
// `nft --debug=netlink add rule ...` with nft 1.0.6, and by TestVocabKernel,
// which lists what we programmed with the real nft). Matching nft byte for
// byte is what makes `nft list` print our rules as Rule.String does.

import (
	"fmt"
	"net/netip"
	"sync/atomic"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Registers. nft uses the 16-byte NFT_REG_1 for single values and the
// verdict register for verdicts.
const (
	regVerdict = 0
	reg1       = 1
)

// anonSet is an anonymous constant set that a rule needs, such as the
// `{ 10.0.0.0/24, 10.1.0.1 }` of `ip saddr { 10.0.0.0/24, 10.1.0.1 }`. nft
// makes one per such match (flags anonymous|constant, plus interval when an
// element is a range or prefix); the kernel frees it with the rule.
//
// The engine queues it in the same batch as the rule and before it:
//
//	a.Set.Table = table
//	err := conn.AddSet(a.Set, a.Elements)
//
// The rule's lookup refers to it by a.Set.ID, which encodeRule allocated
// (unique per process, so many rules can go into one batch); its name is
// "__set%d", which the kernel completes.
type anonSet struct {
	Set      *nftables.Set
	Elements []nftables.SetElement
}

// anonSetIDs allocates set IDs for anonymous sets. They start high so they
// never meet the IDs google/nftables allocates from 1 for sets queued
// without one (set.go allocSetID); IDs need only be unique within a batch.
var anonSetIDs atomic.Uint32

func init() { anonSetIDs.Store(1 << 30) }

// encoder builds one rule's expressions and tracks the protocol context the
// way nft's evaluator does: an implicit dependency (`meta nfproto ipv4`
// before `ip saddr`, `meta l4proto icmp` before `icmp type`) is emitted only
// when an earlier match has not already established it.
type encoder struct {
	exprs []expr.Any
	anon  []*anonSet
	// nfproto is the layer-3 family an earlier match established, or 0.
	nfproto IPFamily
	// l4proto is the layer-4 protocol an earlier `meta l4proto P` (or an
	// icmp match's dependency) established, or -1.
	l4proto int
}

// encodeRule returns the kernel expressions of r and the anonymous sets they
// refer to, which must be queued before the rule (see anonSet). Chain and
// named set references are by name; named sets must exist in the same table
// (possibly created earlier in the same batch). Each call allocates fresh
// anonymous set IDs, so encode a rule once per batch it goes into.
func encodeRule(r *Rule) ([]expr.Any, []*anonSet, error) {
	e := &encoder{l4proto: -1}
	for i, m := range r.Match {
		if err := e.match(m); err != nil {
			return nil, nil, fmt.Errorf("match %d (%T): %w", i+1, m, err)
		}
	}
	if r.Counter {
		e.add(&expr.Counter{})
	}
	if r.Action != nil {
		if err := e.action(r.Action); err != nil {
			return nil, nil, fmt.Errorf("action %T: %w", r.Action, err)
		}
	}
	return e.exprs, e.anon, nil
}

// queueRule encodes r and queues it at the end of chain ch of table t on c,
// with its anonymous sets and its userdata (comment and hash). It is the
// whole of "add rule" for the engine.
func queueRule(c *nftables.Conn, t *nftables.Table, ch *nftables.Chain, r *Rule) error {
	exprs, anon, err := encodeRule(r)
	if err != nil {
		return err
	}
	for _, a := range anon {
		a.Set.Table = t
		if err := c.AddSet(a.Set, a.Elements); err != nil {
			return fmt.Errorf("add anonymous set: %w", err)
		}
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: exprs, UserData: ruleUserData(r)})
	return nil
}

func (e *encoder) add(xs ...expr.Any) { e.exprs = append(e.exprs, xs...) }

func nfprotoNum(f IPFamily) byte {
	if f == IPv6 {
		return unix.NFPROTO_IPV6
	}
	return unix.NFPROTO_IPV4
}

// needFamily emits `meta nfproto F` unless the context already has it. In
// an inet table a payload match on the network header means nothing without
// it (an IPv6 packet would be read at IPv4 offsets).
func (e *encoder) needFamily(f IPFamily) {
	if e.nfproto == f {
		return
	}
	e.add(&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: reg1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{nfprotoNum(f)}})
	e.nfproto = f
}

func cmpOp(negate bool) expr.CmpOp {
	if negate {
		return expr.CmpOpNeq
	}
	return expr.CmpOpEq
}

func u32(v uint32) []byte { return binaryutil.NativeEndian.PutUint32(v) }

func (e *encoder) match(m Match) error {
	switch m := m.(type) {
	case IfName:
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
	case Addr:
		return e.addr(m)
	case NFProto:
		e.add(&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: reg1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{nfprotoNum(m.Family)}})
		e.nfproto = m.Family
	case L4Proto:
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
	case Port:
		return e.port(m)
	case ICMP:
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
	case CtStateMatch:
		e.add(&expr.Ct{Key: expr.CtKeySTATE, Register: reg1})
		e.flags(uint32(m.States), m.Negate, true)
	case CtStatusMatch:
		e.add(&expr.Ct{Key: expr.CtKeySTATUS, Register: reg1})
		e.flags(uint32(m.Status), m.Negate, false)
	case CtCount:
		e.add(&expr.Connlimit{Count: m.Over, Flags: expr.NFT_CONNLIMIT_F_INV})
	case Mark:
		e.add(&expr.Meta{Key: expr.MetaKeyMARK, Register: reg1})
		if m.Mask != 0 && m.Mask != 0xffffffff {
			e.add(&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: u32(m.Mask), Xor: u32(0)})
		}
		e.add(&expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: u32(m.Value)})
	case RPF:
		e.add(&expr.Fib{Register: reg1, FlagSADDR: true, FlagMARK: true, FlagIIF: true, ResultOIF: true},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: u32(0)})
	case Limit:
		e.add(&expr.Limit{Type: expr.LimitTypePkts, Rate: m.Rate, Over: true, Unit: expr.LimitTimeSecond, Burst: limitBurst(m)})
	case Lookup:
		src, err := e.loadKeys(m.Keys)
		if err != nil {
			return err
		}
		e.add(&expr.Lookup{SourceRegister: src, SetName: m.Set, Invert: m.Negate})
	case ARPOperation:
		// The arp family has no implicit dependencies: nft loads the
		// field straight from the ARP header (network header + 6).
		e.add(&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: arpOpOffset, Len: 2},
			&expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: binaryutil.BigEndian.PutUint16(m.Op)})
	case ARPSenderIP:
		if !m.Addr.Is4() {
			return fmt.Errorf("arp sender address %s is not IPv4", m.Addr)
		}
		a := m.Addr.As4()
		e.add(&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: arpSPAOffset, Len: 4},
			&expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: a[:]})
	default:
		return fmt.Errorf("unknown match type %T", m)
	}
	return nil
}

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

// limitBurst returns the burst to program: nft's default of 5 packets when
// unset, as the kernel would substitute anyway (nft_limit_init).
func limitBurst(l Limit) uint32 {
	if l.Burst == 0 {
		return 5
	}
	return l.Burst
}

func icmpProto(f IPFamily) byte {
	if f == IPv6 {
		return unix.IPPROTO_ICMPV6
	}
	return unix.IPPROTO_ICMP
}

// ARP header offsets (RFC 826) of an Ethernet/IPv4 ARP packet, as nft's
// proto_arp uses them: the operation after hardware and protocol type and
// lengths, the sender IPv4 address after the 6-byte sender hardware address.
const (
	arpOpOffset  = 6
	arpSPAOffset = 14
)

// addrField returns the network-header offset and length of an address.
func addrField(f IPFamily, d Direction) (offset, size uint32) {
	if f == IPv6 {
		if d == In {
			return 8, 16
		}
		return 24, 16
	}
	if d == In {
		return 12, 4
	}
	return 16, 4
}

func (e *encoder) addr(m Addr) error {
	e.needFamily(m.Family)
	off, size := addrField(m.Family, m.Dir)
	switch {
	case m.Set != "":
		e.add(&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: size},
			&expr.Lookup{SourceRegister: reg1, SetName: m.Set, Invert: m.Negate})
	case len(m.Prefixes) == 1:
		p := m.Prefixes[0]
		bits := p.Bits()
		addr := p.Masked().Addr().AsSlice()
		switch {
		case bits == int(size)*8:
			e.add(&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: size},
				&expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: addr})
		case bits > 0 && bits%8 == 0:
			// nft loads only the prefix's bytes when it is byte-aligned.
			n := uint32(bits / 8)
			e.add(&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: n},
				&expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: addr[:n]})
		default:
			mask := netip.PrefixFrom(p.Addr(), bits)
			first, last := prefixRange(mask)
			maskBytes := make([]byte, len(first))
			for i := range maskBytes {
				maskBytes[i] = ^(first[i] ^ last[i])
			}
			e.add(&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: size},
				&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: size, Mask: maskBytes, Xor: make([]byte, size)},
				&expr.Cmp{Op: cmpOp(m.Negate), Register: reg1, Data: addr})
		}
	case len(m.Prefixes) > 1:
		var fields []keyField
		interval := false
		for _, p := range m.Prefixes {
			first, last := prefixRange(p)
			fields = append(fields, keyField{first, last})
			interval = interval || p.Bits() != int(size)*8
		}
		dt := nftables.TypeIPAddr
		if m.Family == IPv6 {
			dt = nftables.TypeIP6Addr
		}
		e.add(&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseNetworkHeader, Offset: off, Len: size})
		e.lookupAnon(dt, interval, anonElements(fields, interval), m.Negate)
	default:
		return fmt.Errorf("no prefixes and no set")
	}
	return nil
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

// anonElements encodes the one-field elements of an anonymous set.
func anonElements(fields []keyField, interval bool) []nftables.SetElement {
	var els []nftables.SetElement
	for _, f := range fields {
		els = append(els, nftables.SetElement{Key: f.first})
		if !interval {
			continue
		}
		if end, ok := increment(f.last); ok {
			els = append(els, nftables.SetElement{Key: end, IntervalEnd: true})
		}
	}
	return els
}

// lookupAnon adds an anonymous set and a lookup of reg 1 in it.
func (e *encoder) lookupAnon(dt nftables.SetDatatype, interval bool, els []nftables.SetElement, negate bool) {
	id := anonSetIDs.Add(1)
	s := &nftables.Set{
		ID:        id,
		Name:      "__set%d",
		Anonymous: true,
		Constant:  true,
		Interval:  interval,
		KeyType:   dt,
	}
	e.anon = append(e.anon, &anonSet{Set: s, Elements: els})
	e.add(&expr.Lookup{SourceRegister: reg1, SetName: s.Name, SetID: id, Invert: negate})
}

// concatRegister returns the register nft uses for a concatenation field at
// byte offset off: fields start at 32-bit boundaries of NFT_REG_1 onwards,
// named as a 16-byte register when aligned to one (netlink_put_register in
// nft's netlink.c), else as NFT_REG32_xx.
func concatRegister(off int) uint32 {
	slot := off / 4
	if slot%4 == 0 {
		return uint32(unix.NFT_REG_1 + slot/4)
	}
	return uint32(unix.NFT_REG32_00 + slot)
}

// maxConcatBytes is the size of the register file nft concatenates into
// (NFT_REG32_00 .. NFT_REG32_15).
const maxConcatBytes = 64

// loadKeys loads the selectors as one key, each field at the next 32-bit
// register, after any family dependency (which needs reg 1 itself), and
// returns the source register of the key.
func (e *encoder) loadKeys(keys []Selector) (uint32, error) {
	if len(keys) == 0 {
		return 0, fmt.Errorf("no keys")
	}
	for _, k := range keys {
		switch k {
		case SelIPSaddr, SelIPDaddr:
			e.needFamily(IPv4)
		case SelIP6Saddr, SelIP6Daddr:
			e.needFamily(IPv6)
		}
	}
	off := 0
	for _, k := range keys {
		t, ok := selectorTypes[k]
		if !ok {
			return 0, fmt.Errorf("unknown selector %q", k)
		}
		if off+keyTypes[t].size > maxConcatBytes {
			return 0, fmt.Errorf("key %v is longer than %d bytes", keys, maxConcatBytes)
		}
		e.add(selectorLoad(k, concatRegister(off)))
		off += pad4(keyTypes[t].size)
	}
	return reg1, nil
}

// selectorLoad returns the expression that loads k into reg.
func selectorLoad(k Selector, reg uint32) expr.Any {
	payload := func(base expr.PayloadBase, off, n uint32) expr.Any {
		return &expr.Payload{DestRegister: reg, Base: base, Offset: off, Len: n}
	}
	switch k {
	case SelIIFName:
		return &expr.Meta{Key: expr.MetaKeyIIFNAME, Register: reg}
	case SelOIFName:
		return &expr.Meta{Key: expr.MetaKeyOIFNAME, Register: reg}
	case SelL4Proto:
		return &expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg}
	case SelMark:
		return &expr.Meta{Key: expr.MetaKeyMARK, Register: reg}
	case SelIPSaddr:
		return payload(expr.PayloadBaseNetworkHeader, 12, 4)
	case SelIPDaddr:
		return payload(expr.PayloadBaseNetworkHeader, 16, 4)
	case SelIP6Saddr:
		return payload(expr.PayloadBaseNetworkHeader, 8, 16)
	case SelIP6Daddr:
		return payload(expr.PayloadBaseNetworkHeader, 24, 16)
	case SelTHSport:
		return payload(expr.PayloadBaseTransportHeader, 0, 2)
	case SelTHDport:
		return payload(expr.PayloadBaseTransportHeader, 2, 2)
	}
	panic("nft: selectorLoad: unchecked selector " + string(k))
}

func verdictExpr(v Verdict) (*expr.Verdict, error) {
	switch v.Kind {
	case Accept:
		return &expr.Verdict{Kind: expr.VerdictAccept}, nil
	case Drop:
		return &expr.Verdict{Kind: expr.VerdictDrop}, nil
	case Return:
		return &expr.Verdict{Kind: expr.VerdictReturn}, nil
	case Jump:
		return &expr.Verdict{Kind: expr.VerdictJump, Chain: v.Chain}, nil
	case Goto:
		return &expr.Verdict{Kind: expr.VerdictGoto, Chain: v.Chain}, nil
	}
	return nil, fmt.Errorf("unknown verdict %q", v.Kind)
}

// Reject types and codes (nf_tables.h enum nft_reject_types and
// nft_reject_inet_code). nft uses the family-independent icmpx codes in an
// inet table when the rule does not pin the family.
const (
	rejectTCPReset       = 1 // NFT_REJECT_TCP_RST
	rejectICMPX          = 2 // NFT_REJECT_ICMPX_UNREACH
	icmpxPortUnreach     = 1 // NFT_REJECT_ICMPX_PORT_UNREACH
	icmpxAdminProhibited = 3 // NFT_REJECT_ICMPX_ADMIN_PROHIBITED
)

// Log attributes present (expr.Log.Key is a bitmap of NFTA_LOG_*).
const (
	logPrefixAttr = 1 << unix.NFTA_LOG_PREFIX
	logGroupAttr  = 1 << unix.NFTA_LOG_GROUP
)

// markAllOnes is a mask that keeps the whole mark.
const markAllOnes uint32 = 0xffffffff

func (e *encoder) action(a Action) error {
	switch a := a.(type) {
	case Verdict:
		v, err := verdictExpr(a)
		if err != nil {
			return err
		}
		e.add(v)
	case Reject:
		switch a.With {
		case RejectTCPReset:
			e.add(&expr.Reject{Type: rejectTCPReset, Code: 0})
		case RejectICMPPortUnreachable:
			e.add(&expr.Reject{Type: rejectICMPX, Code: icmpxPortUnreach})
		case RejectICMPAdminProhibited:
			e.add(&expr.Reject{Type: rejectICMPX, Code: icmpxAdminProhibited})
		default:
			return fmt.Errorf("unknown reject type %q", a.With)
		}
	case VMap:
		src, err := e.loadKeys([]Selector{a.Key})
		if err != nil {
			return err
		}
		if a.Mask != 0 && a.Mask != markAllOnes {
			if a.Key != SelMark {
				return fmt.Errorf("vmap mask on key %q (only %q takes one)", a.Key, SelMark)
			}
			e.add(&expr.Bitwise{SourceRegister: src, DestRegister: src, Len: 4, Mask: u32(a.Mask), Xor: u32(0)})
		}
		// A vmap lookup writes the verdict register; without
		// IsDestRegSet the kernel rejects the rule (google/nftables #176).
		e.add(&expr.Lookup{SourceRegister: src, SetName: a.Map, IsDestRegSet: true, DestRegister: regVerdict})
	case SetMark:
		if a.And == 0 {
			// mark = Xor: nft's `meta mark set 0x10` is an immediate.
			e.add(&expr.Immediate{Register: reg1, Data: u32(a.Xor)})
		} else {
			e.add(&expr.Meta{Key: expr.MetaKeyMARK, Register: reg1},
				&expr.Bitwise{SourceRegister: reg1, DestRegister: reg1, Len: 4, Mask: u32(a.And), Xor: u32(a.Xor)})
		}
		e.add(&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg1})
	case SetMarkFromMap:
		src, err := e.loadKeys([]Selector{a.Key})
		if err != nil {
			return err
		}
		e.add(&expr.Lookup{SourceRegister: src, SetName: a.Map, IsDestRegSet: true, DestRegister: reg1},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg1})
	case Notrack:
		e.add(&expr.Notrack{})
	case Log:
		l := &expr.Log{}
		if a.Prefix != "" {
			l.Key |= logPrefixAttr
			l.Data = []byte(a.Prefix)
		}
		e.add(l)
	case NFLog:
		l := &expr.Log{Key: logGroupAttr, Group: a.Group}
		if a.Prefix != "" {
			l.Key |= logPrefixAttr
			l.Data = []byte(a.Prefix)
		}
		e.add(l)
	default:
		return fmt.Errorf("unknown action type %T", a)
	}
	return nil
}

package nft

// Kernel encoding of rules: each match and action becomes the expressions
// nft itself generates for the same text (checked against
// `nft --debug=netlink add rule ...` with nft 1.0.6, and by TestVocabKernel,
// which lists what we programmed with the real nft). Matching nft byte for
// byte is what makes `nft list` print our rules as Rule.String does.

import (
	"encoding/binary"
	"fmt"
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
	reg2       = 2 // NFT_REG_2: a nat statement's second value
	reg3       = 3 // NFT_REG_3: a nat statement's third value
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
		if m == nil {
			return nil, nil, fmt.Errorf("match %d is nil", i+1)
		}
		if err := m.encodeMatch(e); err != nil {
			return nil, nil, fmt.Errorf("match %d (%T): %w", i+1, m, err)
		}
	}
	if r.Counter {
		e.add(&expr.Counter{})
	}
	if r.Action != nil {
		if err := r.Action.encodeAction(e); err != nil {
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
	case SelARPSaddrIP:
		return payload(expr.PayloadBaseNetworkHeader, arpSPAOffset, 4)
	}
	panic("nft: selectorLoad: unchecked selector " + string(k))
}

// selectorOf is the inverse of selectorLoad: the selector x loads into reg,
// or false.
func selectorOf(k kexpr, reg uint32) (Selector, bool) {
	switch x := k.x.(type) {
	case *expr.Meta:
		if x.SourceRegister || x.Register != reg {
			return "", false
		}
		switch x.Key {
		case expr.MetaKeyIIFNAME:
			return SelIIFName, true
		case expr.MetaKeyOIFNAME:
			return SelOIFName, true
		case expr.MetaKeyL4PROTO:
			return SelL4Proto, true
		case expr.MetaKeyMARK:
			return SelMark, true
		}
	case *expr.Payload:
		if x.OperationType != expr.PayloadLoad || x.DestRegister != reg || x.CsumType != 0 {
			return "", false
		}
		for _, s := range []Selector{SelIPSaddr, SelIPDaddr, SelIP6Saddr, SelIP6Daddr, SelTHSport, SelTHDport, SelARPSaddrIP} {
			if p := selectorLoad(s, reg).(*expr.Payload); p.Base == x.Base && p.Offset == x.Offset && p.Len == x.Len {
				return s, true
			}
		}
	}
	return "", false
}

// decodeLoads reads the selector loads at the start of xs as loadKeys
// lays them out (after any family dependency, which the caller's context
// holds): the selectors and how many expressions they take.
func decodeLoads(xs []kexpr, max int) ([]Selector, int) {
	var keys []Selector
	off := 0
	for i := 0; i < len(xs) && len(keys) < max; i++ {
		if off >= maxConcatBytes {
			break
		}
		s, ok := selectorOf(xs[i], concatRegister(off))
		if !ok {
			break
		}
		keys = append(keys, s)
		off += pad4(keyTypes[selectorTypes[s]].size)
	}
	return keys, len(keys)
}

// cmpAt returns expression i as a compare of reg 1.
func cmpAt(xs []kexpr, i int) (*expr.Cmp, bool) {
	c, ok := at[*expr.Cmp](xs, i)
	return c, ok && c.Register == reg1
}

// negateOf says whether a compare is != (true) or == (false), or neither.
func negateOf(op expr.CmpOp) (neg, ok bool) {
	switch op {
	case expr.CmpOpEq:
		return false, true
	case expr.CmpOpNeq:
		return true, true
	}
	return false, false
}

// metaLoad says whether expression i loads meta key into reg 1.
func metaLoad(xs []kexpr, i int, key expr.MetaKey) bool {
	m, ok := at[*expr.Meta](xs, i)
	return ok && m.Key == key && !m.SourceRegister && m.Register == reg1
}

// payloadLoad returns expression i as a plain payload load into reg 1.
func payloadLoad(xs []kexpr, i int, base expr.PayloadBase) (*expr.Payload, bool) {
	p, ok := at[*expr.Payload](xs, i)
	return p, ok && p.OperationType == expr.PayloadLoad && p.DestRegister == reg1 && p.Base == base && p.CsumType == 0
}

// bitwiseAt returns expression i as a 4-byte bitwise of reg 1 onto itself,
// its mask and xor as host-order numbers.
func bitwiseAt(xs []kexpr, i int) (mask, xor uint32, ok bool) {
	b, ok := at[*expr.Bitwise](xs, i)
	if !ok || b.SourceRegister != reg1 || b.DestRegister != reg1 || b.Len != 4 || len(b.Mask) != 4 || len(b.Xor) != 4 {
		return 0, 0, false
	}
	return binary.NativeEndian.Uint32(b.Mask), binary.NativeEndian.Uint32(b.Xor), true
}

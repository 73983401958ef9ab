package nft

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// Addr matches the source (In) or destination (Out) address of the given
// family. Exactly one of Prefixes or Set is used: a single prefix is a plain
// compare (`ip saddr 10.0.0.0/24`), several form an anonymous set (`ip saddr
// { 10.0.0.0/24, 10.1.0.1 }`), and Set names a set of the table (`ip saddr
// @filter-ipset-x`). The match implies the family (`meta nfproto`).
type Addr struct {
	Family   IPFamily
	Dir      Direction
	Prefixes []netip.Prefix
	Set      string
	Negate   bool
}

func (m Addr) printMatch(c *ruleContext) string {
	c.killFamily(m.Family)
	c.family = m.Family
	lhs := familyWord(m.Family) + " " + dirWord(m.Dir, "saddr", "daddr") + " " + neq(m.Negate)
	switch {
	case m.Set != "":
		return lhs + "@" + m.Set
	case len(m.Prefixes) == 1:
		return lhs + prefixString(m.Prefixes[0])
	default:
		ps := slices.Clone(m.Prefixes)
		slices.SortFunc(ps, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
		items := make([]string, len(ps))
		for i, p := range ps {
			items[i] = prefixString(p)
		}
		return lhs + anonSetString(items)
	}
}

func (m Addr) encodeMatch(e *encoder) error {
	return e.addr(m)
}

func (m Addr) checkMatch(rc *ruleCheck) error {
	if err := checkDir(m.Dir); err != nil {
		return err
	}
	if err := rc.pinFamily(m.Family); err != nil {
		return err
	}
	if (m.Set == "") == (len(m.Prefixes) == 0) {
		return invalidf("address match needs exactly one of Prefixes and Set")
	}
	if m.Set != "" {
		t := TypeIPv4Addr
		if m.Family == IPv6 {
			t = TypeIPv6Addr
		}
		return rc.set(m.Set, []KeyType{t}, DataNone)
	}
	return checkPrefixes(m.Family, m.Prefixes)
}

func (m Addr) arp() arpUse { return arpNo }

func (m Addr) sets(fn func(string)) {
	if m.Set != "" {
		fn(m.Set)
	}
}

// addrField returns the network-header offset and length of an address.

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

// decodeAddr reads an address match of the family the context holds: a
// compare (whole address, byte-aligned prefix, or masked prefix), a lookup
// in an anonymous set of prefixes, or in a named set.
func decodeAddr(d *decoder, xs []kexpr, ctx *encoder) (Match, int) {
	f := ctx.nfproto
	if f != IPv4 && f != IPv6 {
		return nil, 0
	}
	p, ok := payloadLoad(xs, 0, expr.PayloadBaseNetworkHeader)
	if !ok {
		return nil, 0
	}
	m := Addr{Family: f}
	inOff, size := addrField(f, In)
	outOff, _ := addrField(f, Out)
	switch p.Offset {
	case inOff:
		m.Dir = In
	case outOff:
		m.Dir = Out
	default:
		return nil, 0
	}
	if p.Len == 0 || p.Len > size {
		return nil, 0
	}
	addr := func(b []byte, bits int) (netip.Prefix, bool) {
		full := make([]byte, size)
		copy(full, b)
		a, ok := netip.AddrFromSlice(full)
		if !ok {
			return netip.Prefix{}, false
		}
		return netip.PrefixFrom(a, bits), true
	}
	if p.Len < size {
		c, ok := cmpAt(xs, 1)
		if !ok || len(c.Data) != int(p.Len) {
			return nil, 0
		}
		if m.Negate, ok = negateOf(c.Op); !ok {
			return nil, 0
		}
		pf, ok := addr(c.Data, int(p.Len)*8)
		if !ok {
			return nil, 0
		}
		m.Prefixes = []netip.Prefix{pf}
		return m, 2
	}
	if c, ok := cmpAt(xs, 1); ok {
		if m.Negate, ok = negateOf(c.Op); !ok {
			return nil, 0
		}
		pf, ok := addr(c.Data, int(size)*8)
		if !ok {
			return nil, 0
		}
		m.Prefixes = []netip.Prefix{pf}
		return m, 2
	}
	if b, ok := at[*expr.Bitwise](xs, 1); ok {
		c, ok := cmpAt(xs, 2)
		if !ok {
			return nil, 0
		}
		if m.Negate, ok = negateOf(c.Op); !ok {
			return nil, 0
		}
		bits, ok := maskPrefixLen(b.Mask)
		if !ok || len(b.Mask) != int(size) {
			return nil, 0
		}
		pf, ok := addr(c.Data, bits)
		if !ok {
			return nil, 0
		}
		m.Prefixes = []netip.Prefix{pf}
		return m, 3
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
	t := TypeIPv4Addr
	if f == IPv6 {
		t = TypeIPv6Addr
	}
	fields, ok := d.anonFields(l, t)
	if !ok {
		return nil, 0
	}
	for _, fl := range fields {
		bits, ok := rangePrefixLen(fl.first, fl.last)
		if !ok {
			return nil, 0
		}
		pf, ok := addr(fl.first, bits)
		if !ok {
			return nil, 0
		}
		m.Prefixes = append(m.Prefixes, pf)
	}
	return m, 2
}

// maskPrefixLen returns the length of the prefix whose mask is mask: ones
// then zeros only.
func maskPrefixLen(mask []byte) (int, bool) {
	bits := 0
	for bits < len(mask)*8 && mask[bits/8]&(0x80>>(bits%8)) != 0 {
		bits++
	}
	for i := bits; i < len(mask)*8; i++ {
		if mask[i/8]&(0x80>>(i%8)) != 0 {
			return 0, false
		}
	}
	return bits, true
}

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

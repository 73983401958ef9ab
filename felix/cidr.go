package felix

import (
	"fmt"
	"net/netip"
)

// Family is an IP family, used as the index of per-family arrays:
// IPv4 is 0, IPv6 is 1.
type Family int

// The families.
const (
	IPv4 Family = 0
	IPv6 Family = 1
)

// Families lists both families in index order.
var Families = [2]Family{IPv4, IPv6}

// FamilyOf returns the family of a (a mapped address is IPv6 here: the
// parsers of this package never return one).
func FamilyOf(a netip.Addr) Family {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

// Version returns 4 or 6.
func (f Family) Version() int { return 4 + 2*int(f) }

// String returns "IPv4" or "IPv6".
func (f Family) String() string { return fmt.Sprintf("IPv%d", f.Version()) }

// ParseCIDR parses a CIDR ("10.0.0.1/24") or a bare address ("10.0.0.1",
// a host prefix), keeping host bits: 10.0.0.1/24 stays 10.0.0.1/24. An
// IPv4-mapped address, or mapped prefix of /96 or longer, becomes IPv4;
// zones are refused. See the package documentation.
func ParseCIDR(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		return p, nil
	}
	a, err := ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR or address", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// ParseNet is ParseCIDR with the host bits masked off: 10.0.0.1/24 is
// 10.0.0.0/24. Routes, set elements and rule matches want networks.
func ParseNet(s string) (netip.Prefix, error) {
	p, err := ParseCIDR(s)
	if err != nil {
		return p, err
	}
	return p.Masked(), nil
}

// ParseAddr parses a bare address (no prefix length). An IPv4-mapped IPv6
// address becomes IPv4; a zone is refused.
func ParseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q is not an address", s)
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q has a zone, which nothing here can use", s)
	}
	return a.Unmap(), nil
}

// ParseCIDRIn is ParseCIDR for a field that holds one family only (a
// workload's ipv4Nets, say): anything else is refused.
func ParseCIDRIn(f Family, s string) (netip.Prefix, error) {
	p, err := ParseCIDR(s)
	if err != nil || FamilyOf(p.Addr()) != f {
		return netip.Prefix{}, fmt.Errorf("%q is not an %s CIDR or address", s, f)
	}
	return p, nil
}

// ParseAddrIn is ParseAddr for a field that holds one family only.
func ParseAddrIn(f Family, s string) (netip.Addr, error) {
	a, err := ParseAddr(s)
	if err != nil || FamilyOf(a) != f {
		return netip.Addr{}, fmt.Errorf("%q is not an %s address", s, f)
	}
	return a, nil
}

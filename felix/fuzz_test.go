package felix_test

import (
	"net/netip"
	"testing"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// FuzzParseCIDR: whatever ParseCIDR accepts is a valid prefix without a
// zone, and mapped only if shorter than /96, ParseNet agrees and masks it, and the masked
// prefix parses back to itself.
func FuzzParseCIDR(f *testing.F) {
	for _, s := range []string{"10.0.0.1/24", "10.0.0.1", "::ffff:10.0.0.1", "::ffff:10.0.0.0/104",
		"::ffff:10.0.0.0/95", "fd00::1/64", "fe80::1%eth0", "10.0.0.0/33", " 10.0.0.1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := felix.ParseCIDR(s)
		n, nerr := felix.ParseNet(s)
		if (err == nil) != (nerr == nil) {
			t.Fatalf("ParseCIDR and ParseNet disagree on %q: %v, %v", s, err, nerr)
		}
		if err != nil {
			return
		}
		// A mapped prefix shorter than /96 stays IPv6; any other is IPv4.
		if !p.IsValid() || (p.Addr().Is4In6() && p.Bits() >= 96) || p.Addr().Zone() != "" {
			t.Fatalf("ParseCIDR(%q) = %v", s, p)
		}
		if n != p.Masked() {
			t.Fatalf("ParseNet(%q) = %v, want %v", s, n, p.Masked())
		}
		if back, err := felix.ParseNet(n.String()); err != nil || back != n {
			t.Fatalf("ParseNet(%q) = %v, %v; want %v", n.String(), back, err, n)
		}
	})
}

// FuzzParseMember: an accepted member has a valid prefix of the type's
// shape, and an IP_AND_PORT member written back in Felix's form parses to
// itself.
func FuzzParseMember(f *testing.F) {
	for _, s := range []string{"10.0.0.1,tcp:80", "10.0.0.1/32,tcp:80", "fd00::1,udp:53", "10.0.0.0/24,tcp:80",
		"10.0.0.1,icmp:1", "10.0.0.1,tcp:99999", "10.0.0.1:80", "[fd00::1],tcp:80"} {
		f.Add(int32(proto.IPSetUpdate_IP_AND_PORT), s)
	}
	f.Add(int32(proto.IPSetUpdate_NET), "10.0.0.1/24")
	f.Add(int32(proto.IPSetUpdate_IP), "10.0.0.1")
	f.Fuzz(func(t *testing.T, typ int32, s string) {
		m, err := felix.ParseMember(proto.IPSetUpdate_IPSetType(typ), s)
		if err != nil {
			return
		}
		if !m.Prefix.IsValid() || (m.Prefix.Addr().Is4In6() && m.Prefix.Bits() >= 96) || m.Prefix != m.Prefix.Masked() {
			t.Fatalf("ParseMember(%d, %q) = %+v", typ, s, m)
		}
		if proto.IPSetUpdate_IPSetType(typ) != proto.IPSetUpdate_IP_AND_PORT {
			return
		}
		if !m.Prefix.IsSingleIP() {
			t.Fatalf("ParseMember(%d, %q) = %+v: not an address", typ, s, m)
		}
		again := m.Prefix.Addr().String() + "," + felix.ProtoName(m.Protocol) + ":" + itoa(m.Port)
		if back, err := felix.ParseMember(proto.IPSetUpdate_IP_AND_PORT, again); err != nil || back != m {
			t.Fatalf("ParseMember(%q) = %+v, %v; want %+v", again, back, err, m)
		}
	})
}

// FuzzCheckIfaceName: felix and nft accept the same interface names.
func FuzzCheckIfaceName(f *testing.F) {
	for _, s := range []string{"cali1", "cali0123456789a", "cali0123456789ab", `cali"x`, "cali\nx", "calié", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if a, b := felix.CheckIfaceName(s), nft.ValidateIfName(s); (a == nil) != (b == nil) {
			t.Fatalf("%q: felix %v, nft %v", s, a, b)
		}
	})
}

// FuzzParseAddr: an accepted address is valid, unmapped and zoneless.
func FuzzParseAddr(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "::ffff:10.0.0.1", "fe80::1%eth0", "10.0.0.1/32"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := felix.ParseAddr(s)
		if err == nil && (!a.IsValid() || a.Is4In6() || a.Zone() != "" || a != netip.MustParseAddr(a.String())) {
			t.Fatalf("ParseAddr(%q) = %v", s, a)
		}
	})
}

func itoa(v uint16) string {
	var b [5]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

package felix_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

func TestParseCIDR(t *testing.T) {
	for _, tc := range []struct {
		in        string
		host, net string // "" means refused
	}{
		{"10.0.0.1/24", "10.0.0.1/24", "10.0.0.0/24"},
		{"10.0.0.1", "10.0.0.1/32", "10.0.0.1/32"},
		{"0.0.0.0/0", "0.0.0.0/0", "0.0.0.0/0"},
		{"::ffff:10.0.0.1", "10.0.0.1/32", "10.0.0.1/32"},
		{"::ffff:10.0.0.1/128", "10.0.0.1/32", "10.0.0.1/32"},
		{"::ffff:10.0.0.0/104", "10.0.0.0/8", "10.0.0.0/8"},
		{"::ffff:10.0.0.7/96", "10.0.0.7/0", "0.0.0.0/0"},
		{"::ffff:10.0.0.0/95", "::ffff:10.0.0.0/95", "::fffe:0:0/95"},
		{"fd00::1/64", "fd00::1/64", "fd00::/64"},
		{"fd00::1", "fd00::1/128", "fd00::1/128"},
		{"fe80::1%eth0", "", ""},
		{"fe80::1%eth0/64", "", ""},
		{"10.0.0.0/33", "", ""},
		{"10.0.0.256", "", ""},
		{" 10.0.0.1", "", ""},
		{"10.0.0.1 ", "", ""},
		{"", "", ""},
		{"10.0.0.1/", "", ""},
	} {
		host, err := felix.ParseCIDR(tc.in)
		if tc.host == "" {
			if err == nil {
				t.Errorf("ParseCIDR(%q) = %v, want an error", tc.in, host)
			}
		} else if err != nil || host != netip.MustParsePrefix(tc.host) {
			t.Errorf("ParseCIDR(%q) = %v, %v; want %s", tc.in, host, err, tc.host)
		}
		net, err := felix.ParseNet(tc.in)
		if tc.net == "" {
			if err == nil {
				t.Errorf("ParseNet(%q) = %v, want an error", tc.in, net)
			}
		} else if err != nil || net != netip.MustParsePrefix(tc.net) {
			t.Errorf("ParseNet(%q) = %v, %v; want %s", tc.in, net, err, tc.net)
		}
	}
}

func TestParseInFamily(t *testing.T) {
	if _, err := felix.ParseCIDRIn(felix.IPv4, "::ffff:10.0.0.1"); err != nil {
		t.Errorf("a mapped address is IPv4: %v", err)
	}
	if _, err := felix.ParseCIDRIn(felix.IPv6, "::ffff:10.0.0.1"); err == nil || err.Error() != `"::ffff:10.0.0.1" is not an IPv6 CIDR or address` {
		t.Errorf("a mapped address in an IPv6 field: %v", err)
	}
	if a, err := felix.ParseAddrIn(felix.IPv4, "::ffff:172.16.0.1"); err != nil || a != netip.MustParseAddr("172.16.0.1") {
		t.Errorf("ParseAddrIn(IPv4, mapped) = %v, %v", a, err)
	}
	if _, err := felix.ParseAddrIn(felix.IPv4, "10.0.0.1/32"); err == nil {
		t.Errorf("ParseAddrIn takes a bare address only")
	}
}

func TestParseMember(t *testing.T) {
	ipp, ip, netT := proto.IPSetUpdate_IP_AND_PORT, proto.IPSetUpdate_IP, proto.IPSetUpdate_NET
	for _, tc := range []struct {
		typ  proto.IPSetUpdate_IPSetType
		in   string
		want felix.Member
		err  string
	}{
		{ipp, "10.0.0.1,tcp:80", felix.Member{Prefix: netip.MustParsePrefix("10.0.0.1/32"), Protocol: felix.ProtoTCP, Port: 80}, ""},
		{ipp, "10.0.0.1/32,tcp:80", felix.Member{Prefix: netip.MustParsePrefix("10.0.0.1/32"), Protocol: felix.ProtoTCP, Port: 80}, ""},
		{ipp, "fd00::1,udp:53", felix.Member{Prefix: netip.MustParsePrefix("fd00::1/128"), Protocol: felix.ProtoUDP, Port: 53}, ""},
		{ipp, "::ffff:10.0.0.1,SCTP:9", felix.Member{Prefix: netip.MustParsePrefix("10.0.0.1/32"), Protocol: felix.ProtoSCTP, Port: 9}, ""},
		{ipp, "10.0.0.0/24,tcp:80", felix.Member{}, `"10.0.0.0/24,tcp:80": "10.0.0.0/24" is a network, not an address`},
		{ipp, "10.0.0.1,icmp:0", felix.Member{}, `"10.0.0.1,icmp:0": protocol "icmp" is not tcp, udp or sctp`},
		{ipp, "10.0.0.1,tcp:65536", felix.Member{}, `"10.0.0.1,tcp:65536": "65536" is not a port`},
		{ipp, "10.0.0.1:80", felix.Member{}, `"10.0.0.1:80" is not <address>,<tcp|udp|sctp>:<port>`},
		{ipp, "10.0.0.1,tcp", felix.Member{}, `"10.0.0.1,tcp" is not <address>,<tcp|udp|sctp>:<port>`},
		{ipp, "[fd00::1],tcp:80", felix.Member{}, `"[fd00::1],tcp:80": "[fd00::1]" is not an address`},
		{ip, "10.0.0.1", felix.Member{Prefix: netip.MustParsePrefix("10.0.0.1/32")}, ""},
		{ip, "10.0.0.0/24", felix.Member{}, `"10.0.0.0/24" is a network, not an address`},
		{netT, "10.0.0.1/24", felix.Member{Prefix: netip.MustParsePrefix("10.0.0.0/24")}, ""},
		{netT, "nope", felix.Member{}, `"nope" is not a CIDR or address`},
		{proto.IPSetUpdate_IPSetType(7), "10.0.0.1", felix.Member{}, "unknown IP set type 7"},
	} {
		got, err := felix.ParseMember(tc.typ, tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("ParseMember(%v, %q) = %v, %v; want error %q", tc.typ, tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseMember(%v, %q) = %+v, %v; want %+v", tc.typ, tc.in, got, err, tc.want)
		}
	}
}

// TestIfaceNameAgreesWithNft: the names felix accepts for an endpoint are
// exactly those nft's validator accepts in a dispatch map, byte by byte
// and at the length limit.
func TestIfaceNameAgreesWithNft(t *testing.T) {
	names := []string{"", "cali1", "cali0123456789a", "cali0123456789ab", "calié"}
	for c := 0; c < 256; c++ {
		names = append(names, "cali"+string([]byte{byte(c)}))
	}
	for _, n := range names {
		f, k := felix.CheckIfaceName(n), nft.ValidateIfName(n)
		if (f == nil) != (k == nil) {
			t.Errorf("%q: felix says %v, nft says %v", n, f, k)
		}
	}
	if err := felix.CheckIfaceName(`cali"x`); err == nil || err.Error() != `interface name "cali\"x" has character '"': nftables cannot match it` {
		t.Errorf("quote: %v", err)
	}
	if err := felix.CheckIfaceName("calié"); err == nil || !strings.Contains(err.Error(), `byte '\xc3'`) {
		t.Errorf("non-ASCII: %v", err)
	}
}

func TestParseWorkload(t *testing.T) {
	ep := &proto.WorkloadEndpoint{
		Name:                       "cali1",
		Ipv4Nets:                   []string{"10.65.0.7/24", "10.65.0.300/32", "::ffff:10.65.0.8"},
		Ipv6Nets:                   []string{"fd00::1/64", "10.0.0.1/32"},
		Ipv4Nat:                    []*proto.NatInfo{{ExtIp: "172.16.0.1"}},
		Ipv6Nat:                    []*proto.NatInfo{{ExtIp: "nope"}},
		Mac:                        "02:00:0a:41:00",
		AllowSpoofedSourcePrefixes: []string{"8.8.8.8/8", "fd00::1/64"},
	}
	w, err := felix.ParseWorkload(ep, true)
	want := []string{
		`ipv4Nets[1]: "10.65.0.300/32" is not an IPv4 CIDR or address`,
		`ipv6Nets[1]: "10.0.0.1/32" is not an IPv6 CIDR or address`,
		`ipv6Nat[0].extIp: "nope" is not an IPv6 address`,
		`mac: "02:00:0a:41:00" is not a MAC address`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("ParseWorkload error:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
	var fe *felix.FieldError
	if !errors.As(err, &fe) || fe.Field != "ipv4Nets[1]" {
		t.Errorf("first FieldError = %+v", fe)
	}
	// What parsed is kept, for render.
	if got := w.Nets[felix.IPv4]; len(got) != 2 || got[0] != netip.MustParsePrefix("10.65.0.7/24") || got[1] != netip.MustParsePrefix("10.65.0.8/32") {
		t.Errorf("IPv4 nets = %v", got)
	}
	if got := w.AllowSpoofed; len(got) != 2 || got[0] != netip.MustParsePrefix("8.0.0.0/8") || got[1] != netip.MustParsePrefix("fd00::/64") {
		t.Errorf("spoofed = %v", got)
	}
	// Without IPv6, the IPv6 fields are not read.
	ep.Mac = ""
	ep.Ipv4Nets = ep.Ipv4Nets[:1]
	if _, err := felix.ParseWorkload(ep, false); err != nil {
		t.Errorf("IPv6 off: %v", err)
	}
}

func TestParseHostEndpoint(t *testing.T) {
	h, err := felix.ParseHostEndpoint(&proto.HostEndpoint{
		Name:              "eth0",
		ExpectedIpv4Addrs: []string{"10.0.0.1", "::ffff:10.0.0.2", "fd00::1"},
		ExpectedIpv6Addrs: []string{"fd00::2"},
	})
	if err == nil || err.Error() != `expectedIpv4Addrs[2]: "fd00::1" is not an IPv4 address` {
		t.Errorf("error = %v", err)
	}
	if len(h.Expected[felix.IPv4]) != 2 || len(h.Expected[felix.IPv6]) != 1 {
		t.Errorf("expected = %v", h.Expected)
	}
}

package felix_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

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
			assert.Error(t, err, "ParseCIDR(%q) = %v", tc.in, host)
		} else if assert.NoError(t, err, "ParseCIDR(%q)", tc.in) {
			assert.Equal(t, netip.MustParsePrefix(tc.host), host, "ParseCIDR(%q)", tc.in)
		}
		net, err := felix.ParseNet(tc.in)
		if tc.net == "" {
			assert.Error(t, err, "ParseNet(%q) = %v", tc.in, net)
		} else if assert.NoError(t, err, "ParseNet(%q)", tc.in) {
			assert.Equal(t, netip.MustParsePrefix(tc.net), net, "ParseNet(%q)", tc.in)
		}
	}
}

func TestParseInFamily(t *testing.T) {
	_, err := felix.ParseCIDRIn(felix.IPv4, "::ffff:10.0.0.1")
	assert.NoError(t, err, "a mapped address is IPv4")
	_, err = felix.ParseCIDRIn(felix.IPv6, "::ffff:10.0.0.1")
	assert.EqualError(t, err, `"::ffff:10.0.0.1" is not an IPv6 CIDR or address`, "a mapped address in an IPv6 field")
	a, err := felix.ParseAddrIn(felix.IPv4, "::ffff:172.16.0.1")
	if assert.NoError(t, err) {
		assert.Equal(t, netip.MustParseAddr("172.16.0.1"), a, "ParseAddrIn(IPv4, mapped)")
	}
	_, err = felix.ParseAddrIn(felix.IPv4, "10.0.0.1/32")
	assert.Error(t, err, "ParseAddrIn takes a bare address only")
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
			assert.EqualError(t, err, tc.err, "ParseMember(%v, %q) = %v", tc.typ, tc.in, got)
			continue
		}
		if assert.NoError(t, err, "ParseMember(%v, %q)", tc.typ, tc.in) {
			assert.Equal(t, tc.want, got, "ParseMember(%v, %q)", tc.typ, tc.in)
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
		assert.Equal(t, f == nil, k == nil, "%q: felix says %v, nft says %v", n, f, k)
	}
	assert.EqualError(t, felix.CheckIfaceName(`cali"x`), `interface name "cali\"x" has character '"': nftables cannot match it`, "quote")
	err := felix.CheckIfaceName("calié")
	if assert.Error(t, err, "non-ASCII") {
		assert.Contains(t, err.Error(), `byte '\xc3'`)
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
	assert.EqualError(t, err, strings.Join(want, "\n"))
	var fe *felix.FieldError
	if assert.ErrorAs(t, err, &fe) {
		assert.Equal(t, "ipv4Nets[1]", fe.Field, "the first FieldError")
	}
	// What parsed is kept, for render.
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.65.0.7/24"), netip.MustParsePrefix("10.65.0.8/32")}, w.Nets[felix.IPv4])
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("8.0.0.0/8"), netip.MustParsePrefix("fd00::/64")}, w.AllowSpoofed)
	// Without IPv6, the IPv6 fields are not read.
	ep.Mac = ""
	ep.Ipv4Nets = ep.Ipv4Nets[:1]
	_, err = felix.ParseWorkload(ep, false)
	assert.NoError(t, err, "IPv6 off")
}

func TestParseHostEndpoint(t *testing.T) {
	h, err := felix.ParseHostEndpoint(&proto.HostEndpoint{
		Name:              "eth0",
		ExpectedIpv4Addrs: []string{"10.0.0.1", "::ffff:10.0.0.2", "fd00::1"},
		ExpectedIpv6Addrs: []string{"fd00::2"},
	})
	assert.EqualError(t, err, `expectedIpv4Addrs[2]: "fd00::1" is not an IPv4 address`)
	assert.Len(t, h.Expected[felix.IPv4], 2)
	assert.Len(t, h.Expected[felix.IPv6], 1)
}

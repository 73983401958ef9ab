package render

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/internal/testutil"
	"github.com/nftep/nftep/nft"
)

// Conventions of the cluster networking tests: the node is 192.168.60.11
// (fd00:60::11), pools 10.65.0.0/16 (natOutgoing) and fd00:65::/64, tunnel
// addresses 10.65.0.1 (IPIP), 10.65.0.2 (VXLAN) and fd00:65::2 (VXLAN v6).

// natCombination is one setting of every natOutgoing key.
type natCombination struct {
	addr, ports, exclusions, iface, random string
}

func (c natCombination) config(t *testing.T, ipv6 bool) Config {
	t.Helper()
	kv := map[string]string{KeyIpv6Support: fmt.Sprint(ipv6)}
	set := func(k, v string) {
		if v != "" {
			kv[k] = v
		}
	}
	set(KeyNATOutgoingAddress, c.addr)
	set(KeyNATPortRange, c.ports)
	set(KeyNATOutgoingExclusions, c.exclusions)
	set(KeyNATOutgoingInterfaceFilter, c.iface)
	set(KeyNATFullyRandom, c.random)
	cfg, err := ParseConfig(kv)
	require.NoError(t, err)
	return cfg
}

func (c natCombination) String() string {
	var parts []string
	for _, kv := range [][2]string{{KeyNATOutgoingAddress, c.addr}, {KeyNATPortRange, c.ports},
		{KeyNATOutgoingExclusions, c.exclusions}, {KeyNATOutgoingInterfaceFilter, c.iface}, {KeyNATFullyRandom, c.random}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	if len(parts) == 0 {
		return "defaults"
	}
	return strings.Join(parts, " ")
}

// natCombinations is every combination of the natOutgoing keys: address
// or not, port range or not, host exclusion or not, no interface filter, an
// exact one or a prefix, fully-random on (the default) or off.
func natCombinations() []natCombination {
	var out []natCombination
	for _, addr := range []string{"", "192.168.60.11"} {
		for _, ports := range []string{"", "32768:65535"} {
			for _, excl := range []string{"", NATExcludePoolsAndHost} {
				for _, iface := range []string{"", "eth0", "eth+"} {
					for _, random := range []string{"", "false"} {
						out = append(out, natCombination{addr, ports, excl, iface, random})
					}
				}
			}
		}
	}
	return out
}

// TestNATOutgoingGolden pins the natOutgoing chain for every combination of
// its keys, with a natOutgoing pool in both families.
func TestNATOutgoingGolden(t *testing.T) {
	var b strings.Builder
	for _, c := range natCombinations() {
		cfg := c.config(t, true)
		fmt.Fprintf(&b, "# %s\n%s\n", c, NATOutgoing(cfg, [2]bool{true, true}))
	}
	testutil.Golden(t, "testdata/nat-outgoing-combinations.nft", b.String())
}

// TestNATOutgoingRules checks what every combination must hold, whatever
// the golden says.
func TestNATOutgoingRules(t *testing.T) {
	for _, c := range natCombinations() {
		t.Run(c.String(), func(t *testing.T) {
			cfg := c.config(t, true)
			both := NATOutgoing(cfg, [2]bool{true, true})
			want := 2 // one rule per family
			if c.ports != "" {
				want = 10 // Felix's five per family
			}
			require.Len(t, both.Rules, want)
			for _, r := range both.Rules {
				s := r.String()
				assert.Contains(t, s, "saddr @masq-pools-v")
				assert.Contains(t, s, "daddr != @all-pools-v")
				assert.Equal(t, c.exclusions != "", strings.Contains(s, "daddr != @all-hosts-v"), s)
				switch c.iface {
				case "eth0":
					assert.Contains(t, s, `oifname "eth0"`)
				case "eth+":
					assert.Contains(t, s, `oifname "eth*"`, "a trailing + is nft's *")
				default:
					assert.NotContains(t, s, "oifname")
				}
				if strings.HasPrefix(s, "ip6 ") {
					assert.NotContains(t, s, "snat", "IPv6 always masquerades")
				}
				if _, ok := r.Action.(nft.Verdict); !ok {
					assert.Equal(t, c.random != "false", strings.Contains(s, "fully-random"), s)
					if c.addr != "" && strings.HasPrefix(s, "ip ") {
						assert.Contains(t, s, "snat ip to 192.168.60.11")
					}
				}
			}
			// No natOutgoing pool in a family: no rule of that family.
			assert.Empty(t, NATOutgoing(cfg, [2]bool{}).Rules)
			for _, r := range NATOutgoing(cfg, [2]bool{true, false}).Rules {
				assert.NotContains(t, r.String(), "ip6")
			}
			for _, r := range NATOutgoing(cfg, [2]bool{false, true}).Rules {
				assert.True(t, strings.HasPrefix(r.String(), "ip6 "), r.String())
			}
			// Ipv6Support=false: nothing for IPv6.
			off := NATOutgoing(c.config(t, false), [2]bool{true, true})
			for _, r := range off.Rules {
				assert.NotContains(t, r.String(), "ip6")
			}
		})
	}
}

func TestNATConfigErrors(t *testing.T) {
	for _, tc := range []struct{ key, val, want string }{
		{KeyNATOutgoingAddress, "fd00::1", `NATOutgoingAddress="fd00::1": must be an IPv4 address`},
		{KeyNATOutgoingAddress, "nope", `NATOutgoingAddress="nope": not an IP address`},
		{KeyNATPortRange, "65535:1", `NATPortRange="65535:1": want first:last`},
		{KeyNATPortRange, "80", `NATPortRange="80": want first:last`},
		{KeyNATOutgoingExclusions, "Hosts", `NATOutgoingExclusions`},
		{KeyNATOutgoingInterfaceFilter, "eth0 eth1", `IptablesNATOutgoingInterfaceFilter="eth0 eth1": not an interface name`},
		{KeyNATOutgoingInterfaceFilter, "averyveryverylongname", `not an interface name`},
		{KeyExternalNodesCIDRList, "10.0.0.0/8,bad", `ExternalNodesCIDRList: "bad" is not a CIDR`},
		{KeyIPv6VXLANTunnelAddr, "10.0.0.1", `IPv6VXLANTunnelAddr="10.0.0.1": not an IPv6 address`},
		{KeyNATFullyRandom, "maybe", `NftepNATFullyRandom`},
	} {
		_, err := ParseConfig(map[string]string{tc.key: tc.val})
		require.Error(t, err, "%s=%s", tc.key, tc.val)
		assert.Contains(t, err.Error(), tc.want)
	}
	cfg, err := ParseConfig(map[string]string{KeyNATPortRange: "32768-65535", KeyExternalNodesCIDRList: "10.0.0.0/8, fd00::/64"})
	require.NoError(t, err)
	assert.Equal(t, &nft.PortRange{First: 32768, Last: 65535}, cfg.NATPortRange)
	assert.Len(t, cfg.ExternalNodes, 2)
	assert.True(t, cfg.NATFullyRandom, "fully-random is on by default")
}

// TestTunnelGolden pins the encapsulation rules for each mode, with the
// node's tunnel addresses configured (the tunnel-source masquerade needs
// them) and with a custom VXLAN port whose masquerade range is the lower
// one.
func TestTunnelGolden(t *testing.T) {
	var b strings.Builder
	for _, tc := range []struct {
		name string
		e    Encap
		kv   map[string]string
	}{
		{"no encapsulation", Encap{}, nil},
		{"IPIP", Encap{IPIP: true}, nil},
		{"VXLAN", Encap{VXLAN: true}, nil},
		{"VXLAN IPv6", Encap{VXLANV6: true}, nil},
		{"VXLAN both families", Encap{VXLAN: true, VXLANV6: true}, nil},
		{"IPIP and VXLAN, port 60000, reject", Encap{IPIP: true, VXLAN: true}, map[string]string{KeyVXLANPort: "60000", KeyNftablesFilterDenyAction: "REJECT"}},
		{"VXLAN both families, Ipv6Support=false", Encap{VXLAN: true, VXLANV6: true}, map[string]string{KeyIpv6Support: "false"}},
		{"VXLAN without tunnel addresses", Encap{VXLAN: true}, map[string]string{KeyIPv4VXLANTunnelAddr: "", KeyIpInIpTunnelAddr: ""}},
	} {
		kv := map[string]string{KeyIpInIpTunnelAddr: "10.65.0.1", KeyIPv4VXLANTunnelAddr: "10.65.0.2", KeyIPv6VXLANTunnelAddr: "fd00:65::2"}
		for k, v := range tc.kv {
			kv[k] = v
		}
		cfg, err := ParseConfig(kv)
		require.NoError(t, err)
		fmt.Fprintf(&b, "# %s\n", tc.name)
		for _, c := range Tunnel(cfg, tc.e) {
			b.WriteString(c.String())
		}
		b.WriteString("\n")
	}
	testutil.Golden(t, "testdata/tunnel-rules.nft", b.String())
}

func TestMasqPortRangeExcluding(t *testing.T) {
	for _, tc := range []struct {
		port      uint16
		lo, hi    uint16
		wantRange bool
	}{
		{4789, 4790, 65535, true},
		{33000, 33001, 65535, true},
		{60000, 1024, 59999, true},
		{65535, 1024, 65534, true},
		{100, 101, 65535, true},
	} {
		r, ok := masqPortRangeExcluding(tc.port)
		require.Equal(t, tc.wantRange, ok, "port %d", tc.port)
		assert.Equal(t, nft.PortRange{First: tc.lo, Last: tc.hi}, r, "port %d", tc.port)
	}
}

func TestPrefixElements(t *testing.T) {
	p := netip.MustParsePrefix
	got := PrefixElements([]netip.Prefix{p("10.0.0.5/32"), p("10.0.0.0/8"), p("192.168.60.11/32"), p("192.168.60.11/32"), p("10.65.1.7/16")})
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	assert.ElementsMatch(t, []string{"10.0.0.0/8", "192.168.60.11"}, keys)
}

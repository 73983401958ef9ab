package render

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nftep/nftep/nft"
)

// staticModel is the inet table with no endpoints: Static alone.
func staticModel(cfg Config) *nft.Model {
	m := nft.NewModel(nft.FamilyINet, cfg.TableName)
	chains, sets := Static(cfg)
	for _, s := range sets {
		m.SetSet(s)
	}
	for _, c := range chains {
		m.SetChain(c)
	}
	return m
}

// TestStaticGolden pins the whole table of a node without endpoints
// (acceptance case 1 in docs/acceptance-cases.md): base chains and wiring,
// dispatch chains with their defaults, empty maps and sets, failsafe and
// workload-to-host chains.
func TestStaticGolden(t *testing.T) {
	cfg := DefaultConfig()
	got := staticModel(cfg).String() + buildARPModel(cfg).String()
	if printGoldens != "" {
		if err := os.WriteFile(printGoldens+".static", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	assertGolden(t, getLine(), staticWant, got)
}

const staticWant = `
	table inet nftep {
		map filter-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
		}

		map filter-from-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
		}

		map filter-from-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
		}

		map filter-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
		}

		map filter-to-hep-fwd {
			type ifname : verdict
			comment "interface → endpoint chain"
		}

		map filter-to-wl {
			type ifname : verdict
			comment "interface → endpoint chain"
		}

		map mangle-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
		}

		map mangle-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
		}

		map raw-from-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
		}

		set raw-rpf-skip-v4 {
			type ifname . ipv4_addr
			flags interval
			comment "workload interface . allowed spoofed IPv4 source"
		}

		set raw-rpf-skip-v6 {
			type ifname . ipv6_addr
			flags interval
			comment "workload interface . allowed spoofed IPv6 source"
		}

		map raw-to-hep {
			type ifname : verdict
			comment "interface → endpoint chain"
		}

		chain filter-forward {
			type filter hook forward priority filter; policy accept;
			jump filter-ep-forward comment "Workload and host endpoint policy"
			meta mark & 0x00010000 == 0x00010000 accept comment "Policy explicitly accepted packet"
			meta mark set meta mark | 0x00010000 comment "Tell mangle postrouting the packet was forwarded"
		}

		chain filter-input {
			type filter hook input priority filter; policy accept;
			jump filter-ep-input comment "Workload and host endpoint policy"
		}

		chain filter-output {
			type filter hook output priority filter; policy accept;
			jump filter-ep-output comment "Workload and host endpoint policy"
		}

		chain mangle-postrouting {
			type filter hook postrouting priority mangle; policy accept;
			jump mangle-ep-postrouting comment "Workload and host endpoint policy"
		}

		chain mangle-prerouting {
			type filter hook prerouting priority mangle; policy accept;
			jump mangle-ep-prerouting comment "Workload and host endpoint policy"
		}

		chain raw-output {
			type filter hook output priority raw; policy accept;
			jump raw-ep-output comment "Workload and host endpoint policy"
		}

		chain raw-prerouting {
			type filter hook prerouting priority raw; policy accept;
			jump raw-ep-prerouting comment "Workload and host endpoint policy"
		}

		chain filter-ep-forward {
			iifname "cali*" iifname != @filter-from-wl drop comment "Unknown workload interface"
			oifname "cali*" oifname != @filter-to-wl drop comment "Unknown workload interface"
			meta mark set meta mark & 0xffe5ffff comment "Clear nftep marks except accept"
			meta mark & 0x00010000 == 0x00000000 jump filter-from-hep-fwd-dispatch comment "Host endpoint forward ingress policy"
			iifname "cali*" jump filter-from-wl-dispatch comment "From workload"
			oifname "cali*" jump filter-to-wl-dispatch comment "To workload"
			jump filter-to-hep-fwd-dispatch comment "Host endpoint forward egress policy"
		}

		chain filter-ep-input {
			iifname "cali*" goto filter-wl-to-host comment "From workload to host"
			meta mark & 0x00010000 == 0x00010000 accept comment "Untracked or pre-DNAT policy accepted packet"
			meta mark set meta mark & 0xffe4ffff comment "Clear nftep marks"
			jump filter-from-hep-dispatch comment "Host endpoint ingress policy"
			meta mark & 0x00010000 == 0x00010000 accept comment "Host endpoint policy accepted packet"
		}

		chain filter-ep-output {
			meta mark & 0x00010000 == 0x00010000 accept comment "Untracked policy accepted packet"
			oifname "cali*" return comment "Host to local workload is not policed here"
			meta mark set meta mark & 0xffe4ffff comment "Clear nftep marks"
			ct status ! dnat jump filter-to-hep-dispatch comment "Host endpoint egress policy"
			meta mark & 0x00010000 == 0x00010000 accept comment "Host endpoint policy accepted packet"
		}

		chain filter-failsafe-in {
			tcp dport 22 accept comment "Failsafe inbound tcp:22"
			udp dport 68 accept comment "Failsafe inbound udp:68"
			tcp dport 179 accept comment "Failsafe inbound tcp:179"
			tcp dport 2379 accept comment "Failsafe inbound tcp:2379"
			tcp dport 2380 accept comment "Failsafe inbound tcp:2380"
			tcp dport 5473 accept comment "Failsafe inbound tcp:5473"
			tcp dport 6443 accept comment "Failsafe inbound tcp:6443"
			tcp dport 6666 accept comment "Failsafe inbound tcp:6666"
			tcp dport 6667 accept comment "Failsafe inbound tcp:6667"
		}

		chain filter-failsafe-out {
			udp dport 53 accept comment "Failsafe outbound udp:53"
			udp dport 67 accept comment "Failsafe outbound udp:67"
			tcp dport 179 accept comment "Failsafe outbound tcp:179"
			tcp dport 2379 accept comment "Failsafe outbound tcp:2379"
			tcp dport 2380 accept comment "Failsafe outbound tcp:2380"
			tcp dport 5473 accept comment "Failsafe outbound tcp:5473"
			tcp dport 6443 accept comment "Failsafe outbound tcp:6443"
			tcp dport 6666 accept comment "Failsafe outbound tcp:6666"
			tcp dport 6667 accept comment "Failsafe outbound tcp:6667"
		}

		chain filter-from-hep-dispatch {
			iifname vmap @filter-from-hep comment "Dispatch to endpoint chain by interface"
		}

		chain filter-from-hep-fwd-dispatch {
			iifname vmap @filter-from-hep-fwd comment "Dispatch to endpoint chain by interface"
		}

		chain filter-from-wl-dispatch {
			iifname vmap @filter-from-wl comment "Dispatch to endpoint chain by interface"
			drop comment "Unknown interface"
		}

		chain filter-to-hep-dispatch {
			oifname vmap @filter-to-hep comment "Dispatch to endpoint chain by interface"
		}

		chain filter-to-hep-fwd-dispatch {
			oifname vmap @filter-to-hep-fwd comment "Dispatch to endpoint chain by interface"
		}

		chain filter-to-wl-dispatch {
			oifname vmap @filter-to-wl comment "Dispatch to endpoint chain by interface"
			drop comment "Unknown interface"
		}

		chain filter-wl-to-host {
			meta nfproto ipv6 icmpv6 type mld-listener-query accept comment "Allow IPv6 neighbour discovery and MLD to the host"
			meta nfproto ipv6 icmpv6 type mld-listener-report accept comment "Allow IPv6 neighbour discovery and MLD to the host"
			meta nfproto ipv6 icmpv6 type mld-listener-done accept comment "Allow IPv6 neighbour discovery and MLD to the host"
			meta nfproto ipv6 icmpv6 type nd-router-solicit accept comment "Allow IPv6 neighbour discovery and MLD to the host"
			meta nfproto ipv6 icmpv6 type nd-neighbor-solicit accept comment "Allow IPv6 neighbour discovery and MLD to the host"
			meta nfproto ipv6 icmpv6 type nd-neighbor-advert accept comment "Allow IPv6 neighbour discovery and MLD to the host"
			jump filter-from-wl-dispatch comment "Workload egress policy"
			drop comment "Configured DefaultEndpointToHostAction"
		}

		chain mangle-ep-postrouting {
			meta mark & 0x00010000 == 0x00010000 return comment "Forwarded or already accepted"
			meta mark set meta mark & 0xffe4ffff comment "Clear nftep marks"
			ct status dnat jump mangle-to-hep-dispatch comment "Host endpoint egress policy for DNAT'd traffic"
			meta mark & 0x00010000 == 0x00010000 return comment "Host endpoint policy accepted packet"
		}

		chain mangle-ep-prerouting {
			ct state established,related accept comment "Allow established and related"
			meta mark & 0x00010000 == 0x00010000 accept comment "Untracked policy accepted packet"
			jump mangle-from-hep-dispatch comment "Pre-DNAT host endpoint policy"
			meta mark & 0x00010000 == 0x00010000 accept comment "Pre-DNAT policy accepted packet"
		}

		chain mangle-failsafe-in {
			tcp dport 22 accept comment "Failsafe inbound tcp:22"
			udp dport 68 accept comment "Failsafe inbound udp:68"
			tcp dport 179 accept comment "Failsafe inbound tcp:179"
			tcp dport 2379 accept comment "Failsafe inbound tcp:2379"
			tcp dport 2380 accept comment "Failsafe inbound tcp:2380"
			tcp dport 5473 accept comment "Failsafe inbound tcp:5473"
			tcp dport 6443 accept comment "Failsafe inbound tcp:6443"
			tcp dport 6666 accept comment "Failsafe inbound tcp:6666"
			tcp dport 6667 accept comment "Failsafe inbound tcp:6667"
			udp sport 53 accept comment "Failsafe outbound reply udp:53"
			udp sport 67 accept comment "Failsafe outbound reply udp:67"
			tcp sport 179 accept comment "Failsafe outbound reply tcp:179"
			tcp sport 2379 accept comment "Failsafe outbound reply tcp:2379"
			tcp sport 2380 accept comment "Failsafe outbound reply tcp:2380"
			tcp sport 5473 accept comment "Failsafe outbound reply tcp:5473"
			tcp sport 6443 accept comment "Failsafe outbound reply tcp:6443"
			tcp sport 6666 accept comment "Failsafe outbound reply tcp:6666"
			tcp sport 6667 accept comment "Failsafe outbound reply tcp:6667"
		}

		chain mangle-failsafe-out {
			udp dport 53 accept comment "Failsafe outbound udp:53"
			udp dport 67 accept comment "Failsafe outbound udp:67"
			tcp dport 179 accept comment "Failsafe outbound tcp:179"
			tcp dport 2379 accept comment "Failsafe outbound tcp:2379"
			tcp dport 2380 accept comment "Failsafe outbound tcp:2380"
			tcp dport 5473 accept comment "Failsafe outbound tcp:5473"
			tcp dport 6443 accept comment "Failsafe outbound tcp:6443"
			tcp dport 6666 accept comment "Failsafe outbound tcp:6666"
			tcp dport 6667 accept comment "Failsafe outbound tcp:6667"
			tcp sport 22 accept comment "Failsafe inbound reply tcp:22"
			udp sport 68 accept comment "Failsafe inbound reply udp:68"
			tcp sport 179 accept comment "Failsafe inbound reply tcp:179"
			tcp sport 2379 accept comment "Failsafe inbound reply tcp:2379"
			tcp sport 2380 accept comment "Failsafe inbound reply tcp:2380"
			tcp sport 5473 accept comment "Failsafe inbound reply tcp:5473"
			tcp sport 6443 accept comment "Failsafe inbound reply tcp:6443"
			tcp sport 6666 accept comment "Failsafe inbound reply tcp:6666"
			tcp sport 6667 accept comment "Failsafe inbound reply tcp:6667"
		}

		chain mangle-from-hep-dispatch {
			iifname vmap @mangle-from-hep comment "Dispatch to endpoint chain by interface"
		}

		chain mangle-to-hep-dispatch {
			oifname vmap @mangle-to-hep comment "Dispatch to endpoint chain by interface"
		}

		chain raw-ep-output {
			meta mark set meta mark & 0xffe4ffff comment "Clear nftep marks"
			jump raw-to-hep-dispatch comment "Untracked host endpoint policy"
			meta mark & 0x00010000 == 0x00010000 accept comment "Untracked policy accepted packet"
		}

		chain raw-ep-prerouting {
			meta mark set meta mark & 0xffe4ffff comment "Clear nftep marks"
			iifname "cali*" meta mark set meta mark | 0x00080000 comment "Mark packets from workloads"
			meta mark & 0x00080000 == 0x00080000 iifname . ip saddr @raw-rpf-skip-v4 accept comment "Allowed spoofed IPv4 source"
			meta mark & 0x00080000 == 0x00080000 iifname . ip6 saddr @raw-rpf-skip-v6 accept comment "Allowed spoofed IPv6 source"
			meta mark & 0x00080000 == 0x00080000 fib saddr . mark . iif oif 0 drop comment "Drop packets from workloads that fail the strict RPF check"
			meta mark & 0x00080000 == 0x00000000 jump raw-from-hep-dispatch comment "Untracked host endpoint policy"
			meta mark & 0x00010000 == 0x00010000 accept comment "Untracked policy accepted packet"
		}

		chain raw-failsafe-in {
			tcp dport 22 accept comment "Failsafe inbound tcp:22"
			udp dport 68 accept comment "Failsafe inbound udp:68"
			tcp dport 179 accept comment "Failsafe inbound tcp:179"
			tcp dport 2379 accept comment "Failsafe inbound tcp:2379"
			tcp dport 2380 accept comment "Failsafe inbound tcp:2380"
			tcp dport 5473 accept comment "Failsafe inbound tcp:5473"
			tcp dport 6443 accept comment "Failsafe inbound tcp:6443"
			tcp dport 6666 accept comment "Failsafe inbound tcp:6666"
			tcp dport 6667 accept comment "Failsafe inbound tcp:6667"
			udp sport 53 accept comment "Failsafe outbound reply udp:53"
			udp sport 67 accept comment "Failsafe outbound reply udp:67"
			tcp sport 179 accept comment "Failsafe outbound reply tcp:179"
			tcp sport 2379 accept comment "Failsafe outbound reply tcp:2379"
			tcp sport 2380 accept comment "Failsafe outbound reply tcp:2380"
			tcp sport 5473 accept comment "Failsafe outbound reply tcp:5473"
			tcp sport 6443 accept comment "Failsafe outbound reply tcp:6443"
			tcp sport 6666 accept comment "Failsafe outbound reply tcp:6666"
			tcp sport 6667 accept comment "Failsafe outbound reply tcp:6667"
		}

		chain raw-failsafe-out {
			udp dport 53 accept comment "Failsafe outbound udp:53"
			udp dport 67 accept comment "Failsafe outbound udp:67"
			tcp dport 179 accept comment "Failsafe outbound tcp:179"
			tcp dport 2379 accept comment "Failsafe outbound tcp:2379"
			tcp dport 2380 accept comment "Failsafe outbound tcp:2380"
			tcp dport 5473 accept comment "Failsafe outbound tcp:5473"
			tcp dport 6443 accept comment "Failsafe outbound tcp:6443"
			tcp dport 6666 accept comment "Failsafe outbound tcp:6666"
			tcp dport 6667 accept comment "Failsafe outbound tcp:6667"
			tcp sport 22 accept comment "Failsafe inbound reply tcp:22"
			udp sport 68 accept comment "Failsafe inbound reply udp:68"
			tcp sport 179 accept comment "Failsafe inbound reply tcp:179"
			tcp sport 2379 accept comment "Failsafe inbound reply tcp:2379"
			tcp sport 2380 accept comment "Failsafe inbound reply tcp:2380"
			tcp sport 5473 accept comment "Failsafe inbound reply tcp:5473"
			tcp sport 6443 accept comment "Failsafe inbound reply tcp:6443"
			tcp sport 6666 accept comment "Failsafe inbound reply tcp:6666"
			tcp sport 6667 accept comment "Failsafe inbound reply tcp:6667"
		}

		chain raw-from-hep-dispatch {
			iifname vmap @raw-from-hep comment "Dispatch to endpoint chain by interface"
		}

		chain raw-to-hep-dispatch {
			oifname vmap @raw-to-hep comment "Dispatch to endpoint chain by interface"
		}
	}
	table arp nftep {
		map filter-arp {
			type ifname : verdict
			comment "workload interface → ARP suppression chain"
		}

		chain filter-output {
			type filter hook output priority filter; policy accept;
			jump filter-arp-dispatch comment "ARP reply suppression"
		}

		chain filter-arp-dispatch {
			oifname vmap @filter-arp comment "Dispatch to endpoint chain by interface"
		}
	}
`

// TestStaticGoldenIPv6Off pins the table of a node without endpoints when
// Ipv6Support is false as the lines it loses against staticWant: the
// IPv6 RPF-skip set, the rule that looks it up, and the ICMPv6 neighbour
// discovery and MLD allowances. Nothing else changes, and nothing is added.
func TestStaticGoldenIPv6Off(t *testing.T) {
	cfg := DefaultConfig()
	cfg.IPv6 = false
	off := strings.Split(staticModel(cfg).String()+buildARPModel(cfg).String(), "\n")
	on := strings.Split(dedent(staticWant), "\n")
	// off must be on with some lines removed: walk on, matching off in
	// order, and collect what is left over.
	var removed []string
	j := 0
	for _, l := range on {
		if j < len(off) && l == off[j] {
			j++
			continue
		}
		removed = append(removed, strings.TrimLeft(l, "\t"))
	}
	if j != len(off) {
		t.Fatalf("IPv6 off changed or added lines; first unmatched: %q", off[j])
	}
	want := []string{
		"set raw-rpf-skip-v6 {",
		"type ifname . ipv6_addr",
		"flags interval",
		`comment "workload interface . allowed spoofed IPv6 source"`,
		"}",
		"",
		`meta nfproto ipv6 icmpv6 type mld-listener-query accept comment "Allow IPv6 neighbour discovery and MLD to the host"`,
		`meta nfproto ipv6 icmpv6 type mld-listener-report accept comment "Allow IPv6 neighbour discovery and MLD to the host"`,
		`meta nfproto ipv6 icmpv6 type mld-listener-done accept comment "Allow IPv6 neighbour discovery and MLD to the host"`,
		`meta nfproto ipv6 icmpv6 type nd-router-solicit accept comment "Allow IPv6 neighbour discovery and MLD to the host"`,
		`meta nfproto ipv6 icmpv6 type nd-neighbor-solicit accept comment "Allow IPv6 neighbour discovery and MLD to the host"`,
		`meta nfproto ipv6 icmpv6 type nd-neighbor-advert accept comment "Allow IPv6 neighbour discovery and MLD to the host"`,
		`meta mark & 0x00080000 == 0x00080000 iifname . ip6 saddr @raw-rpf-skip-v6 accept comment "Allowed spoofed IPv6 source"`,
	}
	if d := cmp.Diff(want, removed); d != "" {
		t.Errorf("lines IPv6 off removes (-want +got):\n%s", d)
	}
	for _, l := range off {
		if s := strings.ToLower(l); strings.Contains(s, "ip6") || strings.Contains(s, "ipv6") || strings.Contains(s, "-v6") {
			t.Errorf("IPv6 off: the static table still has %q", strings.TrimSpace(l))
		}
	}
}

package render

import (
	"testing"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// flowScenario is the node the packet-flow tests run on (see the
// conventions in model_test.go):
//
//	cali1  10.65.0.1  pod-1  policy allow-all in and out
//	cali2  10.65.0.2  pod-2  no policies, no profiles (denies all new traffic)
//	cali3  10.65.0.3  pod-3  admin down
//	cali4  10.65.0.4  pod-4  allow-all, may send from 8.8.8.8/32
//	cali5  10.65.0.5  pod-5  tier1 passes, tier2 allows (ingress)
//	cali6  10.65.0.6  pod-6  tier "pass" (default Pass) has a no-match policy; profile allows
//	eth0   host endpoint hep-eth0: no normal policy (deny but failsafe),
//	       pre-DNAT policy allowing tcp 80, untracked policy allowing tcp 8080
//	eth1   no host endpoint
func flowScenario(t testing.TB, cfg Config) *nft.Model {
	t.Helper()
	allowAll := tier("default", pols(gnp("allow-all")), pols(gnp("allow-all")))
	behaviours := map[string]policyBehaviour{
		"filter-pi-default.allow-all": allowPolicy,
		"filter-po-default.allow-all": allowPolicy,
		"filter-pi-tier1.pass-all":    passPolicy,
		"filter-pi-tier2.allow-all":   allowPolicy,
		"filter-pri-kns.allowing":     allowPolicy,
		"filter-pro-kns.allowing":     allowPolicy,
		"mangle-pi-default.prednat":   allowTCP80,
		"raw-pi-default.untracked":    allowTCP8080,
		"raw-po-default.untracked":    allowTCP8080,
	}
	down := wep("cali3", "10.65.0.3", allowAll)
	down.State = "inactive"
	spoof := wep("cali4", "10.65.0.4", allowAll)
	spoof.AllowSpoofedSourcePrefixes = []string{"8.8.8.8/32"}
	passTier := tier("pass", pols(gnp("nothing")), nil)
	passTier.DefaultAction = "Pass"
	six := wep("cali6", "10.65.0.6", passTier)
	six.ProfileIds = []string{"kns.allowing"}

	outs := []Output{
		Workload(cfg, WorkloadInput{ID: wlID("default", "pod-1"), Endpoint: wep("cali1", "10.65.0.1", allowAll)}),
		Workload(cfg, WorkloadInput{ID: wlID("default", "pod-2"), Endpoint: wep("cali2", "10.65.0.2")}),
		Workload(cfg, WorkloadInput{ID: wlID("default", "pod-3"), Endpoint: down}),
		Workload(cfg, WorkloadInput{ID: wlID("default", "pod-4"), Endpoint: spoof}),
		Workload(cfg, WorkloadInput{ID: wlID("default", "pod-5"), Endpoint: wep("cali5", "10.65.0.5",
			tier("tier1", pols(gnp("pass-all")), nil), tier("tier2", pols(gnp("allow-all")), nil))}),
		Workload(cfg, WorkloadInput{ID: wlID("default", "pod-6"), Endpoint: six}),
		Host(cfg, HostInput{ID: "hep-eth0", Interface: "eth0", Endpoint: &proto.HostEndpoint{
			Name:           "eth0",
			PreDnatTiers:   []*proto.TierInfo{tier("default", pols(gnp("prednat")), nil)},
			UntrackedTiers: []*proto.TierInfo{tier("default", pols(gnp("untracked")), pols(gnp("untracked")))},
		}}),
	}
	return buildModel(t, cfg, behaviours, outs...)
}

// flowTests are the packet-flow cases; the kernel test replays the ones with
// a real-packet equivalent.
var flowTests = []struct {
	name string
	p    packet
	want string
}{
	// Unknown workload interfaces fail closed, both directions and to the host.
	{"unknown cali from", packet{path: pathForward, iif: "cali9", oif: "eth1", src: "10.65.0.9", dst: "192.0.2.1", proto: protoTCP, dport: 80}, "drop"},
	{"unknown cali to", packet{path: pathForward, iif: "eth1", oif: "cali9", src: "192.0.2.1", dst: "10.65.0.9", proto: protoTCP, dport: 80}, "drop"},
	{"unknown cali to host", packet{path: pathInput, iif: "cali9", src: "10.65.0.9", dst: "10.0.240.10", proto: protoTCP, dport: 80}, "drop"},
	// Workload policy.
	{"allowed pod to pod", packet{path: pathForward, iif: "cali1", oif: "cali4", src: "10.65.0.1", dst: "10.65.0.4", proto: protoTCP, dport: 80}, "accept"},
	{"allow egress, no ingress policy", packet{path: pathForward, iif: "cali1", oif: "cali2", src: "10.65.0.1", dst: "10.65.0.2", proto: protoTCP, dport: 80}, "drop"},
	{"no egress policy", packet{path: pathForward, iif: "cali2", oif: "cali1", src: "10.65.0.2", dst: "10.65.0.1", proto: protoTCP, dport: 80}, "drop"},
	{"established bypasses policy", packet{path: pathForward, iif: "cali2", oif: "cali1", src: "10.65.0.2", dst: "10.65.0.1", proto: protoTCP, sport: 80, ct: nft.CtStateEstablished}, "accept"},
	{"invalid dropped despite allow", packet{path: pathForward, iif: "cali1", oif: "cali4", src: "10.65.0.1", dst: "10.65.0.4", proto: protoTCP, dport: 80, ct: nft.CtStateInvalid}, "drop"},
	{"outside to allowed pod", packet{path: pathForward, iif: "eth1", oif: "cali1", src: "192.0.2.1", dst: "10.65.0.1", proto: protoTCP, dport: 80}, "accept"},
	{"vxlan from workload", packet{path: pathForward, iif: "cali1", oif: "eth1", src: "10.65.0.1", dst: "192.0.2.1", proto: protoUDP, dport: 4789}, "drop"},
	{"ipip from workload", packet{path: pathForward, iif: "cali1", oif: "eth1", src: "10.65.0.1", dst: "192.0.2.1", proto: protoIPIP}, "drop"},
	{"pass to next tier", packet{path: pathForward, iif: "eth1", oif: "cali5", src: "192.0.2.1", dst: "10.65.0.5", proto: protoTCP, dport: 80}, "accept"},
	{"tier default pass falls to profile", packet{path: pathForward, iif: "eth1", oif: "cali6", src: "192.0.2.1", dst: "10.65.0.6", proto: protoTCP, dport: 80}, "accept"},
	// Admin down.
	{"admin down ingress", packet{path: pathForward, iif: "eth1", oif: "cali3", src: "192.0.2.1", dst: "10.65.0.3", proto: protoTCP, dport: 80}, "drop"},
	{"admin down egress", packet{path: pathForward, iif: "cali3", oif: "eth1", src: "10.65.0.3", dst: "192.0.2.1", proto: protoTCP, dport: 80}, "drop"},
	// RPF and spoofing.
	{"spoofed source dropped", packet{path: pathForward, iif: "cali1", oif: "eth1", src: "8.8.8.8", dst: "192.0.2.1", proto: protoTCP, dport: 80, rpfFail: true}, "drop"},
	{"allowed spoofed source", packet{path: pathForward, iif: "cali4", oif: "eth1", src: "8.8.8.8", dst: "192.0.2.1", proto: protoTCP, dport: 80, rpfFail: true}, "accept"},
	{"spoof allowance is per interface", packet{path: pathForward, iif: "cali4", oif: "eth1", src: "8.8.4.4", dst: "192.0.2.1", proto: protoTCP, dport: 80, rpfFail: true}, "drop"},
	// Host: workload to host is dropped by DefaultEndpointToHostAction, host
	// to workload is not policed.
	{"workload to host", packet{path: pathInput, iif: "cali1", src: "10.65.0.1", dst: "10.0.240.10", proto: protoTCP, dport: 80}, "drop"},
	{"workload neighbour discovery to host", packet{path: pathInput, iif: "cali1", src: "fd00:65::1", dst: "fe80::1", proto: protoICMPv6, icmpType: 135}, "accept"},
	{"host to workload", packet{path: pathOutput, oif: "cali2", src: "10.0.240.10", dst: "10.65.0.2", proto: protoTCP, dport: 80}, "accept"},
	// Host endpoints: failsafe, normal deny, pre-DNAT and untracked accepts
	// that filter must honour.
	{"failsafe ssh in", packet{path: pathInput, iif: "eth0", src: "192.0.2.1", dst: "10.0.240.10", proto: protoTCP, dport: 22}, "accept"},
	{"host endpoint without policy", packet{path: pathInput, iif: "eth0", src: "192.0.2.1", dst: "10.0.240.10", proto: protoTCP, dport: 81}, "drop"},
	{"pre-DNAT accepted, filter honours it", packet{path: pathInput, iif: "eth0", src: "192.0.2.1", dst: "10.0.240.10", proto: protoTCP, dport: 80}, "accept"},
	{"untracked accepted, filter honours it", packet{path: pathInput, iif: "eth0", src: "192.0.2.1", dst: "10.0.240.10", proto: protoTCP, dport: 8080}, "accept"},
	{"untracked egress accepted", packet{path: pathOutput, oif: "eth0", src: "10.0.240.10", dst: "192.0.2.1", proto: protoTCP, dport: 8080}, "accept"},
	{"host egress without policy", packet{path: pathOutput, oif: "eth0", src: "10.0.240.10", dst: "192.0.2.1", proto: protoTCP, dport: 81}, "drop"},
	{"forwarded through host endpoint, no forward tiers", packet{path: pathForward, iif: "eth0", oif: "eth1", src: "192.0.2.1", dst: "198.51.100.1", proto: protoTCP, dport: 81}, "accept"},
	{"no host endpoint on eth1", packet{path: pathInput, iif: "eth1", src: "192.0.2.1", dst: "10.0.240.10", proto: protoTCP, dport: 81}, "accept"},
	{"host egress failsafe dns", packet{path: pathOutput, oif: "eth0", src: "10.0.240.10", dst: "192.0.2.53", proto: protoUDP, dport: 53}, "accept"},
}

// TestPacketFlows runs flowTests through the tracer.
func TestPacketFlows(t *testing.T) {
	cfg := DefaultConfig()
	m := flowScenario(t, cfg)
	for _, tc := range flowTests {
		t.Run(tc.name, func(t *testing.T) {
			got := tracePacket(t, m, tc.p)
			if got.verdict != tc.want {
				t.Errorf("%s: got %s; want %s", tc.name, got, tc.want)
			}
		})
	}
}

// TestUnknownWorkloadEstablishedFailsClosed: host forward policy runs
// before workload dispatch, and a host endpoint's forward chains accept
// established flows outright, so without the unknown-workload drop at the
// top of filter-ep-forward an established flow of a removed (or rejected)
// workload would survive through a `*` endpoint or a named one.
func TestUnknownWorkloadEstablishedFailsClosed(t *testing.T) {
	for _, deny := range []string{ActionDrop, ActionReject} {
		t.Run(deny, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.FilterDenyAction = deny
			m := flowScenario(t, cfg)
			star := &proto.HostEndpoint{Name: "*"}
			for _, c := range Host(cfg, HostInput{ID: "hep-star", Interface: AnyInterface, Endpoint: star}).Chains {
				m.SetChain(c)
			}
			for _, c := range HostDispatch(cfg, star) {
				m.SetChain(c)
			}
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			want := "drop"
			if deny == ActionReject {
				want = "reject"
			}
			est := nft.CtStateEstablished
			for _, tc := range []struct {
				name string
				p    packet
				want string
			}{
				{"from unknown cali through *", packet{path: pathForward, iif: "cali9", oif: "eth1", src: "10.65.0.9", dst: "192.0.2.1", proto: protoTCP, sport: 80, ct: est}, want},
				{"to unknown cali through *", packet{path: pathForward, iif: "eth1", oif: "cali9", src: "192.0.2.1", dst: "10.65.0.9", proto: protoTCP, sport: 80, ct: est}, want},
				{"to unknown cali through a named host endpoint", packet{path: pathForward, iif: "eth0", oif: "cali9", src: "192.0.2.1", dst: "10.65.0.9", proto: protoTCP, sport: 80, ct: est}, want},
				{"unknown cali to unknown cali", packet{path: pathForward, iif: "cali9", oif: "cali8", src: "10.65.0.9", dst: "10.65.0.8", proto: protoTCP, sport: 80, ct: est}, want},
				{"from known cali, established", packet{path: pathForward, iif: "cali2", oif: "eth1", src: "10.65.0.2", dst: "192.0.2.1", proto: protoTCP, sport: 80, ct: est}, "accept"},
				{"to known cali, established", packet{path: pathForward, iif: "eth1", oif: "cali2", src: "192.0.2.1", dst: "10.65.0.2", proto: protoTCP, sport: 80, ct: est}, "accept"},
				{"admin-down cali is known: its chain denies", packet{path: pathForward, iif: "eth1", oif: "cali3", src: "192.0.2.1", dst: "10.65.0.3", proto: protoTCP, dport: 80}, want},
				{"known cali to known cali, new", packet{path: pathForward, iif: "cali1", oif: "cali4", src: "10.65.0.1", dst: "10.65.0.4", proto: protoTCP, dport: 80}, "accept"},
				{"host to host interface, established", packet{path: pathForward, iif: "eth1", oif: "eth0", src: "192.0.2.1", dst: "198.51.100.1", proto: protoTCP, sport: 80, ct: est}, "accept"},
			} {
				if got := tracePacket(t, m, tc.p); got.verdict != tc.want {
					t.Errorf("%s: got %s; want %s", tc.name, got, tc.want)
				}
			}
		})
	}
}

// TestIPv6OffPacketFlows traces IPv6 packets through packetScenario with
// Ipv6Support on and off. Off, what was there only for IPv6 is gone, so
// neighbour discovery from a pod to the host meets the pod's egress policy
// and DefaultEndpointToHostAction (drop), and an allowed spoofed IPv6
// source fails the RPF check; a family-agnostic allow still admits IPv6,
// and IPv4 is unchanged.
func TestIPv6OffPacketFlows(t *testing.T) {
	nd := packet{path: pathInput, iif: "cali1", src: podAddr6(1), dst: podGw6(1), proto: protoICMPv6, icmpType: 135}
	spoof6 := packet{path: pathForward, iif: "cali4", oif: "eth0", src: spoofAllowed6, dst: extAddr6, proto: protoUDP, dport: 9999, rpfFail: true}
	spoof4 := packet{path: pathForward, iif: "cali4", oif: "eth0", src: "8.8.8.8", dst: extAddr, proto: protoUDP, dport: 9999, rpfFail: true}
	allowAll6 := packet{path: pathForward, iif: "cali1", oif: "eth0", src: podAddr6(1), dst: extAddr6, proto: protoTCP, dport: 80}
	noPolicy6 := packet{path: pathForward, iif: "eth0", oif: "cali2", src: extAddr6, dst: podAddr6(2), proto: protoTCP, dport: 80}
	for _, tc := range []struct {
		name    string
		p       packet
		on, off string
	}{
		{"neighbour solicitation from a pod to the host", nd, "accept", "drop"},
		{"allowed spoofed IPv6 source", spoof6, "accept", "drop"},
		{"allowed spoofed IPv4 source", spoof4, "accept", "accept"},
		{"IPv6 through a family-agnostic allow", allowAll6, "accept", "accept"},
		{"IPv6 to a pod without policy", noPolicy6, "drop", "drop"},
	} {
		for _, on := range []bool{true, false} {
			cfg := DefaultConfig()
			cfg.IPv6 = on
			want := tc.off
			if on {
				want = tc.on
			}
			if got := tracePacket(t, packetScenario(t, cfg), tc.p); got.verdict != want {
				t.Errorf("%s, IPv6 %v: got %s; want %s", tc.name, on, got, want)
			}
		}
	}
}

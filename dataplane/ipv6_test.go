package dataplane

// Ipv6Support false, end to end: from the Felix setting through the
// endpoint and policy managers to the inet table and the transactions
// that program it.

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/routes"
)

// ipv6SetCount is the number of Felix IP sets of ipv6Scenario.
const ipv6SetCount = 250

// ipv6Policy is the policy of ipv6Scenario, with its first rule's port.
// Its inbound rules: tcp to port from one set; tcp 9090 from either of
// two sets; ICMPv6 echo (IPv6 only); DNS from a dual-stack CIDR list.
func ipv6Policy(port int32) *proto.ActivePolicyUpdate {
	tcp := &proto.Protocol{NumberOrName: &proto.Protocol_Name{Name: "tcp"}}
	udp := &proto.Protocol{NumberOrName: &proto.Protocol_Name{Name: "udp"}}
	icmpv6 := &proto.Protocol{NumberOrName: &proto.Protocol_Name{Name: "icmpv6"}}
	return &proto.ActivePolicyUpdate{
		Id: &proto.PolicyID{Name: "allow-web", Namespace: "default", Kind: "NetworkPolicy"},
		Policy: &proto.Policy{Tier: "default",
			InboundRules: []*proto.Rule{
				{Action: "allow", Protocol: tcp, SrcIpSetIds: []string{ipv6SetID(0)},
					DstPorts: []*proto.PortRange{{First: port, Last: port}}},
				{Action: "allow", Protocol: tcp, SrcIpSetIds: []string{ipv6SetID(1), ipv6SetID(2)},
					DstPorts: []*proto.PortRange{{First: 9090, Last: 9090}}},
				{Action: "allow", Protocol: icmpv6, Icmp: &proto.Rule_IcmpType{IcmpType: 128}},
				{Action: "allow", Protocol: udp, SrcNet: []string{"10.0.0.0/8", "fd00::/8"},
					DstPorts: []*proto.PortRange{{First: 53, Last: 53}}},
			},
			OutboundRules: []*proto.Rule{{Action: "allow"}},
		},
	}
}

func ipv6SetID(i int) string { return fmt.Sprintf("s:set-%03d", i) }

// ipv6Scenario is a dual-stack node: ipv6SetCount NET sets of one IPv4 and
// one IPv6 member each, ipv6Policy, a profile, ten dual-stack workloads
// using them (with spoofing allowances of both families) and a host
// endpoint found by its IPv6 address.
func ipv6Scenario() []any {
	var msgs []any
	msgs = append(msgs,
		routes.InterfaceStateUpdate{Name: "eth0", State: routes.IfaceUp, Index: 2},
		routes.InterfaceAddrsUpdate{Name: "eth0", Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}})
	for i := range ipv6SetCount {
		msgs = append(msgs, &proto.IPSetUpdate{Id: ipv6SetID(i), Type: proto.IPSetUpdate_NET,
			Members: []string{fmt.Sprintf("10.%d.%d.0/24", i/256, i%256), fmt.Sprintf("fd00:%x::/64", i)}})
	}
	msgs = append(msgs, ipv6Policy(8080),
		&proto.ActiveProfileUpdate{Id: &proto.ProfileID{Name: "kns.default"}, Profile: &proto.Profile{
			InboundRules:  []*proto.Rule{{Action: "allow", SrcNet: []string{"fd00:1::/64"}}},
			OutboundRules: []*proto.Rule{{Action: "allow"}},
		}})
	tier := &proto.TierInfo{Name: "default", DefaultAction: "Deny",
		IngressPolicies: []*proto.PolicyID{{Name: "allow-web", Namespace: "default", Kind: "NetworkPolicy"}}}
	for i := range 10 {
		msgs = append(msgs, &proto.WorkloadEndpointUpdate{
			Id: &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: fmt.Sprintf("default/pod-%d", i), EndpointId: "eth0"},
			Endpoint: &proto.WorkloadEndpoint{
				State: "active", Name: fmt.Sprintf("cali%d", i), Mac: "ee:ee:ee:ee:ee:ee",
				Ipv4Nets:                   []string{fmt.Sprintf("10.65.0.%d/32", i+1)},
				Ipv6Nets:                   []string{fmt.Sprintf("fd00:65::%x/128", i+1)},
				Ipv6Nat:                    []*proto.NatInfo{{ExtIp: fmt.Sprintf("2001:db8:9::%x", i+1)}},
				AllowSpoofedSourcePrefixes: []string{"8.8.8.8/32", "2001:feed::/64"},
				Tiers:                      []*proto.TierInfo{tier},
				ProfileIds:                 []string{"kns.default"},
			},
		})
	}
	msgs = append(msgs, &proto.HostEndpointUpdate{Id: &proto.HostEndpointID{EndpointId: "hep-eth0"},
		Endpoint: &proto.HostEndpoint{ExpectedIpv6Addrs: []string{"2001:db8::1"}, Tiers: []*proto.TierInfo{tier}}})
	return msgs
}

// ipv6Config is the parsed configuration with Ipv6Support set to on.
func ipv6Config(t *testing.T, on bool) Config {
	t.Helper()
	cfg, err := ParseConfig(map[string]string{"Ipv6Support": strconv.FormatBool(on)}, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Render.IPv6 != on || cfg.Endpoints.IPv6 != on {
		t.Fatalf("Ipv6Support=%v parsed as render %v, endpoints %v", on, cfg.Render.IPv6, cfg.Endpoints.IPv6)
	}
	return cfg
}

// ipv6InModel lists what in m is there for IPv6: sets named "-v6" or
// keyed on IPv6 addresses, elements of such sets, and rules matching an
// IPv6 address, set, ICMPv6 type, the ipv6 family or the ICMPv6 protocol.
func ipv6InModel(m *nft.Model) []string {
	var out []string
	for _, n := range m.SetNames() {
		s := m.Set(n)
		if strings.HasSuffix(n, "-v6") || slices.Contains(s.Key, nft.TypeIPv6Addr) {
			out = append(out, fmt.Sprintf("set %s (%d elements)", n, len(s.Elements)))
		}
	}
	for _, n := range m.ChainNames() {
		for _, r := range m.Chain(n).Rules {
			for _, match := range r.Match {
				v6 := false
				switch x := match.(type) {
				case nft.Addr:
					v6 = x.Family == nft.IPv6
				case nft.ICMP:
					v6 = x.Family == nft.IPv6
				case nft.NFProto:
					v6 = x.Family == nft.IPv6
				case nft.L4Proto:
					v6 = !x.Negate && slices.Contains(x.Protos, 58)
				case nft.Lookup:
					v6 = slices.Contains(x.Keys, nft.SelIP6Saddr) || slices.Contains(x.Keys, nft.SelIP6Daddr)
				}
				if v6 {
					out = append(out, fmt.Sprintf("chain %s: %s", n, r))
					break
				}
			}
		}
	}
	return out
}

// ipSetCount counts the model's sets of Felix IP sets.
func ipSetCount(m *nft.Model) int {
	n := 0
	for _, name := range m.SetNames() {
		if strings.HasPrefix(name, "ipset-") {
			n++
		}
	}
	return n
}

// TestIPv6OffRendersNothingForIPv6 programs ipv6Scenario with Ipv6Support
// on and off (dry runs, no kernel): on, the table has IPv6 sets and rules
// (so the walk finds them); off, none at all, and one set per IP set.
func TestIPv6OffRendersNothingForIPv6(t *testing.T) {
	for _, on := range []bool{true, false} {
		e, err := newEngine(ipv6Config(t, on), dryKernel{}, slog.New(slog.DiscardHandler), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ipv6Scenario() {
			e.update(m)
		}
		if err := e.compute(); err != nil {
			t.Fatal(err)
		}
		if _, err := e.program(context.Background(), false, false); err != nil {
			t.Fatalf("Ipv6Support=%v: %v", on, err)
		}
		model := e.inet.Desired()
		found := ipv6InModel(model)
		wantSets := ipv6SetCount
		if on {
			wantSets *= 2
			if len(found) == 0 {
				t.Errorf("Ipv6Support=true: the walk found nothing for IPv6; it is broken")
			}
		} else {
			for _, f := range found {
				t.Errorf("Ipv6Support=false: %s", f)
			}
			if s := strings.ToLower(model.String()); strings.Contains(s, "ip6") || strings.Contains(s, "ipv6") || strings.Contains(s, "-v6") {
				t.Errorf("Ipv6Support=false: the table's text mentions IPv6:\n%s", model)
			}
		}
		if got := ipSetCount(model); got != wantSets {
			t.Errorf("Ipv6Support=%v: %d IP set sets, want %d", on, got, wantSets)
		}
	}
}

// kernelTables is a dry kernel whose tables are real, in one namespace:
// no routes or sysctls, which the test does not look at.
type kernelTables struct {
	dryKernel
	fd int
}

func (k kernelTables) NewTable(family nft.Family, name string) (Table, error) {
	t, err := nft.NewTable(nft.TableConfig{Family: family, Name: name, NetNSFd: k.fd})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// TestKernelIPv6OffTransactionSize programs ipv6Scenario into a namespace
// with Ipv6Support on and off, then changes the port of one policy rule.
// Off, both the cold start and the change send fewer operations and
// netlink messages: no -v6 sets and elements, no IPv6 rule variants. The
// change rewrites the policy's inbound chain and nothing else either way.
func TestKernelIPv6OffTransactionSize(t *testing.T) {
	netnstest.RequireRoot(t)
	type sizes struct{ cold, change nft.ApplyStats }
	got := map[bool]sizes{}
	for _, on := range []bool{true, false} {
		ns := netnstest.New(t)
		e, err := newEngine(ipv6Config(t, on), kernelTables{fd: ns.Fd()}, slog.New(slog.DiscardHandler), nil)
		if err != nil {
			t.Fatal(err)
		}
		step := func(msgs ...any) nft.ApplyStats {
			t.Helper()
			for _, m := range msgs {
				e.update(m)
			}
			if err := e.compute(); err != nil {
				t.Fatal(err)
			}
			r, err := e.program(context.Background(), false, false)
			if err != nil {
				t.Fatalf("Ipv6Support=%v: %v", on, err)
			}
			return r.inet
		}
		var s sizes
		s.cold = step(ipv6Scenario()...)
		s.change = step(ipv6Policy(8081))
		got[on] = s

		tx := e.inet.(*nft.Table).LastTransaction()
		for _, op := range tx.Ops {
			if op.Name != "filter-pi-default.default/allow-web" || (op.Kind != nft.OpFlushChain && op.Kind != nft.OpAddRules) {
				t.Errorf("Ipv6Support=%v: the port change did %s %s; want only the policy chain rewritten", on, op.Kind, op.Name)
			}
		}
		if !on {
			for _, f := range ipv6InModel(e.inet.Desired()) {
				t.Errorf("Ipv6Support=false: %s", f)
			}
			if out := ns.Run(t, "nft", "list", "table", "inet", "nftep"); out != e.inet.Desired().String() {
				t.Errorf("Ipv6Support=false: the kernel's table differs from the model")
			}
		}
		t.Logf("Ipv6Support=%-5v cold start: %d operations, %d messages; one-port change: %d operations, %d messages (%d rules)",
			on, s.cold.Operations, s.cold.Messages, s.change.Operations, s.change.Messages, len(e.inet.Desired().Chain("filter-pi-default.default/allow-web").Rules))
	}
	on, off := got[true], got[false]
	for _, c := range []struct {
		what    string
		on, off int
	}{
		{"cold start operations", on.cold.Operations, off.cold.Operations},
		{"cold start messages", on.cold.Messages, off.cold.Messages},
		{"one-port change operations", on.change.Operations, off.change.Operations},
		{"one-port change messages", on.change.Messages, off.change.Messages},
	} {
		if c.off >= c.on {
			t.Errorf("%s: %d with IPv6 off, %d with it on; want fewer", c.what, c.off, c.on)
		}
	}
}

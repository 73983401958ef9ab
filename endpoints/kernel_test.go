package endpoints_test

// Kernel test: the manager driving the real nft, routes and sysctl packages
// in a network namespace of its own, as the daemon will.
//
// Topology (each box a namespace):
//
//	[pod-a] eth0 10.65.0.1/32 ── caliA ─┐
//	[pod-b] eth0 10.65.0.2/32 ── caliB ─┤ [host] ── hep0 192.168.99.1/24 ── eth0 192.168.99.2/24 [ext]
//	                                     (default route via 192.168.99.2)
//
// Pods route everything via 169.254.1.1, which the host answers by proxy
// ARP (proxy_arp=1, written by the manager), as with Calico. Pod A may talk
// to pod B (B's ingress policy allows A); B may not open connections to A
// (A has no ingress policy). hep0 has a host endpoint with no policy: only
// failsafe ports reach the host through it.

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/nftep/nftep/endpoints"
	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/internal/testutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
	"github.com/nftep/nftep/routes"
	"github.com/nftep/nftep/sysctl"
)

// routesAdapter is what the daemon does: endpoints.RouteTarget → routes.Target.
type routesAdapter struct{ t *routes.Table }

func (a routesAdapter) SetRoutes(iface string, targets []endpoints.RouteTarget) {
	out := make([]routes.Target, len(targets))
	for i, t := range targets {
		out[i] = routes.Target{CIDR: t.CIDR, DestMAC: t.DestMAC, Priority: t.Priority}
	}
	a.t.SetRoutes(iface, out)
}

func TestKernelWorkloadsAndHostEndpoint(t *testing.T) {
	host, podA, podB, ext := netnstest.New(t), netnstest.New(t), netnstest.New(t), netnstest.New(t)
	netnstest.Veth(t, host, "caliA", podA, "eth0")
	netnstest.Veth(t, host, "caliB", podB, "eth0")
	netnstest.Veth(t, host, "hep0", ext, "eth0")
	for _, p := range []struct {
		ns   *netnstest.NS
		addr string
	}{{podA, "10.65.0.1/32"}, {podB, "10.65.0.2/32"}} {
		p.ns.AddAddr(t, "eth0", p.addr)
		p.ns.AddRoute(t, "169.254.1.1/32", "eth0", "")
		p.ns.AddRoute(t, "0.0.0.0/0", "eth0", "169.254.1.1")
	}
	host.AddAddr(t, "hep0", "192.168.99.1/24")
	ext.AddAddr(t, "eth0", "192.168.99.2/24")
	// Proxy ARP answers only for addresses routed through another
	// interface: give the host a default route, as a real node has.
	host.AddRoute(t, "0.0.0.0/0", "hep0", "192.168.99.2")
	macA := podA.Link(t, "eth0").Attrs().HardwareAddr
	macB := podB.Link(t, "eth0").Attrs().HardwareAddr

	// The daemon's wiring.
	rcfg := render.DefaultConfig()
	table, err := nft.NewTable(nft.TableConfig{Family: nft.FamilyINet, Name: rcfg.TableName, NetNSFd: host.Fd()})
	if err != nil {
		t.Fatal(err)
	}
	arpTable, err := nft.NewTable(nft.TableConfig{Family: nft.FamilyARP, Name: rcfg.TableName, NetNSFd: host.Fd()})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := routes.New(routes.Config{Netlink: host.Netlink(), IPVersion: 4, GracePeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	sys := sysctl.NewInterfaces(sysctl.NewProcWriter("", sysctl.InNamespace(host.Do)), sysctl.Options{IPv4: true, IPv6: true})
	statuses := map[string]string{}
	cfg := endpoints.DefaultConfig()
	m := endpoints.New(cfg, endpoints.Deps{
		Render:  rcfg,
		Table:   table.Desired(),
		ARP:     arpTable.Desired(),
		Routes:  routesAdapter{rt},
		Sysctls: sys,
		Status: func(msg any) {
			switch msg := msg.(type) {
			case *proto.WorkloadEndpointStatusUpdate:
				statuses[msg.GetId().GetWorkloadId()] = msg.GetStatus().GetStatus()
			case *proto.WorkloadEndpointStatusRemove:
				statuses[msg.GetId().GetWorkloadId()] = "removed"
			case *proto.HostEndpointStatusUpdate:
				statuses[msg.GetId().GetEndpointId()] = msg.GetStatus().GetStatus()
			}
		},
	})

	// The policy chains are the policy package's job; written here by hand:
	// pod A may send anywhere, pod B accepts from pod A.
	writePolicyChains(table.Desired(), rcfg)

	// 1. One batch: interfaces, endpoints; then apply everything.
	var msgs []any
	for _, name := range []string{"caliA", "caliB", "hep0"} {
		idx := host.Link(t, name).Attrs().Index
		msgs = append(msgs, endpoints.InterfaceStateUpdate{Name: name, State: endpoints.IfaceUp, Index: idx})
		rt.OnIfaceStateChanged(name, idx, routes.IfaceUp)
	}
	msgs = append(msgs,
		endpoints.InterfaceAddrsUpdate{Name: "hep0", Addrs: []netip.Addr{netip.MustParseAddr("192.168.99.1")}},
		&proto.WorkloadEndpointUpdate{Id: wl("pod-a"), Endpoint: &proto.WorkloadEndpoint{
			State: "active", Name: "caliA", Mac: macA.String(), Ipv4Nets: []string{"10.65.0.1/32"},
			Tiers: []*proto.TierInfo{{Name: "default", EgressPolicies: []*proto.PolicyID{allowAll}}},
		}},
		&proto.WorkloadEndpointUpdate{Id: wl("pod-b"), Endpoint: &proto.WorkloadEndpoint{
			State: "active", Name: "caliB", Mac: macB.String(), Ipv4Nets: []string{"10.65.0.2/32"},
			Tiers: []*proto.TierInfo{{Name: "default", IngressPolicies: []*proto.PolicyID{allowFromA}, EgressPolicies: []*proto.PolicyID{allowAll}}},
		}},
		&proto.HostEndpointUpdate{Id: &proto.HostEndpointID{EndpointId: "hep-0"}, Endpoint: &proto.HostEndpoint{Name: "hep0"}},
	)
	apply := func() {
		t.Helper()
		ctx := context.Background()
		if _, err := table.Apply(ctx); err != nil {
			t.Fatalf("apply inet table: %v", err)
		}
		if _, err := arpTable.Apply(ctx); err != nil {
			t.Fatalf("apply arp table: %v", err)
		}
		if err := rt.Apply(); err != nil {
			t.Fatalf("apply routes: %v", err)
		}
	}
	batch := func(msgs ...any) {
		t.Helper()
		for _, msg := range msgs {
			m.OnUpdate(msg)
		}
		if err := m.ResolveUpdateBatch(); err != nil {
			t.Fatal(err)
		}
		if err := m.CompleteDeferredWork(); err != nil {
			t.Fatal(err)
		}
		apply()
	}
	batch(msgs...)

	t.Run("statuses", func(t *testing.T) {
		want := map[string]string{"pod-a": "up", "pod-b": "up", "hep-0": "up"}
		if fmt.Sprint(statuses) != fmt.Sprint(want) {
			t.Errorf("statuses = %v, want %v", statuses, want)
		}
	})

	t.Run("nftables", func(t *testing.T) {
		got := host.Run(t, "nft", "list", "table", "inet", rcfg.TableName)
		for _, want := range []string{
			`"caliA" comment "endpoint k8s/pod-a/eth0" : goto filter-fw-caliA`,
			`"caliB" comment "endpoint k8s/pod-b/eth0" : goto filter-tw-caliB`,
			`"hep0" comment "host endpoint hep-0" : goto filter-fh-hep0`,
			"chain filter-tw-caliB {",
			"jump filter-pi-default.allow-from-a",
			"chain filter-fw-caliA {",
			"jump filter-po-default.allow-all",
			"chain filter-fh-hep0 {",
			"jump filter-failsafe-in",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("nft list table lacks %q", want)
			}
		}
		// After a cold apply the kernel lists the table exactly as the
		// model prints it (nft's printer contract).
		if want := table.Desired().String(); got != want {
			t.Errorf("nft list table differs from the model:\n--- kernel\n%s\n--- model\n%s", got, want)
		}
	})

	t.Run("routes and neighbours", func(t *testing.T) {
		for _, w := range []struct {
			iface, dst string
			mac        net.HardwareAddr
		}{{"caliA", "10.65.0.1/32", macA}, {"caliB", "10.65.0.2/32", macB}} {
			link := host.Link(t, w.iface)
			rs, err := host.Netlink().RouteList(link, netlink.FAMILY_V4)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, r := range rs {
				if r.Dst != nil && r.Dst.String() == w.dst && r.Scope == netlink.SCOPE_LINK && r.Priority == 1024 && r.Protocol == 3 {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: no route %s scope link proto boot metric 1024 in %v", w.iface, w.dst, rs)
			}
			ns, err := host.Netlink().NeighList(link.Attrs().Index, netlink.FAMILY_V4)
			if err != nil {
				t.Fatal(err)
			}
			found = false
			for _, n := range ns {
				if n.IP.String()+"/32" == w.dst && n.HardwareAddr.String() == w.mac.String() && n.State&netlink.NUD_PERMANENT != 0 {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: no permanent neighbour %s lladdr %s in %v", w.iface, w.dst, w.mac, ns)
			}
		}
	})

	t.Run("sysctls", func(t *testing.T) {
		for path, want := range map[string]string{
			"/proc/sys/net/ipv6/conf/caliA/accept_ra":      "0",
			"/proc/sys/net/ipv4/conf/caliA/route_localnet": "1",
			"/proc/sys/net/ipv4/neigh/caliA/proxy_delay":   "0",
			"/proc/sys/net/ipv4/conf/caliA/proxy_arp":      "1",
			"/proc/sys/net/ipv4/conf/caliA/forwarding":     "1",
			"/proc/sys/net/ipv6/conf/caliA/proxy_ndp":      "1",
			"/proc/sys/net/ipv6/conf/caliA/forwarding":     "1",
			"/proc/sys/net/ipv4/conf/caliB/proxy_arp":      "1",
		} {
			var got []byte
			if err := host.Do(func() (err error) { got, err = os.ReadFile(path); return err }); err != nil {
				t.Errorf("read %s: %v", path, err)
				continue
			}
			if strings.TrimSpace(string(got)) != want {
				t.Errorf("%s = %q, want %q", path, strings.TrimSpace(string(got)), want)
			}
		}
	})

	t.Run("packets", func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			from, to *netnstest.NS
			addr     string
			allowed  bool
		}{
			{"pod A to pod B: B's ingress policy allows A", podA, podB, "10.65.0.2:8080", true},
			{"pod B to pod A: A has no ingress policy", podB, podA, "10.65.0.1:8080", false},
			{"ext to host failsafe port 22 through the host endpoint", ext, host, "192.168.99.1:22", true},
			{"ext to host port 8080: host endpoint without policy", ext, host, "192.168.99.1:8080", false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := testutil.Connect(t, tc.from, tc.to, tc.addr, time.Second)
				if tc.allowed && err != nil {
					t.Errorf("connect %s: %v, want success", tc.addr, err)
				}
				if !tc.allowed && err == nil {
					t.Errorf("connect %s succeeded, want it dropped", tc.addr)
				}
			})
		}
	})

	// 2. Pod A gets an ingress policy allowing everything: one incremental
	// batch, and B can now reach A.
	batch(&proto.WorkloadEndpointUpdate{Id: wl("pod-a"), Endpoint: &proto.WorkloadEndpoint{
		State: "active", Name: "caliA", Mac: macA.String(), Ipv4Nets: []string{"10.65.0.1/32"},
		Tiers: []*proto.TierInfo{{Name: "default", IngressPolicies: []*proto.PolicyID{allowAll}, EgressPolicies: []*proto.PolicyID{allowAll}}},
	}})
	n := table.LastTransaction().NumOperations()
	t.Logf("2: one-endpoint change: %d operations", n)
	if n == 0 || n > 40 {
		t.Errorf("2: one-endpoint change sent %d operations, want a small constant", n)
	}
	if err := testutil.Connect(t, podB, podA, "10.65.0.1:8080", time.Second); err != nil {
		t.Errorf("2: pod B to pod A after A allowed ingress: %v", err)
	}

	// 3. Pod B goes: its interface leaves the dispatch maps (unknown
	// workload interface: dropped) and its route goes.
	batch(&proto.WorkloadEndpointRemove{Id: wl("pod-b")})
	if err := testutil.Connect(t, podB, podA, "10.65.0.1:8080", time.Second); err == nil {
		t.Errorf("3: pod B reached pod A after its endpoint was removed")
	}
	rs, err := host.Netlink().RouteList(host.Link(t, "caliB"), netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Dst != nil && r.Dst.String() == "10.65.0.2/32" {
			t.Errorf("3: pod B's route still there: %v", r)
		}
	}
	if statuses["pod-b"] != "removed" {
		t.Errorf("3: pod-b status %q, want a removal", statuses["pod-b"])
	}
}

var (
	allowAll   = &proto.PolicyID{Name: "allow-all", Kind: "GlobalNetworkPolicy"}
	allowFromA = &proto.PolicyID{Name: "allow-from-a", Kind: "GlobalNetworkPolicy"}
)

func wl(pod string) *proto.WorkloadEndpointID {
	return &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: pod, EndpointId: "eth0"}
}

// writePolicyChains writes the test's policy chains the way Felix's policy
// chains work: a matching rule sets the accept mark, and the chain returns.
// allow-all has a chain per direction; allow-from-a is ingress only.
func writePolicyChains(m *nft.Model, cfg render.Config) {
	accept := cfg.Marks.Accept
	setAccept := nft.SetMark{And: ^accept, Xor: accept}
	ifAccepted := nft.Mark{Mask: accept, Value: accept}
	ret := nft.Verdict{Kind: nft.Return}
	for _, dir := range []render.Dir{render.Ingress, render.Egress} {
		m.SetChain(&nft.Chain{
			Name: render.PolicyChainName(render.LayerFilter, dir, "default", allowAll),
			Rules: []*nft.Rule{
				{Action: setAccept, Comment: "test policy allow-all"},
				{Match: []nft.Match{ifAccepted}, Action: ret, Comment: "test policy allow-all: accepted"},
			},
		})
	}
	m.SetChain(&nft.Chain{
		Name: render.PolicyChainName(render.LayerFilter, render.Ingress, "default", allowFromA),
		Rules: []*nft.Rule{
			{
				Match:   []nft.Match{nft.Addr{Family: nft.IPv4, Dir: nft.In, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.65.0.1/32")}}},
				Action:  setAccept,
				Comment: "test policy allow-from-a: from pod A",
			},
			{Match: []nft.Match{ifAccepted}, Action: ret, Comment: "test policy allow-from-a: accepted"},
		},
	})
}

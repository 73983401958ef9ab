package endpoints_test

// Kernel test: bad input from one endpoint stays with that endpoint.
//
// Topology (each box a namespace):
//
//	[pod-a] eth0 10.65.0.1 ── caliA ─┐
//	[pod-b] eth0 10.65.0.2 ── caliB ─┤
//	[pod-x] eth0 10.65.0.3 ── calié ─┤ [host] ── hep0 192.168.99.1/24 ── eth0 192.168.99.2/24 [ext]
//	                                  ├─ et"h1 10.99.1.1/24 ── [junk]
//	                                  └─ ethé  10.99.2.1/24 ── [junk]
//
// In one batch: pod-a is plain; pod-b's ID, tier, policy and profile names
// hold quotes and backslashes and its spoofed prefixes overlap; pod-x's
// interface name is not ASCII; host endpoints name, or match by address,
// host interfaces whose names nft cannot take; and a `*` host endpoint
// covers hep0. The transaction applies; pod-a and pod-b work; pod-x and
// the two host endpoints report errors, and nothing of theirs is in the
// dispatch maps. Then pod-b is removed while it has an established
// connection through the `*` endpoint: that connection must die (the
// unknown-workload drop runs before the `*` endpoint's established accept).

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nftep/nftep/endpoints"
	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/internal/testutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
	"github.com/nftep/nftep/routes"
	"github.com/nftep/nftep/sysctl"
)

func TestKernelBadInputStaysWithItsEndpoint(t *testing.T) {
	const (
		ifX      = "calié" // non-ASCII: pod-x is rejected
		ifQuoted = `et"h1` // host interface nft cannot name
		ifUTF8   = "ethé"  // host interface nft cannot name
		extAddr  = "192.168.99.2"
		extPort  = "9000"
		oddTier  = `t"x`    // a tier name nft would refuse in a comment
		oddProf  = `prof"\` // a profile name likewise
	)
	host, podA, podB, podX, ext, junk := netnstest.New(t), netnstest.New(t), netnstest.New(t), netnstest.New(t), netnstest.New(t), netnstest.New(t)
	netnstest.Veth(t, host, "caliA", podA, "eth0")
	netnstest.Veth(t, host, "caliB", podB, "eth0")
	netnstest.Veth(t, host, ifX, podX, "eth0")
	netnstest.Veth(t, host, "hep0", ext, "eth0")
	netnstest.Veth(t, host, ifQuoted, junk, "eth0")
	netnstest.Veth(t, host, ifUTF8, junk, "eth1")
	for _, p := range []struct {
		ns   *netnstest.NS
		addr string
	}{{podA, "10.65.0.1/32"}, {podB, "10.65.0.2/32"}, {podX, "10.65.0.3/32"}} {
		p.ns.AddAddr(t, "eth0", p.addr)
		p.ns.AddRoute(t, "169.254.1.1/32", "eth0", "")
		p.ns.AddRoute(t, "0.0.0.0/0", "eth0", "169.254.1.1")
	}
	host.AddAddr(t, "hep0", "192.168.99.1/24")
	host.AddAddr(t, ifQuoted, "10.99.1.1/24")
	host.AddAddr(t, ifUTF8, "10.99.2.1/24")
	ext.AddAddr(t, "eth0", extAddr+"/24")
	ext.AddRoute(t, "10.65.0.0/16", "eth0", "192.168.99.1")
	host.AddRoute(t, "0.0.0.0/0", "hep0", extAddr)
	// The manager configures workload interfaces only; replies come in on
	// hep0. pod-x is rejected, so the manager gives it no route and no
	// sysctls: set them by hand (the route after the first batch, or the
	// route table would remove it from a workload interface), so that
	// only nftables stands between pod-x and ext.
	for path, v := range map[string]string{
		"/proc/sys/net/ipv4/conf/hep0/forwarding":          "1",
		"/proc/sys/net/ipv4/conf/" + ifX + "/forwarding":   "1",
		"/proc/sys/net/ipv4/conf/" + ifX + "/proxy_arp":    "1",
		"/proc/sys/net/ipv4/neigh/" + ifX + "/proxy_delay": "0",
	} {
		if err := host.Do(func() error { return os.WriteFile(path, []byte(v), 0o644) }); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
	}
	macA := podA.Link(t, "eth0").Attrs().HardwareAddr
	macB := podB.Link(t, "eth0").Attrs().HardwareAddr

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
	m := endpoints.New(endpoints.DefaultConfig(), endpoints.Deps{
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
	writePolicyChains(table.Desired(), rcfg)
	oddPolicy := &proto.PolicyID{Name: `p"\`, Kind: "GlobalNetworkPolicy"}
	for _, dir := range []render.Dir{render.Ingress, render.Egress} {
		table.Desired().SetChain(allowChain(rcfg, render.PolicyChainName(render.LayerFilter, dir, oddTier, oddPolicy)))
		table.Desired().SetChain(allowChain(rcfg, render.ProfileChainName(render.LayerFilter, dir, oddProf)))
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

	var msgs []any
	for _, name := range []string{"caliA", "caliB", ifX, "hep0", ifQuoted, ifUTF8} {
		idx := host.Link(t, name).Attrs().Index
		msgs = append(msgs, endpoints.InterfaceStateUpdate{Name: name, State: endpoints.IfaceUp, Index: idx})
		rt.OnIfaceStateChanged(name, idx, routes.IfaceUp)
	}
	allowTiers := []*proto.TierInfo{{Name: "default", IngressPolicies: []*proto.PolicyID{allowAll}, EgressPolicies: []*proto.PolicyID{allowAll}}}
	msgs = append(msgs,
		endpoints.InterfaceAddrsUpdate{Name: "hep0", Addrs: []netip.Addr{netip.MustParseAddr("192.168.99.1")}},
		endpoints.InterfaceAddrsUpdate{Name: ifQuoted, Addrs: []netip.Addr{netip.MustParseAddr("10.99.1.1")}},
		endpoints.InterfaceAddrsUpdate{Name: ifUTF8, Addrs: []netip.Addr{netip.MustParseAddr("10.99.2.1")}},
		// Good.
		&proto.WorkloadEndpointUpdate{Id: wl("pod-a"), Endpoint: &proto.WorkloadEndpoint{
			State: "active", Name: "caliA", Mac: macA.String(), Ipv4Nets: []string{"10.65.0.1/32"}, Tiers: allowTiers,
		}},
		// Odd names (B) and overlapping spoofed prefixes (C): programmed.
		&proto.WorkloadEndpointUpdate{
			Id: &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: "pod-b", EndpointId: `e"0`},
			Endpoint: &proto.WorkloadEndpoint{
				State: "active", Name: "caliB", Mac: macB.String(), Ipv4Nets: []string{"10.65.0.2/32"},
				Tiers:                      []*proto.TierInfo{{Name: oddTier, IngressPolicies: []*proto.PolicyID{oddPolicy}, EgressPolicies: []*proto.PolicyID{oddPolicy}}},
				ProfileIds:                 []string{oddProf},
				AllowSpoofedSourcePrefixes: []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.3", "10.0.0.0/8"},
			},
		},
		// A name nft cannot take (A): rejected.
		&proto.WorkloadEndpointUpdate{Id: wl("pod-x"), Endpoint: &proto.WorkloadEndpoint{
			State: "active", Name: ifX, Ipv4Nets: []string{"10.65.0.3/32"}, Tiers: allowTiers,
		}},
		// Host endpoints on interfaces nft cannot name: errors.
		&proto.HostEndpointUpdate{Id: &proto.HostEndpointID{EndpointId: "hep-quoted"}, Endpoint: &proto.HostEndpoint{Name: ifQuoted}},
		&proto.HostEndpointUpdate{Id: &proto.HostEndpointID{EndpointId: "hep-utf8"}, Endpoint: &proto.HostEndpoint{ExpectedIpv4Addrs: []string{"10.99.2.1"}}},
		// The `*` endpoint: forwarded traffic allowed, established accepted.
		&proto.HostEndpointUpdate{Id: &proto.HostEndpointID{EndpointId: "hep-star"}, Endpoint: &proto.HostEndpoint{Name: "*"}},
	)
	batch(msgs...)
	host.AddRoute(t, "10.65.0.3/32", ifX, "")

	t.Run("statuses", func(t *testing.T) {
		want := map[string]string{"pod-a": "up", "pod-b": "up", "pod-x": "error", "hep-quoted": "error", "hep-utf8": "error", "hep-star": "up"}
		for id, st := range want {
			if statuses[id] != st {
				t.Errorf("%s: status %q, want %q (all: %v)", id, statuses[id], st, statuses)
			}
		}
		reasons := map[string]string{}
		for _, s := range m.Statuses() {
			reasons[s.ID] = s.Reason
		}
		for id, want := range map[string]string{
			"k8s/pod-x/eth0": "nftables cannot match it",
			"hep-quoted":     "not programmed on interface",
			"hep-utf8":       "not programmed on interface",
		} {
			if !strings.Contains(reasons[id], want) {
				t.Errorf("%s: reason %q does not mention %q", id, reasons[id], want)
			}
		}
	})

	t.Run("nftables", func(t *testing.T) {
		got := host.Run(t, "nft", "list", "table", "inet", rcfg.TableName)
		if want := table.Desired().String(); got != want {
			t.Errorf("nft list table differs from the model:\n--- kernel\n%s\n--- model\n%s", got, want)
		}
		for _, want := range []string{
			`"caliA" comment "endpoint k8s/pod-a/eth0" : goto filter-fw-caliA`,
			`"caliB" comment "endpoint k8s/pod-b/e_0" : goto filter-fw-caliB`,
			`"caliB" . 10.0.0.0/8 comment "endpoint k8s/pod-b/e_0"`,
			`comment "endpoint k8s/pod-b/e_0: Start of tier t_x"`,
			`comment "endpoint k8s/pod-b/e_0: Profile prof__"`,
			`iifname "cali*" iifname != @filter-wl-ifaces drop`,
			`oifname "cali*" oifname != @filter-wl-ifaces drop`,
		} {
			if !strings.Contains(got, want) {
				t.Errorf("nft list table lacks %q", want)
			}
		}
		for _, bad := range []string{"calié", "10.1.0.0/16", "et", "ethé", "hep-quoted", "hep-utf8"} {
			if strings.Contains(got, `"`+bad) {
				t.Errorf("nft list table has %q", bad)
			}
		}
		for _, name := range []string{render.MapFromWorkload, render.MapToWorkload, render.SetWorkloadIfaces} {
			var keys []string
			for k := range table.Desired().Set(name).Elements {
				keys = append(keys, k)
			}
			if len(keys) != 2 || !strings.Contains(strings.Join(keys, " "), "caliA") || !strings.Contains(strings.Join(keys, " "), "caliB") {
				t.Errorf("%s: keys %q, want caliA and caliB", name, keys)
			}
		}
		for _, name := range []string{render.MapFromHost, render.MapToHost, render.MapFromHostForward, render.MapToHostForward} {
			if n := len(table.Desired().Set(name).Elements); n != 0 {
				t.Errorf("%s: %d elements, want none", name, n)
			}
		}
	})

	t.Run("packets", func(t *testing.T) {
		addr := net.JoinHostPort(extAddr, extPort)
		if err := testutil.Connect(t, podA, ext, addr, time.Second); err != nil {
			t.Errorf("pod A to ext: %v, want success", err)
		}
		if err := testutil.Connect(t, podB, ext, addr, time.Second); err != nil {
			t.Errorf("pod B (odd names) to ext: %v, want success", err)
		}
		if err := testutil.Connect(t, podX, ext, addr, time.Second); err == nil {
			t.Errorf("pod X (rejected) reached ext, want its traffic dropped")
		}
	})

	// An established connection of pod-b through the `*` endpoint.
	var ln net.Listener
	if err := ext.Do(func() (err error) { ln, err = net.Listen("tcp", net.JoinHostPort(extAddr, extPort)); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	var client net.Conn
	if err := podB.Do(func() (err error) {
		client, err = net.DialTimeout("tcp", net.JoinHostPort(extAddr, extPort), 2*time.Second)
		return err
	}); err != nil {
		t.Fatalf("pod B dial ext: %v", err)
	}
	defer client.Close()
	var server net.Conn
	select {
	case server = <-accepted:
	case <-time.After(2 * time.Second):
		t.Fatal("ext did not accept pod B's connection")
	}
	defer server.Close()
	// carries reports whether msg written on from arrives on to.
	carries := func(from, to net.Conn, msg string) bool {
		t.Helper()
		if _, err := from.Write([]byte(msg)); err != nil {
			t.Fatalf("write: %v", err)
		}
		buf := make([]byte, 64)
		_ = to.SetReadDeadline(time.Now().Add(1500 * time.Millisecond))
		n, err := to.Read(buf)
		return err == nil && string(buf[:n]) == msg
	}
	if !carries(client, server, "out before") || !carries(server, client, "in before") {
		t.Fatal("pod B's established connection carried nothing before the removal")
	}
	batch(&proto.WorkloadEndpointRemove{Id: &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: "pod-b", EndpointId: `e"0`}})
	// The route to pod B went with its endpoint, and with it the RPF check
	// fails for pod B's packets and ext's have nowhere to go. A route can
	// outlive the endpoint, though (a CNI plugin's route when
	// RemoveExternalRoutes is off, or one in its grace period): put it
	// back, so that only nftables decides.
	host.AddRoute(t, "10.65.0.2/32", "caliB", "")
	if carries(client, server, "out after") {
		t.Errorf("pod B's established connection still carries pod B's data after its endpoint was removed")
	}
	if carries(server, client, "in after") {
		t.Errorf("pod B's established connection still carries data to pod B after its endpoint was removed")
	}
	if err := testutil.Connect(t, podA, ext, net.JoinHostPort(extAddr, "9001"), time.Second); err != nil {
		t.Errorf("pod A to ext after pod B's removal: %v, want success", err)
	}
}

// allowChain is a policy or profile chain that allows everything, the way
// the policy package writes an allow: set the accept mark and return.
func allowChain(cfg render.Config, name string) *nft.Chain {
	accept := cfg.Marks.Accept
	return &nft.Chain{Name: name, Rules: []*nft.Rule{
		{Action: nft.SetMark{And: ^accept, Xor: accept}, Comment: "test: allow all"},
		{Match: []nft.Match{nft.Mark{Mask: accept, Value: accept}}, Action: nft.Verdict{Kind: nft.Return}, Comment: "test: accepted"},
	}}
}

package render

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// Kernel tests: each golden case is loaded into a real table, and the
// packet-flow cases that have a real-packet equivalent are replayed between
// namespaces. They need root (netnstest skips otherwise).

// applyModel programs m into ns with the nft engine, in one transaction.
func applyModel(t *testing.T, ns *netnstest.NS, m *nft.Model) *nft.Table {
	t.Helper()
	tbl, err := nft.NewTable(nft.TableConfig{Family: m.Family, Name: m.Name, NetNSFd: ns.Fd()})
	if err != nil {
		t.Fatalf("new table: %v", err)
	}
	copyModel(tbl.Desired(), m)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := tbl.Apply(ctx); err != nil {
		t.Fatalf("apply %s %s: %v", m.Family, m.Name, err)
	}
	return tbl
}

// copyModel makes dst hold what src holds (chains are immutable and shared;
// sets are copied with their elements).
func copyModel(dst, src *nft.Model) {
	for _, n := range src.SetNames() {
		s := *src.Set(n)
		s.Elements = nil
		dst.SetSet(&s)
		for _, e := range src.Set(n).Elements {
			dst.SetElement(n, e)
		}
	}
	for _, n := range src.ChainNames() {
		dst.SetChain(src.Chain(n))
	}
}

// goldenModels assembles the inet and arp tables of a golden case.
func goldenModels(t *testing.T, gc goldenCase) (inet, arp *nft.Model) {
	cfg := gc.configFor()
	outs, extra := gc.render(cfg)
	inet = buildModel(t, cfg, nil, outs...)
	for _, c := range extra {
		inet.SetChain(c)
	}
	addPlaceholders(cfg, inet, nil)
	return inet, buildARPModel(cfg, outs...)
}

// TestGoldensLoadInKernel loads every golden case (with the static table
// and placeholder policy chains) into a fresh namespace, and checks that
// `nft list table` shows exactly what the model prints.
func TestGoldensLoadInKernel(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, gc := range goldenCaseList() {
		t.Run(gc.name, func(t *testing.T) {
			ns := netnstest.New(t)
			inet, arp := goldenModels(t, gc)
			applyModel(t, ns, inet)
			if got := ns.Run(t, "nft", "list", "table", "inet", inet.Name); got != inet.String() {
				t.Errorf("%s: nft list table inet differs from the model (-model +kernel):\n%s", gc.line, cmp.Diff(inet.String(), got))
			}
			if gc.configFor().ARPSuppression {
				applyModel(t, ns, arp)
				if got := ns.Run(t, "nft", "list", "table", "arp", arp.Name); got != arp.String() {
					t.Errorf("%s: nft list table arp differs from the model (-model +kernel):\n%s", gc.line, cmp.Diff(arp.String(), got))
				}
			}
		})
	}
}

// node is the packet-test topology:
//
//	ext (192.0.2.2) ── eth0 ┐
//	                        host: 192.0.2.1 on eth0, host endpoint hep-eth0
//	pod<N> (10.65.N.2) ── caliN (10.65.N.1)   for N in 1, 2, 3, 4, 9
//
// Endpoints as in flowScenario: cali1 allows all, cali2 has no policy,
// cali3 is admin down, cali4 allows all and may send from 8.8.8.8/32, and
// cali9 has no endpoint at all. hep-eth0 has no normal policy (failsafe
// ports only), a pre-DNAT policy allowing tcp 80 and an untracked policy
// allowing tcp 8080 (and its replies).
type node struct {
	host, ext *netnstest.NS
	pods      map[int]*netnstest.NS
}

func podAddr(n int) string  { return fmt.Sprintf("10.65.%d.2", n) }
func podGw(n int) string    { return fmt.Sprintf("10.65.%d.1", n) }
func caliName(n int) string { return fmt.Sprintf("cali%d", n) }

const (
	hostAddr = "192.0.2.1"
	extAddr  = "192.0.2.2"
)

func newNode(t *testing.T) *node {
	t.Helper()
	n := &node{host: netnstest.New(t), ext: netnstest.New(t), pods: map[int]*netnstest.NS{}}
	netnstest.Veth(t, n.host, "eth0", n.ext, "eth0")
	n.host.AddAddr(t, "eth0", hostAddr+"/24")
	n.ext.AddAddr(t, "eth0", extAddr+"/24")
	n.ext.AddRoute(t, "10.65.0.0/16", "eth0", hostAddr)
	for _, i := range []int{1, 2, 3, 4, 9} {
		p := netnstest.New(t)
		netnstest.Veth(t, n.host, caliName(i), p, "eth0")
		n.host.AddAddr(t, caliName(i), podGw(i)+"/24")
		p.AddAddr(t, "eth0", podAddr(i)+"/24")
		p.AddRoute(t, "0.0.0.0/0", "eth0", podGw(i))
		n.pods[i] = p
	}
	// The spoofing pod owns 8.8.8.8 so it can bind to it.
	n.pods[4].AddAddr(t, "eth0", "8.8.8.8/32")
	n.pods[1].AddAddr(t, "eth0", "8.8.4.4/32")
	n.host.Run(t, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1",
		"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
		"net.ipv4.conf.cali1.rp_filter=0", "net.ipv4.conf.cali4.rp_filter=0")
	return n
}

// packetScenario is the model the packet tests program into the host.
func packetScenario(t *testing.T, cfg Config) *nft.Model {
	allowAll := tier("default", pols(gnp("allow-all")), pols(gnp("allow-all")))
	down := wep(caliName(3), podAddr(3), allowAll)
	down.State = "inactive"
	spoof := wep(caliName(4), podAddr(4), allowAll)
	spoof.AllowSpoofedSourcePrefixes = []string{"8.8.8.8/32"}
	outs := []Output{
		Workload(cfg, WorkloadInput{ID: wlID("default", "pod-1"), Endpoint: wep(caliName(1), podAddr(1), allowAll)}),
		Workload(cfg, WorkloadInput{ID: wlID("default", "pod-2"), Endpoint: wep(caliName(2), podAddr(2))}),
		Workload(cfg, WorkloadInput{ID: wlID("default", "pod-3"), Endpoint: down}),
		Workload(cfg, WorkloadInput{ID: wlID("default", "pod-4"), Endpoint: spoof}),
		Host(cfg, HostInput{ID: "hep-eth0", Interface: "eth0", Endpoint: &proto.HostEndpoint{
			Name:           "eth0",
			PreDnatTiers:   []*proto.TierInfo{tier("default", pols(gnp("prednat")), nil)},
			UntrackedTiers: []*proto.TierInfo{tier("default", pols(gnp("untracked")), pols(gnp("untracked")))},
		}}),
	}
	return buildModel(t, cfg, map[string]policyBehaviour{
		"filter-pi-default.allow-all": allowPolicy,
		"filter-po-default.allow-all": allowPolicy,
		"mangle-pi-default.prednat":   allowTCP80,
		"raw-pi-default.untracked":    allowTCP8080,
		"raw-po-default.untracked":    allowTCPSport8080,
	}, outs...)
}

// listenTCP opens a TCP server in ns that accepts and closes connections.
func listenTCP(t *testing.T, ns *netnstest.NS, addr string) {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp4", addr); return err }); err != nil {
		t.Fatalf("listen %s in %s: %v", addr, ns.Name, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

// canConnect reports whether a TCP connection from ns to addr succeeds
// within a short timeout (dropped SYNs time out; an unreachable network
// fails fast and counts as blocked too).
func canConnect(ns *netnstest.NS, addr string) bool {
	err := ns.Do(func() error {
		c, err := net.DialTimeout("tcp4", addr, 700*time.Millisecond)
		if err != nil {
			return err
		}
		return c.Close()
	})
	return err == nil
}

// udpArrives sends one datagram from ns (bound to src) to dst, where
// receiver listens, and reports whether it arrived.
func udpArrives(t *testing.T, from *netnstest.NS, src string, to *netnstest.NS, dst string) bool {
	t.Helper()
	var rx *net.UDPConn
	if err := to.Do(func() (err error) {
		rx, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(mustAddrPort(dst)))
		return err
	}); err != nil {
		t.Fatalf("listen udp %s: %v", dst, err)
	}
	defer rx.Close()
	if err := from.Do(func() error {
		c, err := net.DialUDP("udp4", &net.UDPAddr{IP: net.ParseIP(src)}, net.UDPAddrFromAddrPort(mustAddrPort(dst)))
		if err != nil {
			return err
		}
		defer c.Close()
		for i := 0; i < 3; i++ {
			if _, err := c.Write([]byte("hello")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("send udp %s -> %s: %v", src, dst, err)
	}
	rx.SetReadDeadline(time.Now().Add(700 * time.Millisecond))
	buf := make([]byte, 16)
	_, _, err := rx.ReadFromUDP(buf)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	if err != nil {
		t.Fatalf("receive udp on %s: %v", dst, err)
	}
	return true
}

// TestPacketsInKernel replays the flows with real packets, with endpoint
// chains per interface and shared.
func TestPacketsInKernel(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.SharedEndpointChains = shared
			n := newNode(t)
			for _, port := range []string{"22", "80", "81", "8080"} {
				listenTCP(t, n.host, "0.0.0.0:"+port)
			}
			for i, p := range n.pods {
				listenTCP(t, p, podAddr(i)+":80")
			}
			listenTCP(t, n.ext, extAddr+":80")

			// Before the table exists everything connects: the topology
			// works, so every "blocked" below is the ruleset's doing.
			if !canConnect(n.pods[9], extAddr+":80") || !canConnect(n.ext, podAddr(9)+":80") {
				t.Fatalf("topology broken: pod9 and ext cannot talk without a ruleset")
			}

			applyModel(t, n.host, packetScenario(t, cfg))

			for _, c := range []struct {
				name string
				ok   func() bool
				want bool
			}{
				{"unknown cali to outside", func() bool { return canConnect(n.pods[9], extAddr+":80") }, false},
				{"outside to unknown cali", func() bool { return canConnect(n.ext, podAddr(9)+":80") }, false},
				{"unknown cali to host", func() bool { return canConnect(n.pods[9], podGw(9)+":80") }, false},
				{"allowed pod to outside", func() bool { return canConnect(n.pods[1], extAddr+":80") }, true},
				{"outside to allowed pod", func() bool { return canConnect(n.ext, podAddr(1)+":80") }, true},
				{"pod to pod, allowed both ways", func() bool { return canConnect(n.pods[1], podAddr(4)+":80") }, true},
				{"pod to pod without ingress policy", func() bool { return canConnect(n.pods[1], podAddr(2)+":80") }, false},
				{"admin down pod, ingress", func() bool { return canConnect(n.ext, podAddr(3)+":80") }, false},
				{"admin down pod, egress", func() bool { return canConnect(n.pods[3], extAddr+":80") }, false},
				{"workload to host (DefaultEndpointToHostAction DROP)", func() bool { return canConnect(n.pods[1], podGw(1)+":80") }, false},
				{"spoofed source dropped", func() bool { return udpArrives(t, n.pods[1], "8.8.4.4", n.ext, extAddr+":9999") }, false},
				{"real source passes", func() bool { return udpArrives(t, n.pods[1], podAddr(1), n.ext, extAddr+":9999") }, true},
				{"allowed spoofed source passes", func() bool { return udpArrives(t, n.pods[4], "8.8.8.8", n.ext, extAddr+":9999") }, true},
				{"host endpoint failsafe ssh", func() bool { return canConnect(n.ext, hostAddr+":22") }, true},
				{"host endpoint without policy", func() bool { return canConnect(n.ext, hostAddr+":81") }, false},
				{"pre-DNAT accepted, filter honours it", func() bool { return canConnect(n.ext, hostAddr+":80") }, true},
				{"untracked accepted, filter honours it", func() bool { return canConnect(n.ext, hostAddr+":8080") }, true},
			} {
				if got := c.ok(); got != c.want {
					t.Errorf("%s: got %v, want %v\n%s", c.name, got, c.want, counters(t, n.host))
				}
			}
		})
	}
}

// counters lists the rules that dropped packets, to explain a failure.
func counters(t *testing.T, ns *netnstest.NS) string {
	out, _ := ns.Output("nft", "list", "table", "inet", DefaultTableName)
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "drop") || strings.Contains(l, "chain ") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func mustAddrPort(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// TestSharedChainsIncrementalInKernel programs 1,000 endpoints over 10
// policy combinations with sharing on, then moves one endpoint: to an
// existing combination the transaction holds only its two dispatch
// elements (each a delete and an add); to a new one it adds just the two
// new endpoint chains (plus the new policies' placeholder chains).
func TestSharedChainsIncrementalInKernel(t *testing.T) {
	netnstest.RequireRoot(t)
	cfg := DefaultConfig()
	cfg.SharedEndpointChains = true
	ns := netnstest.New(t)
	m := buildModel(t, cfg, nil, sharingScenario(cfg)...)
	if got := len(endpointChains(m)); got != 20 {
		t.Fatalf("got %d endpoint chains, want 20", got)
	}
	tbl := applyModel(t, ns, m)
	ctx := context.Background()

	move := func(combo int) *nft.Transaction {
		t.Helper()
		d := tbl.Desired()
		o := Workload(cfg, sharingInput(7, combo))
		for _, c := range o.Shared {
			if d.Chain(c.Name) == nil {
				d.SetChain(c)
			}
		}
		for _, e := range o.Elements {
			d.SetElement(e.Set, e.Elem)
		}
		addPlaceholders(cfg, d, nil)
		if _, err := tbl.Apply(ctx); err != nil {
			t.Fatalf("apply: %v", err)
		}
		return tbl.LastTransaction()
	}

	// 1. To an existing combination: elements only.
	tx := move(3)
	for _, op := range tx.Ops {
		if op.Kind != nft.OpDeleteElements && op.Kind != nft.OpAddElements {
			t.Errorf("step 1: unexpected %s %s in\n%s", op.Kind, op.Name, tx)
		}
	}
	// 2 elements replaced: 2 deletes + 2 adds.
	if n := tx.NumOperations(); n != 4 {
		t.Errorf("step 1: %d operations, want 4:\n%s", n, tx)
	}

	// 2. To a new combination: two new endpoint chains appear.
	tx = move(99)
	added := 0
	for _, op := range tx.Ops {
		if op.Kind == nft.OpAddChain && (strings.HasPrefix(op.Name, "filter-tw-") || strings.HasPrefix(op.Name, "filter-fw-")) {
			added++
		}
	}
	if added != 2 {
		t.Errorf("step 2: %d endpoint chains added, want 2:\n%s", added, tx)
	}
}

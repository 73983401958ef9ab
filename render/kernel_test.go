package render

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

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
			checkDecoded(t, ns, gc.line, inet)
			if gc.configFor().ARPSuppression {
				applyModel(t, ns, arp)
				if got := ns.Run(t, "nft", "list", "table", "arp", arp.Name); got != arp.String() {
					t.Errorf("%s: nft list table arp differs from the model (-model +kernel):\n%s", gc.line, cmp.Diff(arp.String(), got))
				}
				checkDecoded(t, ns, gc.line, arp)
			}
		})
	}
}

// checkDecoded reads m's table back from the kernel into a model and checks
// that it is m: the same text, in the kernel's order too, and every rule
// recognised as nftep's (its userdata hash is that of the decoded rule).
func checkDecoded(t *testing.T, ns *netnstest.NS, line string, m *nft.Model) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kt, err := nft.ReadKernelTable(ctx, ns.Fd(), m.Family, m.Name)
	if err != nil {
		t.Fatalf("%s: read %s %s: %v", line, m.Family, m.Name, err)
	}
	if len(kt.Problems) > 0 {
		t.Errorf("%s: decoding %s %s: %q", line, m.Family, m.Name, kt.Problems)
	}
	if diff := cmp.Diff(m.String(), kt.Model.String()); diff != "" {
		t.Errorf("%s: decoded table %s differs from the model (-model +decoded):\n%s", line, m.Family, diff)
	}
	if diff := cmp.Diff(m.String(), kt.String()); diff != "" {
		t.Errorf("%s: decoded table %s in kernel order differs from the model (-model +decoded):\n%s", line, m.Family, diff)
	}
	for _, name := range kt.Chains {
		for i, r := range kt.Model.Chain(name).Rules {
			if !kt.Ours(name, i) {
				t.Errorf("%s: chain %s rule %d not recognised as nftep's: %s", line, name, i+1, r)
			}
		}
	}
}

// node is the packet-test topology:
//
//	ext (192.0.2.2) ── eth0 ┐
//	                        host: 192.0.2.1 on eth0, host endpoint hep-eth0
//	pod<N> (10.65.N.2) ── caliN (10.65.N.1)   for N in 1, 2, 3, 4, 9
//
// and the same veths carry IPv6 too: ext 2001:db8::2, host 2001:db8::1 on
// eth0, pod<N> fd00:65:N::2 and caliN fd00:65:N::1, with forwarding on for
// both families in the host.
//
// Endpoints as in flowScenario: cali1 allows all, cali2 has no policy,
// cali3 is admin down, cali4 allows all and may send from 8.8.8.8/32 and
// fd00:88::8/128, and cali9 has no endpoint at all. hep-eth0 has no normal
// policy (failsafe ports only), a pre-DNAT policy allowing tcp 80 and an
// untracked policy allowing tcp 8080 (and its replies).
type node struct {
	host, ext *netnstest.NS
	pods      map[int]*netnstest.NS
}

func podAddr(n int) string  { return fmt.Sprintf("10.65.%d.2", n) }
func podGw(n int) string    { return fmt.Sprintf("10.65.%d.1", n) }
func podAddr6(n int) string { return fmt.Sprintf("fd00:65:%d::2", n) }
func podGw6(n int) string   { return fmt.Sprintf("fd00:65:%d::1", n) }
func caliName(n int) string { return fmt.Sprintf("cali%d", n) }

// hostPort joins an address and a port, bracketing IPv6 addresses.
func hostPort(addr, port string) string { return net.JoinHostPort(addr, port) }

const (
	hostAddr  = "192.0.2.1"
	extAddr   = "192.0.2.2"
	hostAddr6 = "2001:db8::1"
	extAddr6  = "2001:db8::2"
	// spoofAllowed6 may be sent by pod 4 (its endpoint allows it);
	// spoofDenied6 is owned by pod 1, whose endpoint allows no spoofing.
	spoofAllowed6 = "fd00:88::8"
	spoofDenied6  = "fd00:84::4"
)

func newNode(t *testing.T) *node {
	t.Helper()
	n := &node{host: netnstest.New(t), ext: netnstest.New(t), pods: map[int]*netnstest.NS{}}
	// No duplicate address detection on the links to come: a host whose
	// link-local address is still tentative sends no neighbour
	// solicitation at all, so its first packets to a pod would wait for
	// DAD (a second or more). AddAddr skips DAD for the addresses it adds;
	// this covers the link-local ones the kernel adds.
	noDAD := func(ns *netnstest.NS) { writeSysctl(t, ns, "net/ipv6/conf/default/accept_dad", "0") }
	noDAD(n.host)
	noDAD(n.ext)
	netnstest.Veth(t, n.host, "eth0", n.ext, "eth0")
	n.host.AddAddr(t, "eth0", hostAddr+"/24")
	n.ext.AddAddr(t, "eth0", extAddr+"/24")
	n.ext.AddRoute(t, "10.65.0.0/16", "eth0", hostAddr)
	n.host.AddAddr(t, "eth0", hostAddr6+"/64")
	n.ext.AddAddr(t, "eth0", extAddr6+"/64")
	n.ext.AddRoute(t, "fd00:65::/32", "eth0", hostAddr6)
	for _, i := range []int{1, 2, 3, 4, 9} {
		p := netnstest.New(t)
		noDAD(p)
		netnstest.Veth(t, n.host, caliName(i), p, "eth0")
		n.host.AddAddr(t, caliName(i), podGw(i)+"/24")
		p.AddAddr(t, "eth0", podAddr(i)+"/24")
		p.AddRoute(t, "0.0.0.0/0", "eth0", podGw(i))
		n.host.AddAddr(t, caliName(i), podGw6(i)+"/64")
		p.AddAddr(t, "eth0", podAddr6(i)+"/64")
		p.AddRoute(t, "::/0", "eth0", podGw6(i))
		n.pods[i] = p
	}
	// The spoofing pod owns 8.8.8.8 so it can bind to it.
	n.pods[4].AddAddr(t, "eth0", "8.8.8.8/32")
	n.pods[1].AddAddr(t, "eth0", "8.8.4.4/32")
	addDeprecatedAddr(t, n.pods[4], "eth0", spoofAllowed6+"/128")
	addDeprecatedAddr(t, n.pods[1], "eth0", spoofDenied6+"/128")
	// Neighbour discovery between ext and the host crosses hep-eth0, whose
	// policy (none: failsafe ports only) drops it, as Felix's does: ARP
	// is not IP, so IPv4 never meets this. Permanent neighbour entries
	// take it out of the picture; ND between pods and the host is not
	// helped and must get through the workload rules.
	staticNeighbours(t, n.host, n.ext, "eth0", hostAddr6, extAddr6)
	n.host.Run(t, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1",
		"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
		"net.ipv4.conf.cali1.rp_filter=0", "net.ipv4.conf.cali4.rp_filter=0")
	writeSysctl(t, n.host, "net/ipv6/conf/all/forwarding", "1")
	return n
}

// writeSysctl writes value to /proc/sys/<key> from inside ns (the file
// belongs to the network namespace of the thread that opens it).
func writeSysctl(t *testing.T, ns *netnstest.NS, key, value string) {
	t.Helper()
	if err := ns.Do(func() error {
		return os.WriteFile("/proc/sys/"+key, []byte(value), 0o644)
	}); err != nil {
		t.Fatalf("namespace %q: sysctl %s=%s: %v", ns.Name, key, value, err)
	}
}

// addDeprecatedAddr assigns cidr to ifname in ns as a deprecated address
// (preferred lifetime 0, no DAD): it can be bound to, but source address
// selection never picks it, so a pod's spoofed address is used only by
// the test that binds it.
func addDeprecatedAddr(t *testing.T, ns *netnstest.NS, ifname, cidr string) {
	t.Helper()
	addr, err := netlink.ParseAddr(cidr)
	if err != nil {
		t.Fatalf("parse address %q: %v", cidr, err)
	}
	addr.Flags |= unix.IFA_F_NODAD
	addr.PreferedLft, addr.ValidLft = 0, math.MaxUint32 // valid forever
	if err := ns.Netlink().AddrAdd(ns.Link(t, ifname), addr); err != nil {
		t.Fatalf("namespace %q: add deprecated address %s to %q: %v", ns.Name, cidr, ifname, err)
	}
}

// staticNeighbours adds permanent IPv6 neighbour entries on the veth ends
// called ifname: in a for b's address bAddr, in b for a's address aAddr.
func staticNeighbours(t *testing.T, a, b *netnstest.NS, ifname, aAddr, bAddr string) {
	t.Helper()
	la, lb := a.Link(t, ifname), b.Link(t, ifname)
	for _, e := range []struct {
		ns   *netnstest.NS
		link netlink.Link
		ip   string
		mac  net.HardwareAddr
	}{
		{a, la, bAddr, lb.Attrs().HardwareAddr},
		{b, lb, aAddr, la.Attrs().HardwareAddr},
	} {
		if err := e.ns.Netlink().NeighAdd(&netlink.Neigh{
			LinkIndex: e.link.Attrs().Index, Family: unix.AF_INET6, State: netlink.NUD_PERMANENT,
			IP: net.ParseIP(e.ip), HardwareAddr: e.mac,
		}); err != nil {
			t.Fatalf("namespace %q: neighbour %s on %s: %v", e.ns.Name, e.ip, ifname, err)
		}
	}
}

// packetScenario is the model the packet tests program into the host.
func packetScenario(t *testing.T, cfg Config) *nft.Model {
	allowAll := tier("default", pols(gnp("allow-all")), pols(gnp("allow-all")))
	// Dual-stack endpoints, as on the veths.
	wep := func(n int, tiers ...*proto.TierInfo) *proto.WorkloadEndpoint {
		ep := wep(caliName(n), podAddr(n), tiers...)
		ep.Ipv6Nets = []string{podAddr6(n) + "/128"}
		return ep
	}
	down := wep(3, allowAll)
	down.State = "inactive"
	spoof := wep(4, allowAll)
	spoof.AllowSpoofedSourcePrefixes = []string{"8.8.8.8/32", spoofAllowed6 + "/128"}
	outs := []Output{
		Workload(cfg, WorkloadInput{ID: wlID("default", "pod-1"), Endpoint: wep(1, allowAll)}),
		Workload(cfg, WorkloadInput{ID: wlID("default", "pod-2"), Endpoint: wep(2)}),
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
	if err := ns.Do(func() (err error) { ln, err = net.Listen(netFor("tcp", addr), addr); return err }); err != nil {
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

// netFor is "tcp4" or "tcp6" (for proto "tcp"; likewise "udp") as the
// address in addr ("host:port") is IPv4 or IPv6, so that a wildcard
// listener is never dual-stack and a dial never changes family.
func netFor(proto, addr string) string {
	if mustAddrPort(addr).Addr().Is4() {
		return proto + "4"
	}
	return proto + "6"
}

// canConnect reports whether a TCP connection from ns to addr succeeds
// within a short timeout (dropped SYNs time out; an unreachable network
// fails fast and counts as blocked too).
func canConnect(ns *netnstest.NS, addr string) bool {
	err := ns.Do(func() error {
		c, err := net.DialTimeout(netFor("tcp", addr), addr, 700*time.Millisecond)
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
	ok, err := udpArrivesErr(from, src, to, dst)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// udpArrivesErr is udpArrives for use off the test goroutine: it returns
// setup errors instead of failing the test.
func udpArrivesErr(from *netnstest.NS, src string, to *netnstest.NS, dst string) (bool, error) {
	network := netFor("udp", dst)
	var rx *net.UDPConn
	if err := to.Do(func() (err error) {
		rx, err = net.ListenUDP(network, net.UDPAddrFromAddrPort(mustAddrPort(dst)))
		return err
	}); err != nil {
		return false, fmt.Errorf("listen udp %s: %v", dst, err)
	}
	defer rx.Close()
	if err := from.Do(func() error {
		c, err := net.DialUDP(network, &net.UDPAddr{IP: net.ParseIP(src)}, net.UDPAddrFromAddrPort(mustAddrPort(dst)))
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
		return false, fmt.Errorf("send udp %s -> %s: %v", src, dst, err)
	}
	rx.SetReadDeadline(time.Now().Add(700 * time.Millisecond))
	buf := make([]byte, 16)
	_, _, err := rx.ReadFromUDP(buf)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("receive udp on %s: %v", dst, err)
	}
	return true, nil
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

			fwd := func(iif, oif, src, dst string, proto uint8, dport uint16) packet {
				return packet{path: pathForward, iif: iif, oif: oif, src: src, dst: dst, proto: proto, sport: 40000, dport: dport}
			}
			in := func(iif, src, dst string, dport uint16) packet {
				return packet{path: pathInput, iif: iif, src: src, dst: dst, proto: protoTCP, sport: 40000, dport: dport}
			}
			spoofed := func(p packet) packet { p.rpfFail = true; return p }
			cases := []struct {
				name string
				ok   func() bool
				p    packet // the first packet of the flow, for the tracer
				want bool
			}{
				{"unknown cali to outside", func() bool { return canConnect(n.pods[9], extAddr+":80") }, fwd("cali9", "eth0", podAddr(9), extAddr, protoTCP, 80), false},
				{"outside to unknown cali", func() bool { return canConnect(n.ext, podAddr(9)+":80") }, fwd("eth0", "cali9", extAddr, podAddr(9), protoTCP, 80), false},
				{"unknown cali to host", func() bool { return canConnect(n.pods[9], podGw(9)+":80") }, in("cali9", podAddr(9), podGw(9), 80), false},
				{"allowed pod to outside", func() bool { return canConnect(n.pods[1], extAddr+":80") }, fwd("cali1", "eth0", podAddr(1), extAddr, protoTCP, 80), true},
				{"outside to allowed pod", func() bool { return canConnect(n.ext, podAddr(1)+":80") }, fwd("eth0", "cali1", extAddr, podAddr(1), protoTCP, 80), true},
				{"pod to pod, allowed both ways", func() bool { return canConnect(n.pods[1], podAddr(4)+":80") }, fwd("cali1", "cali4", podAddr(1), podAddr(4), protoTCP, 80), true},
				{"pod to pod without ingress policy", func() bool { return canConnect(n.pods[1], podAddr(2)+":80") }, fwd("cali1", "cali2", podAddr(1), podAddr(2), protoTCP, 80), false},
				{"admin down pod, ingress", func() bool { return canConnect(n.ext, podAddr(3)+":80") }, fwd("eth0", "cali3", extAddr, podAddr(3), protoTCP, 80), false},
				{"admin down pod, egress", func() bool { return canConnect(n.pods[3], extAddr+":80") }, fwd("cali3", "eth0", podAddr(3), extAddr, protoTCP, 80), false},
				{"workload to host (DefaultEndpointToHostAction DROP)", func() bool { return canConnect(n.pods[1], podGw(1)+":80") }, in("cali1", podAddr(1), podGw(1), 80), false},
				{"spoofed source dropped", func() bool { return udpArrives(t, n.pods[1], "8.8.4.4", n.ext, extAddr+":9999") }, spoofed(fwd("cali1", "eth0", "8.8.4.4", extAddr, protoUDP, 9999)), false},
				{"real source passes", func() bool { return udpArrives(t, n.pods[1], podAddr(1), n.ext, extAddr+":9999") }, fwd("cali1", "eth0", podAddr(1), extAddr, protoUDP, 9999), true},
				{"allowed spoofed source passes", func() bool { return udpArrives(t, n.pods[4], "8.8.8.8", n.ext, extAddr+":9999") }, spoofed(fwd("cali4", "eth0", "8.8.8.8", extAddr, protoUDP, 9999)), true},
				{"host endpoint failsafe ssh", func() bool { return canConnect(n.ext, hostAddr+":22") }, in("eth0", extAddr, hostAddr, 22), true},
				{"host endpoint without policy", func() bool { return canConnect(n.ext, hostAddr+":81") }, in("eth0", extAddr, hostAddr, 81), false},
				{"pre-DNAT accepted, filter honours it", func() bool { return canConnect(n.ext, hostAddr+":80") }, in("eth0", extAddr, hostAddr, 80), true},
				{"untracked accepted, filter honours it", func() bool { return canConnect(n.ext, hostAddr+":8080") }, in("eth0", extAddr, hostAddr, 8080), true},
			}
			kernel := kernelModel(t, n.host)
			for _, c := range cases {
				got := c.ok()
				if got != c.want {
					t.Errorf("%s: got %v, want %v\n%s", c.name, got, c.want, counters(t, n.host))
				}
				traceAgrees(t, kernel, c.name, c.p, got)
			}
		})
	}
}

// TestPacketsInKernelIPv6 replays the IPv4 cases of TestPacketsInKernel
// that have an IPv6 equivalent over the same veths: unknown workload
// interfaces, admin down, RPF and allowed spoofing, and allowed flows. The
// allowed flows also prove that ICMPv6 neighbour discovery between pods and
// the host gets through. The cases run concurrently (the blocked ones wait
// out their timeouts together).
func TestPacketsInKernelIPv6(t *testing.T) {
	netnstest.RequireRoot(t)
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.SharedEndpointChains = shared
			n := newNode(t)
			for _, port := range []string{"22", "80"} {
				listenTCP(t, n.host, hostPort("::", port))
			}
			for i, p := range n.pods {
				listenTCP(t, p, hostPort(podAddr6(i), "80"))
			}
			listenTCP(t, n.ext, hostPort(extAddr6, "80"))

			tcp := func(from *netnstest.NS, to string) func() (bool, error) {
				return func() (bool, error) { return canConnect(from, hostPort(to, "80")), nil }
			}
			udp := func(from *netnstest.NS, src, port string) func() (bool, error) {
				return func() (bool, error) { return udpArrivesErr(from, src, n.ext, hostPort(extAddr6, port)) }
			}
			type packetCase struct {
				name string
				ok   func() (bool, error)
				want bool
				p    packet // the first packet of the flow, for the tracer (after the ruleset is applied)
			}
			run := func(cases []packetCase) {
				t.Helper()
				got := make([]bool, len(cases))
				errs := make([]error, len(cases))
				var wg sync.WaitGroup
				for i, c := range cases {
					wg.Add(1)
					go func() {
						defer wg.Done()
						got[i], errs[i] = c.ok()
					}()
				}
				wg.Wait()
				var kernel *nft.Model
				for i, c := range cases {
					if errs[i] != nil {
						t.Errorf("%s: %v", c.name, errs[i])
						continue
					} else if got[i] != c.want {
						t.Errorf("%s: got %v, want %v\n%s", c.name, got[i], c.want, counters(t, n.host))
					}
					if c.p.path != "" {
						if kernel == nil {
							kernel = kernelModel(t, n.host)
						}
						traceAgrees(t, kernel, c.name, c.p, got[i])
					}
				}
			}

			// Before the table exists everything connects: the topology
			// works, so every "blocked" below is the ruleset's doing.
			run([]packetCase{
				{"no ruleset: unknown cali to outside", tcp(n.pods[9], extAddr6), true, packet{}},
				{"no ruleset: outside to unknown cali", tcp(n.ext, podAddr6(9)), true, packet{}},
				{"no ruleset: spoofed source", udp(n.pods[1], spoofDenied6, "9990"), true, packet{}},
			})
			if t.Failed() {
				t.Fatalf("topology broken: IPv6 does not work without a ruleset")
			}

			applyModel(t, n.host, packetScenario(t, cfg))

			fwd := func(iif, oif, src, dst string, proto uint8, dport uint16) packet {
				return packet{path: pathForward, iif: iif, oif: oif, src: src, dst: dst, proto: proto, sport: 40000, dport: dport}
			}
			in := func(iif, src, dst string, dport uint16) packet {
				return packet{path: pathInput, iif: iif, src: src, dst: dst, proto: protoTCP, sport: 40000, dport: dport}
			}
			spoofed := func(p packet) packet { p.rpfFail = true; return p }
			run([]packetCase{
				{"unknown cali to outside", tcp(n.pods[9], extAddr6), false, fwd("cali9", "eth0", podAddr6(9), extAddr6, protoTCP, 80)},
				{"outside to unknown cali", tcp(n.ext, podAddr6(9)), false, fwd("eth0", "cali9", extAddr6, podAddr6(9), protoTCP, 80)},
				{"unknown cali to host", tcp(n.pods[9], podGw6(9)), false, in("cali9", podAddr6(9), podGw6(9), 80)},
				{"allowed pod to outside", tcp(n.pods[1], extAddr6), true, fwd("cali1", "eth0", podAddr6(1), extAddr6, protoTCP, 80)},
				{"outside to allowed pod", tcp(n.ext, podAddr6(1)), true, fwd("eth0", "cali1", extAddr6, podAddr6(1), protoTCP, 80)},
				{"pod to pod, allowed both ways", tcp(n.pods[1], podAddr6(4)), true, fwd("cali1", "cali4", podAddr6(1), podAddr6(4), protoTCP, 80)},
				{"pod to pod without ingress policy", tcp(n.pods[1], podAddr6(2)), false, fwd("cali1", "cali2", podAddr6(1), podAddr6(2), protoTCP, 80)},
				{"admin down pod, ingress", tcp(n.ext, podAddr6(3)), false, fwd("eth0", "cali3", extAddr6, podAddr6(3), protoTCP, 80)},
				{"admin down pod, egress", tcp(n.pods[3], extAddr6), false, fwd("cali3", "eth0", podAddr6(3), extAddr6, protoTCP, 80)},
				{"workload to host (DefaultEndpointToHostAction DROP)", tcp(n.pods[1], podGw6(1)), false, in("cali1", podAddr6(1), podGw6(1), 80)},
				{"spoofed source dropped", udp(n.pods[1], spoofDenied6, "9991"), false, spoofed(fwd("cali1", "eth0", spoofDenied6, extAddr6, protoUDP, 9991))},
				{"real source passes", udp(n.pods[1], podAddr6(1), "9992"), true, fwd("cali1", "eth0", podAddr6(1), extAddr6, protoUDP, 9992)},
				{"allowed spoofed source passes", udp(n.pods[4], spoofAllowed6, "9993"), true, spoofed(fwd("cali4", "eth0", spoofAllowed6, extAddr6, protoUDP, 9993))},
				{"host endpoint failsafe ssh", func() (bool, error) { return canConnect(n.ext, hostPort(hostAddr6, "22")), nil }, true, in("eth0", extAddr6, hostAddr6, 22)},
			})
		})
	}
}

// kernelModel reads the packet table back from ns's kernel and decodes it:
// the table `nftep explain` traces.
func kernelModel(t *testing.T, ns *netnstest.NS) *nft.Model {
	t.Helper()
	k, err := nft.ReadKernelTable(context.Background(), ns.Fd(), nft.FamilyINet, DefaultTableName)
	if err != nil {
		t.Fatalf("read the kernel's table: %v", err)
	}
	return k.Model
}

// traceAgrees runs p, the first packet of a flow a kernel test sent, through
// the tracer behind `nftep explain` on the table the kernel holds, and checks
// that its verdict is what the real packet met and that a drop names the rule
// that decided it.
func traceAgrees(t *testing.T, kernel *nft.Model, name string, p packet, passed bool) {
	t.Helper()
	res := tracePacket(t, kernel, p)
	want := "drop"
	if passed {
		want = "accept"
	}
	if res.verdict != want {
		t.Errorf("%s: tracer on the kernel's table: %s, the real packet: %s\n%s", name, res.verdict, want, res)
	}
	if want == "drop" && res.decider == "" {
		t.Errorf("%s: tracer: dropped, but no deciding rule named\n%s", name, res)
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

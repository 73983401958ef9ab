package dataplane_test

// natOutgoing with packets (issue 21): node1 has a pod in a natOutgoing
// pool (p11, 10.65.1.1, fd00:65::1:1) and one in a plain pool (p13,
// 10.66.1.1, fd00:66::1:1); node2 has a pod in a third pool (p21,
// 10.67.2.1, fd00:67::2:1); the external host (192.168.60.100,
// fd00:60::100) also holds an address of a LoadBalancer-only pool
// (10.96.0.10, fd00:96::10). Routes between the nodes and back from the
// external host are static, as BGP would program them. A listener records
// the source address and port it sees.

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gproto "google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/proto"
)

// td wraps a Felix message in its ToDataplane envelope.
func td(m gproto.Message) *proto.ToDataplane {
	env := &proto.ToDataplane{}
	v := env.ProtoReflect()
	od := v.Descriptor().Oneofs().ByName("payload")
	for i := 0; i < od.Fields().Len(); i++ {
		fd := od.Fields().Get(i)
		if fd.Message() != nil && fd.Message().FullName() == m.ProtoReflect().Descriptor().FullName() {
			v.Set(fd, protoreflect.ValueOfMessage(m.ProtoReflect()))
			return env
		}
	}
	panic(fmt.Sprintf("no ToDataplane field for %T", m))
}

func natPool(cidr string, masq bool, uses ...string) *proto.ToDataplane {
	if len(uses) == 0 {
		uses = []string{"Workload", "Tunnel"}
	}
	return td(&proto.IPAMPoolUpdate{Id: strings.ReplaceAll(cidr, "/", "-"), Pool: &proto.IPAMPool{Cidr: cidr, Masquerade: masq, AllowedUses: uses}})
}

func natPod(node, name string, v4, v6 string) *proto.ToDataplane {
	return td(&proto.WorkloadEndpointUpdate{
		Id: &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: "default/" + name, EndpointId: "eth0"},
		Endpoint: &proto.WorkloadEndpoint{State: "active", Name: "cali" + strings.TrimPrefix(name, "p"),
			Mac: fmt.Sprintf("02:00:00:00:00:%s", strings.TrimPrefix(name, "p")), ProfileIds: []string{"allow-all"},
			Ipv4Nets: []string{v4 + "/32"}, Ipv6Nets: []string{v6 + "/128"}},
	})
}

// natStream is node n's Felix stream with config kv.
func natStream(n int, kv map[string]string) []*proto.ToDataplane {
	cfg := map[string]string{"FelixHostname": fmt.Sprintf("node%d", n)}
	for k, v := range kv {
		cfg[k] = v
	}
	out := []*proto.ToDataplane{
		td(&proto.ConfigUpdate{Config: cfg}),
		td(&proto.HostMetadataUpdate{Hostname: "node1", Ipv4Addr: "192.168.60.11/24", Ipv6Addr: "fd00:60::11/64"}),
		td(&proto.HostMetadataUpdate{Hostname: "node2", Ipv4Addr: "192.168.60.12/24", Ipv6Addr: "fd00:60::12/64"}),
		td(&proto.ActiveProfileUpdate{Id: &proto.ProfileID{Name: "allow-all"}, Profile: &proto.Profile{
			InboundRules: []*proto.Rule{{Action: "allow"}}, OutboundRules: []*proto.Rule{{Action: "allow"}}}}),
		natPool("10.65.0.0/16", true), natPool("fd00:65::/64", true),
		natPool("10.66.0.0/16", false), natPool("fd00:66::/64", false),
		natPool("10.67.0.0/16", false), natPool("fd00:67::/64", false),
		natPool("10.96.0.0/16", false, "LoadBalancer"), natPool("fd00:96::/64", false, "LoadBalancer"),
	}
	if n == 1 {
		out = append(out, natPod("node1", "p11", "10.65.1.1", "fd00:65::1:1"), natPod("node1", "p13", "10.66.1.1", "fd00:66::1:1"))
	} else {
		out = append(out, natPod("node2", "p21", "10.67.2.1", "fd00:67::2:1"))
	}
	return append(out, td(&proto.Encapsulation{}), td(&proto.InSync{}))
}

// natLab is the cluster with node1 running under config kv.
type natLab struct {
	*cluster
}

func newNATLab(t *testing.T, kv map[string]string) *natLab {
	t.Helper()
	streams := [2][]*proto.ToDataplane{natStream(1, kv), natStream(2, nil)}
	c := newCluster(t, streams)
	n1, n2 := c.nodes[0].ns, c.nodes[1].ns
	for _, r := range [][2]string{{"10.67.0.0/16", "192.168.60.12"}, {"fd00:67::/64", "fd00:60::12"},
		{"10.96.0.0/16", "192.168.60.100"}, {"fd00:96::/64", "fd00:60::100"}} {
		n1.Run(t, "ip", "route", "add", r[0], "via", r[1])
	}
	for _, r := range [][2]string{{"10.65.0.0/16", "192.168.60.11"}, {"fd00:65::/64", "fd00:60::11"},
		{"10.66.0.0/16", "192.168.60.11"}, {"fd00:66::/64", "fd00:60::11"}} {
		n2.Run(t, "ip", "route", "add", r[0], "via", r[1])
		// The external host routes back to the pods too, so that an
		// address that is not translated still gets its answer (the
		// listener records what arrived either way).
		c.ext.Run(t, "ip", "route", "add", r[0], "via", r[1])
	}
	c.ext.AddAddr(t, "eth0", "10.96.0.10/32")
	c.ext.AddAddr(t, "eth0", "fd00:96::10/128")
	// A second address of node1 for NATOutgoingAddress.
	n1.AddAddr(t, "eth0", "192.168.60.21/24")
	c.nodes[0].start(t, streams[0])
	c.nodes[1].start(t, streams[1])
	l := &natLab{c}
	l.waitNAT(t, true)
	// Each node must have programmed its pods' routes too, or a probe
	// that races the other node's first apply meets "network is
	// unreachable" there.
	for _, p := range c.pods {
		n := c.nodes[0]
		if strings.HasPrefix(p.name, "p2") {
			n = c.nodes[1]
		}
		require.Eventually(t, func() bool {
			out, err := n.ns.Output("ip", "route", "show", p.v4.String())
			return err == nil && strings.Contains(out, "dev "+p.iface)
		}, 5*time.Second, 5*time.Millisecond, "%s: the route to %s", n.name, p.name)
	}
	return l
}

// waitNAT waits until node1's natOutgoing chain has (or has not) its rules.
func (l *natLab) waitNAT(t *testing.T, active bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		out, err := l.nodes[0].ns.Output("nft", "list", "chain", "inet", "nftep", "nat-outgoing")
		return err == nil && strings.Contains(out, "masq-pools-v4") == active
	}, 5*time.Second, 5*time.Millisecond, fmt.Sprintf("natOutgoing active=%v on node1", active))
}

// source dials addr (TCP) from namespace from to a listener in namespace
// to and returns the source address and port the listener saw.
func source(t *testing.T, from, to *netnstest.NS, addr string) netip.AddrPort {
	t.Helper()
	var ln net.Listener
	require.NoError(t, to.Do(func() (err error) { ln, err = net.Listen("tcp", addr); return err }))
	defer ln.Close()
	seen := make(chan netip.AddrPort, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		seen <- c.RemoteAddr().(*net.TCPAddr).AddrPort()
		c.Close()
	}()
	var conn net.Conn
	require.NoError(t, from.Do(func() (err error) { conn, err = net.DialTimeout("tcp", addr, 3*time.Second); return err }), "dial %s", addr)
	defer conn.Close()
	select {
	case a := <-seen:
		return netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
	case <-time.After(3 * time.Second):
		t.Fatalf("the listener on %s saw no connection", addr)
	}
	return netip.AddrPort{}
}

func hostPort(a string, port int) string {
	return netip.AddrPortFrom(netip.MustParseAddr(a), uint16(port)).String()
}

// fam picks the IPv4 or IPv6 address.
func fam(v6 bool, a4, a6 string) string {
	if v6 {
		return a6
	}
	return a4
}

// TestKernelNATOutgoing checks natOutgoing with the default keys: a
// natOutgoing pod reaching the external host arrives with the node's
// address, a plain-pool pod with its own; to another node's pod (another
// pool) the pod keeps its address; to a LoadBalancer-only pool's address it
// is masqueraded; a Calico host (no exclusion) sees the node's address.
// Both families.
func TestKernelNATOutgoing(t *testing.T) {
	l := newNATLab(t, nil)
	p11, p13, p21 := l.pods["p11"].ns, l.pods["p13"].ns, l.pods["p21"].ns
	for _, v6 := range []bool{false, true} {
		node1 := fam(v6, "192.168.60.11", "fd00:60::11")
		ext := hostPort(fam(v6, "192.168.60.100", "fd00:60::100"), 9000)
		assert.Equal(t, node1, source(t, p11, l.ext, ext).Addr().String(), "natOutgoing pod → external (IPv6 %v)", v6)
		assert.Equal(t, fam(v6, "10.66.1.1", "fd00:66::1:1"), source(t, p13, l.ext, ext).Addr().String(), "plain-pool pod → external (IPv6 %v)", v6)
		assert.Equal(t, fam(v6, "10.65.1.1", "fd00:65::1:1"),
			source(t, p11, p21, hostPort(fam(v6, "10.67.2.1", "fd00:67::2:1"), 9001)).Addr().String(), "natOutgoing pod → another node's pod (IPv6 %v)", v6)
		assert.Equal(t, node1, source(t, p11, l.ext, hostPort(fam(v6, "10.96.0.10", "fd00:96::10"), 9002)).Addr().String(),
			"natOutgoing pod → LoadBalancer-only pool (IPv6 %v)", v6)
		assert.Equal(t, node1, source(t, p11, l.nodes[1].ns, hostPort(fam(v6, "192.168.60.12", "fd00:60::12"), 9003)).Addr().String(),
			"natOutgoing pod → a Calico host, IPPoolsOnly (IPv6 %v)", v6)
	}
}

// TestKernelNATOutgoingKeys: NATPortRange, NATOutgoingAddress and
// NATOutgoingExclusions=IPPoolsAndHostIPs together, then the interface
// filter (exact, not matching; and eth+ as a prefix).
func TestKernelNATOutgoingKeys(t *testing.T) {
	t.Run("range address exclusions", func(t *testing.T) {
		l := newNATLab(t, map[string]string{"NATPortRange": "40000:40100", "NATOutgoingAddress": "192.168.60.21", "NATOutgoingExclusions": "IPPoolsAndHostIPs"})
		p11 := l.pods["p11"].ns
		for _, v6 := range []bool{false, true} {
			for i := range 5 {
				s := source(t, p11, l.ext, hostPort(fam(v6, "192.168.60.100", "fd00:60::100"), 9100+i))
				assert.Equal(t, fam(v6, "192.168.60.21", "fd00:60::11"), s.Addr().String(), "NATOutgoingAddress in IPv4, masquerade in IPv6 (IPv6 %v)", v6)
				assert.True(t, s.Port() >= 40000 && s.Port() <= 40100, "source port %d inside NATPortRange (IPv6 %v)", s.Port(), v6)
			}
			assert.Equal(t, fam(v6, "10.65.1.1", "fd00:65::1:1"),
				source(t, p11, l.nodes[1].ns, hostPort(fam(v6, "192.168.60.12", "fd00:60::12"), 9200)).Addr().String(),
				"IPPoolsAndHostIPs: a Calico host sees the pod (IPv6 %v)", v6)
		}
	})
	for _, tc := range []struct {
		filter string
		masq   bool
	}{{"eth1", false}, {"eth0", true}, {"eth+", true}} {
		t.Run("interface "+tc.filter, func(t *testing.T) {
			l := newNATLab(t, map[string]string{"IptablesNATOutgoingInterfaceFilter": tc.filter})
			for _, v6 := range []bool{false, true} {
				want := fam(v6, "10.65.1.1", "fd00:65::1:1")
				if tc.masq {
					want = fam(v6, "192.168.60.11", "fd00:60::11")
				}
				assert.Equal(t, want, source(t, l.pods["p11"].ns, l.ext, hostPort(fam(v6, "192.168.60.100", "fd00:60::100"), 9300)).Addr().String(),
					"leaving eth0 with filter %s (IPv6 %v)", tc.filter, v6)
			}
		})
	}
}

// TestKernelNATOutgoingLive: flipping natOutgoing off keeps an established
// flow translated and loses none of its packets while new connections keep
// the pod's address; removing the pool stops masquerading, adding it back
// restores it, and adding a pool that holds the external host's address
// makes the external host a pool destination.
func TestKernelNATOutgoingLive(t *testing.T) {
	l := newNATLab(t, nil)
	n1 := l.nodes[0]
	p11 := l.pods["p11"].ns
	ext := hostPort("192.168.60.100", 9400)
	extUDP := "192.168.60.100:9500"

	// A UDP flow from p11 to the external host, a datagram every 5 ms,
	// before, during and after the flip.
	var rc net.PacketConn
	require.NoError(t, l.ext.Do(func() (err error) { rc, err = net.ListenPacket("udp", extUDP); return err }))
	defer rc.Close()
	var (
		mu      sync.Mutex
		got     = map[int]bool{}
		sources = map[string]int{}
	)
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := rc.ReadFrom(buf)
			if err != nil {
				return
			}
			var seq int
			fmt.Sscanf(string(buf[:n]), "%d", &seq)
			mu.Lock()
			got[seq] = true
			sources[from.(*net.UDPAddr).IP.String()]++
			mu.Unlock()
		}
	}()
	var sc net.Conn
	require.NoError(t, p11.Do(func() (err error) { sc, err = net.Dial("udp", extUDP); return err }))
	defer sc.Close()
	stop := make(chan struct{})
	sent := make(chan int)
	go func() {
		i := 0
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				sent <- i
				return
			case <-tick.C:
				fmt.Fprintf(sc, "%d", i)
				i++
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)

	// 1. natOutgoing true → false on 10.65.0.0/16 (and its IPv6 twin).
	n1.send(t, natPool("10.65.0.0/16", false), natPool("fd00:65::/64", false))
	l.waitNAT(t, false)
	assert.Equal(t, "10.65.1.1", source(t, p11, l.ext, ext).Addr().String(), "a new connection after the flip keeps the pod's address")
	time.Sleep(200 * time.Millisecond)
	close(stop)
	n := <-sent
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == n
	}, 5*time.Second, 5*time.Millisecond, "every datagram of the established flow arrived")
	mu.Lock()
	assert.Equal(t, map[string]int{"192.168.60.11": n}, sources, "the established flow stays translated through the flip")
	mu.Unlock()
	t.Logf("established UDP flow: %d datagrams sent across the flip, %d received", n, len(got))

	// 2. Back on, then the pool removed: no natOutgoing pool, no rule.
	n1.send(t, natPool("10.65.0.0/16", true))
	l.waitNAT(t, true)
	assert.Equal(t, "192.168.60.11", source(t, p11, l.ext, ext).Addr().String(), "natOutgoing back on")
	n1.send(t, td(&proto.IPAMPoolRemove{Id: "10.65.0.0-16"}))
	l.waitNAT(t, false)
	assert.Equal(t, "10.65.1.1", source(t, p11, l.ext, ext).Addr().String(), "pool removed: nothing to masquerade")

	// 3. Added again, and a pool that holds the external host: traffic
	// to it stays inside the pools and keeps the pod's address.
	n1.send(t, natPool("10.65.0.0/16", true))
	l.waitNAT(t, true)
	assert.Equal(t, "192.168.60.11", source(t, p11, l.ext, ext).Addr().String(), "pool added back")
	n1.send(t, natPool("192.168.60.96/28", false))
	require.Eventually(t, func() bool {
		out, _ := n1.ns.Output("nft", "list", "set", "inet", "nftep", "all-pools-v4")
		return strings.Contains(out, "192.168.60.96/28")
	}, 5*time.Second, 5*time.Millisecond, "the new pool in all-pools-v4")
	assert.Equal(t, "10.65.1.1", source(t, p11, l.ext, ext).Addr().String(), "destination inside a pool: not masqueraded")
}

package overlay

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/routes"
)

// node runs a Manager over Devices on a fake kernel, as the engine does.
type node struct {
	m   *Manager
	d   *Devices
	nl  *fakeNetlink
	rt  *fakeRoutes
	cfg Config
	// problems reported through OnProblem.
	problems []string
}

func newNode(t *testing.T, kv map[string]string, ipip bool) *node {
	t.Helper()
	c := felix.NewConfig(kv)
	cfg := ParseFelixConfig(c, 3, true, DefaultPort)
	require.NoError(t, c.Err())
	n := &node{nl: newFakeNetlink(ipip), rt: &fakeRoutes{by: map[string][]routes.Target{}}, cfg: cfg}
	n.d = NewDevices(DevicesConfig{Netlink: n.nl, MTUFile: t.TempDir() + "/calico/mtu",
		OnProblem: func(f, _ string) { n.problems = append(n.problems, f) }})
	n.m = NewManager(cfg, Deps{Routes: n.rt, Devices: n.d})
	return n
}

// feed hands messages to the manager (as the engine: only the types it is
// registered for), then computes and applies.
func (n *node) feed(t *testing.T, msgs []*proto.ToDataplane, extra ...any) {
	t.Helper()
	for _, x := range extra {
		n.m.OnUpdate(x)
	}
	for _, m := range msgs {
		switch p := payload(m).(type) {
		case *proto.RouteUpdate, *proto.RouteRemove, *proto.VXLANTunnelEndpointUpdate, *proto.VXLANTunnelEndpointRemove,
			*proto.HostMetadataUpdate, *proto.HostMetadataRemove, *proto.Encapsulation:
			n.m.OnUpdate(p)
		}
	}
	require.NoError(t, n.m.ResolveUpdateBatch())
	require.NoError(t, n.m.CompleteDeferredWork())
	require.NoError(t, n.d.Apply())
}

// Scenario 4 of the recordings (IPIP for IPv4, no encapsulation for IPv6,
// ProgramClusterRoutes at its default EnabledIPIPOnly) on node1: tunl0 is
// created with its tunnel address, MTU 1480 and up; node2's block goes
// `via 192.168.60.12 dev tunl0 onlink proto 80 mtu 1480`; the local block
// is blackholed; IPv6 routes are BIRD's; the VXLAN devices go.
func TestScenario4IPIP(t *testing.T) {
	msgs := recording(t, "scenario4-n1.bin")
	n := newNode(t, configOf(msgs), true)
	n.nl.addLink(testVXLAN(VXLANDevice)) // left by scenario 3
	n.feed(t, msgs, ifaceAddrs("192.168.60.11", "fd00:60::11"))

	assert.Equal(t, []string{
		"10.65.2.0/26 via 192.168.60.12 dev tunl0 onlink proto 80 mtu 1480",
		"blackhole 10.65.1.0/26 proto 80",
	}, n.rt.lines())
	assert.Equal(t, []string{
		"addr add 10.65.1.0/32 dev tunl0",
		"link add tunl0 type ipip",
		"link del vxlan.calico",
		"link set tunl0 up",
	}, n.nl.takeCalls())
	l, err := n.nl.LinkByName(IPIPDevice)
	require.NoError(t, err)
	assert.Equal(t, 1480, l.Attrs().MTU)
	assert.Empty(t, n.problems)

	// Nothing changed: nothing is read or written.
	n.feed(t, nil)
	assert.Empty(t, n.nl.takeCalls())
	mtu := readFile(t, n.d.cfg.MTUFile)
	assert.Equal(t, "1480", mtu, "the MTU file holds IPIP's MTU")
}

// On a kernel without IPIP (this one: CONFIG_NET_IPIP unset), the ipip
// device cannot be created: that is reported once (OnProblem, Problems),
// not retried in a loop, and the rest still works.
func TestIPIPUnsupported(t *testing.T) {
	msgs := recording(t, "scenario4-n1.bin")
	n := newNode(t, configOf(msgs), false)
	n.feed(t, msgs, ifaceAddrs("192.168.60.11", "fd00:60::11"))
	assert.Equal(t, []string{"link add tunl0 type ipip"}, n.nl.takeCalls())
	assert.Equal(t, []string{"ipip"}, n.problems)
	assert.Contains(t, n.d.Problems()["ipip"], "CONFIG_NET_IPIP")
	// The routes are wanted still (the route table skips a missing
	// device); the blackhole is programmed.
	assert.Contains(t, n.rt.lines(), "blackhole 10.65.1.0/26 proto 80")

	// A change of the device's state asks for a check: no new attempt
	// before the next resync.
	n.d.Check(IPIPDevice)
	n.feed(t, nil)
	assert.Empty(t, n.nl.takeCalls())
	assert.Equal(t, []string{"ipip"}, n.problems, "reported once")
	n.d.QueueResync()
	n.feed(t, nil)
	assert.Equal(t, []string{"link add tunl0 type ipip"}, n.nl.takeCalls(), "a resync tries again")
	assert.Equal(t, []string{"ipip"}, n.problems, "still reported once")
}

// Scenario 3 on node1 below the kernel: the VXLAN devices with their
// attributes, peers and routes.
func TestScenario3VXLAN(t *testing.T) {
	msgs := recording(t, "scenario3-n1.bin")
	n := newNode(t, configOf(msgs), false)
	n.feed(t, msgs, ifaceAddrs("192.168.60.11", "fd00:60::11"))
	assert.Equal(t, []string{
		"10.65.2.0/26 via 10.65.2.0 dev vxlan.calico onlink mtu 1450",
		"blackhole 10.65.1.0/26 proto 80",
		"blackhole fd00:65::1:0/122 proto 80",
		"fd00:65::2:0/122 via fd00:65::2:0 dev vxlan-v6.calico onlink mtu 1430",
	}, n.rt.lines())
	st := n.m.State()
	require.Equal(t, Want, st.VXLAN[0].Mode)
	assert.Equal(t, VXLANLink{Name: VXLANDevice, VNI: 4096, Port: 4789, Parent: "eth0", Local: netip.MustParseAddr("192.168.60.11"),
		MAC: VTEPMAC("node1", false), MTU: 1450, Addr: netip.MustParseAddr("10.65.1.0")}, st.VXLAN[0].Device)
	require.Len(t, st.VXLAN[1].Peers, 1)
	assert.Equal(t, "node2 fd00:65::2:0 lladdr 66:32:42:ed:de:d5 dst fd00:60::12", st.VXLAN[1].Peers[0].String())
	assert.Equal(t, Strip, st.IPIP.Mode, "IPIP implicitly off: tunl0 is stripped of its addresses if it exists")
	assert.Equal(t, 1430, st.PodMTU)

	// A device whose VNI differs is recreated.
	n.nl.takeCalls()
	n.nl.links[VXLANDevice].(*netlink.Vxlan).VxlanId = 4097
	n.d.Check(VXLANDevice)
	n.feed(t, nil)
	calls := n.nl.takeCalls()
	assert.Contains(t, calls, "link del vxlan.calico")
	assert.Contains(t, calls, "link add vxlan.calico type vxlan")
}

// The status of scenario 3 on node1, as `nftep status` prints it.
func TestStatusFormat(t *testing.T) {
	msgs := recording(t, "scenario3-n1.bin")
	n := newNode(t, configOf(msgs), false)
	n.feed(t, msgs, ifaceAddrs("192.168.60.11", "fd00:60::11"))
	var b strings.Builder
	n.m.Status(nil).Format(&b)
	assert.Equal(t, `cluster networking: vxlan, vxlan-v6
DEVICE           MODE   MTU   ADDRESS       MAC                VNI   PORT  PARENT
vxlan.calico     want   1450  10.65.1.0     66:f9:37:c3:7e:94  4096  4789  eth0
vxlan-v6.calico  want   1430  fd00:65::1:0  66:0f:35:f2:60:df  4096  4789  eth0
tunl0            strip  -     -             -                  -     -     -
REMOTE VTEP  DEVICE           ADDRESS       MAC                UNDERLAY
node2        vxlan.calico     10.65.2.0     66:2d:bf:44:a6:8b  192.168.60.12
node2        vxlan-v6.calico  fd00:65::2:0  66:32:42:ed:de:d5  fd00:60::12
cluster routes:
  blackhole 10.65.1.0/26 proto 80
  10.65.2.0/26 via 10.65.2.0 dev vxlan.calico onlink mtu 1450
  blackhole fd00:65::1:0/122 proto 80
  fd00:65::2:0/122 via fd00:65::2:0 dev vxlan-v6.calico onlink mtu 1430
`, b.String())
}

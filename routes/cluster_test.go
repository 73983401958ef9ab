package routes

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Cluster routes (package overlay's targets): via a gateway on a tunnel
// device with onlink and an MTU, same-subnet routes with protocol 80,
// blackholes on the pseudo-interface; and Felix's ownership rules of the
// main table (cluster-networking spec §6.3, edge case 16): a foreign
// protocol-80 route goes, any route on the VXLAN device goes (but the
// kernel's own), BIRD's routes on tunl0 go when nftep owns them, a static
// one there stays.
func TestClusterRoutesAndOwnership(t *testing.T) {
	k := newFakeKernel()
	eth0 := k.addLink("eth0", true)
	vx := k.addLink("vxlan.calico", true)
	tunl := k.addLink("tunl0", true)
	k.addRoute(netlink.Route{Dst: ipnet("10.66.0.0/26"), LinkIndex: eth0, Protocol: 80, Scope: netlink.SCOPE_LINK})
	k.addRoute(netlink.Route{Dst: ipnet("10.67.0.0/26"), LinkIndex: vx, Protocol: unix.RTPROT_STATIC, Scope: netlink.SCOPE_LINK})
	k.addRoute(netlink.Route{Dst: ipnet("10.67.1.0/26"), LinkIndex: vx, Protocol: unix.RTPROT_KERNEL, Scope: netlink.SCOPE_LINK})
	k.addRoute(netlink.Route{Dst: ipnet("10.68.0.0/26"), LinkIndex: tunl, Protocol: unix.RTPROT_BIRD, Scope: netlink.SCOPE_LINK})
	k.addRoute(netlink.Route{Dst: ipnet("10.68.1.0/26"), LinkIndex: tunl, Protocol: unix.RTPROT_STATIC, Scope: netlink.SCOPE_LINK})
	tbl, _ := newTestTable(t, k, Config{OwnedDevices: []OwnedDevice{
		{Name: "vxlan.calico", Family: netlink.FAMILY_V4},
		{Name: "tunl0", Family: netlink.FAMILY_V4, Protocols: []netlink.RouteProtocol{unix.RTPROT_BIRD}},
	}})
	gw := netip.MustParseAddr
	tbl.SetRoutes("vxlan.calico", []Target{
		{CIDR: pfx("10.65.2.0/26"), Gateway: gw("10.65.2.0"), OnLink: true, MTU: 1450, Priority: MetricZero},
		{CIDR: pfx("10.65.9.1/32"), MTU: 1450},
	})
	tbl.SetRoutes("eth0", []Target{{CIDR: pfx("10.65.3.0/26"), Gateway: gw("192.168.60.13"), OnLink: true, Protocol: 80, Priority: MetricZero}})
	tbl.SetRoutes(BlackholeIface, []Target{
		{CIDR: pfx("10.65.1.0/26"), Blackhole: true, Protocol: 80, Priority: MetricZero},
		{CIDR: pfx("fd00:65::1:0/122"), Blackhole: true, Protocol: 80},
	})
	// A blackhole on a real interface, or a target elsewhere on the
	// pseudo-interface, is refused.
	tbl.SetRoutes("eth1", []Target{{CIDR: pfx("10.99.0.0/24"), Blackhole: true}})
	mustApply(t, tbl)
	assertDump(t, k, `
10.65.2.0/26 via 10.65.2.0 dev vxlan.calico onlink mtu 1450 proto boot scope global metric 0
10.65.3.0/26 via 192.168.60.13 dev eth0 onlink proto 80 scope global metric 0
10.65.9.1/32 dev vxlan.calico mtu 1450 proto boot scope link metric 1024
10.67.1.0/26 dev vxlan.calico proto kernel scope link metric 0
10.68.1.0/26 dev tunl0 proto static scope link metric 0
blackhole 10.65.1.0/26 proto 80 scope global metric 0
blackhole fd00:65::1:0/122 proto 80 metric 1024
`)

	// A second Apply writes nothing: the kernel's routes compare equal.
	k.resetCalls()
	tbl.QueueResync()
	mustApply(t, tbl)
	assert.Zero(t, writes(k.callCounts()), "a resync of what is programmed writes nothing")

	// A route event of someone deleting a cluster route calls for an
	// Apply, which puts it back; our own write's event calls for none.
	r := k.allRoutes()
	var del netlink.Route
	for _, x := range r {
		if x.Dst.String() == "10.65.2.0/26" {
			del = x
		}
	}
	assert.NoError(t, k.RouteDel(&del))
	assert.True(t, tbl.OnRouteEvent(RouteEvent{Route: del, Deleted: true}))
	mustApply(t, tbl)
	assert.False(t, tbl.OnRouteEvent(RouteEvent{Route: del}), "the event of our own write changes nothing")
	assert.Contains(t, k.dump(), "10.65.2.0/26 via 10.65.2.0 dev vxlan.calico onlink mtu 1450")
}

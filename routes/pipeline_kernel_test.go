package routes

import (
	"fmt"
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftep/nftep/internal/netnstest"
)

// TestKernelPipeEncodesAsTheLibrary: every shape of route the table writes
// (device route with a source, gateway onlink with an mtu, blackhole,
// IPv6, metric 0, TOS) and a permanent neighbour, written through the pipe
// into one namespace and through netlink.Handle into another with the
// same links, read back the same.
func TestKernelPipeEncodesAsTheLibrary(t *testing.T) {
	var nss [2]*netnstest.NS
	for i := range nss {
		ns, peer := netnstest.New(t), netnstest.New(t)
		netnstest.Veth(t, ns, "cali1", peer, "p1")
		netnstest.Veth(t, ns, "eth0", peer, "up0")
		ns.AddAddr(t, "eth0", "192.0.2.2/24")
		ns.AddAddr(t, "eth0", "2001:db8::2/64")
		waitRunning(t, ns, "cali1")
		waitRunning(t, ns, "eth0")
		nss[i] = ns
	}
	build := func(ns *netnstest.NS) ([]*netlink.Route, []*netlink.Neigh) {
		cali := ns.Link(t, "cali1").Attrs().Index
		eth0 := ns.Link(t, "eth0").Attrs().Index
		tbl := &Table{}
		rs := []*netlink.Route{
			tbl.addRoute(routeKey{dst: pfx("10.65.0.1/32"), metric: 1024},
				kroute{ifindex: cali, proto: 3, scope: netlink.SCOPE_LINK, typ: unix.RTN_UNICAST, src: netip.MustParseAddr("192.0.2.2")}),
			tbl.addRoute(routeKey{dst: pfx("10.65.0.2/32")},
				kroute{ifindex: cali, proto: 80, scope: netlink.SCOPE_LINK, typ: unix.RTN_UNICAST}),
			tbl.addRoute(routeKey{dst: pfx("10.66.0.0/26"), metric: 1024},
				kroute{ifindex: eth0, proto: 3, scope: netlink.SCOPE_UNIVERSE, typ: unix.RTN_UNICAST, gw: netip.MustParseAddr("192.0.2.9"), onlink: true, mtu: 1410}),
			tbl.addRoute(routeKey{dst: pfx("10.67.0.0/26"), metric: 1024},
				kroute{proto: 3, scope: netlink.SCOPE_UNIVERSE, typ: unix.RTN_BLACKHOLE}),
			tbl.addRoute(routeKey{dst: pfx("10.68.0.0/24"), metric: 7, tos: 0x10},
				kroute{ifindex: cali, proto: 3, scope: netlink.SCOPE_LINK, typ: unix.RTN_UNICAST}),
			tbl.addRoute(routeKey{dst: pfx("2001:db8:65::1/128"), metric: 1024},
				kroute{ifindex: cali, proto: 3, scope: netlink.SCOPE_UNIVERSE, typ: unix.RTN_UNICAST}),
			tbl.addRoute(routeKey{dst: pfx("2001:db8:66::/112"), metric: 1024},
				kroute{ifindex: eth0, proto: 3, scope: netlink.SCOPE_UNIVERSE, typ: unix.RTN_UNICAST, gw: netip.MustParseAddr("2001:db8::9"), mtu: 1390}),
		}
		neighs := []*netlink.Neigh{{LinkIndex: cali, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
			IP: net.ParseIP("10.65.0.1").To4(), HardwareAddr: mac("ee:ee:ee:ee:ee:01")}}
		return rs, neighs
	}

	p, err := openPipe(nss[0].Handle())
	require.NoError(t, err)
	defer p.close()
	rs, neighs := build(nss[0])
	for i, err := range p.RouteReplaceAll(rs) {
		require.NoError(t, err, "route %d", i)
	}
	for i, err := range p.NeighSetAll(neighs) {
		require.NoError(t, err, "neighbour %d", i)
	}
	rs, neighs = build(nss[1])
	for _, r := range rs {
		require.NoError(t, nss[1].Netlink().RouteReplace(r), "route %s", r)
	}
	for _, n := range neighs {
		require.NoError(t, nss[1].Netlink().NeighSet(n))
	}
	for _, args := range [][]string{
		{"-d", "-4", "route", "show", "table", "main"},
		{"-d", "-6", "route", "show", "table", "main"},
		{"-4", "neigh", "show", "nud", "permanent"},
	} {
		want := ipOut(t, nss[1], args...)
		assert.NotEmpty(t, want)
		assert.Equal(t, want, ipOut(t, nss[0], args...), "ip %v", args)
	}
}

// TestKernelPipeErrorsPerRequest: of more requests than one window, the
// ones the kernel refuses get their own error (with the kernel's message)
// and every other one is done.
func TestKernelPipeErrorsPerRequest(t *testing.T) {
	ns, peer := netnstest.New(t), netnstest.New(t)
	netnstest.Veth(t, ns, "cali1", peer, "p1")
	cali := waitRunning(t, ns, "cali1")
	p, err := openPipe(ns.Handle())
	require.NoError(t, err)
	defer p.close()

	const n = 2*pipeWindow + 17
	bad := map[int]bool{3: true, pipeWindow: true, n - 1: true}
	var rs []*netlink.Route
	var neighs []*netlink.Neigh
	for i := range n {
		ip := net.IPv4(10, 65, byte(i>>8), byte(i)).To4()
		index := cali
		if bad[i] {
			index = 99999 // no such interface
		}
		rs = append(rs, &netlink.Route{LinkIndex: index, Dst: &net.IPNet{IP: ip, Mask: net.CIDRMask(32, 32)},
			Table: unix.RT_TABLE_MAIN, Protocol: 3, Scope: netlink.SCOPE_LINK, Priority: 1024})
		neighs = append(neighs, &netlink.Neigh{LinkIndex: index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
			IP: ip, HardwareAddr: net.HardwareAddr{0xee, 0xee, 0, 0, byte(i >> 8), byte(i)}})
	}
	check := func(what string, errs []error) {
		t.Helper()
		require.Len(t, errs, n)
		for i, err := range errs {
			if bad[i] {
				assert.ErrorIs(t, err, unix.ENODEV, "%s %d", what, i)
				assert.True(t, isLinkGone(err), "%s %d: %v", what, i, err)
			} else {
				assert.NoError(t, err, "%s %d", what, i)
			}
		}
	}
	check("route", p.RouteReplaceAll(rs))
	check("neighbour", p.NeighSetAll(neighs))
	routes, err := ns.Netlink().RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{LinkIndex: cali}, netlink.RT_FILTER_OIF)
	require.NoError(t, err)
	got := 0
	for _, r := range routes {
		if r.Protocol == 3 {
			got++
		}
	}
	assert.Equal(t, n-len(bad), got, "routes programmed")
	ns4, err := ns.Netlink().NeighList(cali, netlink.FAMILY_V4)
	require.NoError(t, err)
	assert.Len(t, ns4, n-len(bad), "neighbours programmed")

	// Again: replaces succeed, the sequence numbers go on.
	check("route again", p.RouteReplaceAll(rs))

	// A refusal with an extended acknowledgement names the reason.
	errs := p.RouteReplaceAll([]*netlink.Route{{LinkIndex: cali, Dst: &net.IPNet{IP: net.IPv4(10, 70, 0, 1).To4(), Mask: net.CIDRMask(32, 32)},
		Gw: net.IPv4(192, 0, 2, 1).To4(), Table: unix.RT_TABLE_MAIN, Protocol: 3, Priority: 1024}})
	assert.ErrorIs(t, errs[0], unix.ENETUNREACH)
	assert.Contains(t, fmt.Sprint(errs[0]), "gateway", "the kernel's message")
}

// TestKernelLinkDump: the pipe's lean link dump finds every link LinkList
// finds, with the same index, name and running state, on a namespace with
// enough links that the dump takes several reads (links up and down).
func TestKernelLinkDump(t *testing.T) {
	ns, peer := netnstest.New(t), netnstest.New(t)
	for i := range 300 {
		netnstest.Veth(t, ns, fmt.Sprintf("cali%03d", i), peer, fmt.Sprintf("p%03d", i))
	}
	nl := ns.Netlink()
	// cali000 is admin down.
	require.NoError(t, nl.LinkSetDown(ns.Link(t, "cali000")))
	waitRunning(t, ns, "cali002")

	p, err := openPipe(ns.Handle())
	require.NoError(t, err)
	defer p.close()
	got, err := retryDump(p.links)
	require.NoError(t, err)

	links, err := nl.LinkList()
	require.NoError(t, err)
	want := map[int]linkBrief{}
	for _, l := range links {
		a := l.Attrs()
		want[a.Index] = linkBrief{index: a.Index, name: a.Name, running: linkOperUp(l)}
	}
	require.Len(t, got, len(want))
	for _, lb := range got {
		assert.Equal(t, want[lb.index], lb, "link %d", lb.index)
	}
	byName := map[string]linkBrief{}
	for _, lb := range got {
		byName[lb.name] = lb
	}
	assert.False(t, byName["cali000"].running, "cali000 is down")
	assert.True(t, byName["cali002"].running, "cali002 runs")

	// The pipe still writes after a dump on its socket.
	idx := byName["cali002"].index
	errs := p.RouteReplaceAll([]*netlink.Route{(&Table{}).addRoute(routeKey{dst: pfx("10.65.0.2/32"), metric: 1024},
		kroute{ifindex: idx, proto: 3, scope: netlink.SCOPE_LINK, typ: unix.RTN_UNICAST})})
	require.NoError(t, errs[0])
}

// TestKernelListInterfacesHere: the lean listing reports what
// ListInterfaces (netlink's LinkList and AddrList) reports: every link in
// index order, its state, and its sorted addresses of both families (none
// is an empty list).
func TestKernelListInterfacesHere(t *testing.T) {
	ns, peer := netnstest.New(t), netnstest.New(t)
	for i := range 40 {
		netnstest.Veth(t, ns, fmt.Sprintf("cali%02d", i), peer, fmt.Sprintf("p%02d", i))
	}
	netnstest.Veth(t, ns, "eth0", peer, "up0")
	ns.AddAddr(t, "eth0", "192.0.2.2/24")
	ns.AddAddr(t, "eth0", "192.0.2.1/24")
	ns.AddAddr(t, "eth0", "2001:db8::2/64")
	ns.AddAddr(t, "cali07", "10.65.0.7/32")
	require.NoError(t, ns.Netlink().LinkSetDown(ns.Link(t, "cali03")))
	// Both listings must see the same states: wait for every carrier.
	waitRunning(t, ns, "eth0")
	for i := range 40 {
		if i != 3 {
			waitRunning(t, ns, fmt.Sprintf("cali%02d", i))
		}
	}

	want, err := ListInterfaces(ns.Netlink())
	require.NoError(t, err)
	var got []any
	require.NoError(t, ns.Do(func() error {
		var err error
		got, err = ListInterfacesHere()
		return err
	}))
	assert.Equal(t, want, got)
}

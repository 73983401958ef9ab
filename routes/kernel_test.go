package routes

import (
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftep/nftep/internal/netnstest"
)

// Kernel tests: each builds its own namespaces with netnstest, joins them
// with veth pairs (this kernel has no dummy links), and checks the result
// with the ip CLI inside the namespace, so that expectations read as an
// operator would see them. Conventions as in table_test.go; the "workload"
// ends of the veths are cali*, and peer ends live in a second namespace.

// countingDP counts the writes a Table sends through a real handle.
type countingDP struct {
	*netlink.Handle
	pipe   *pipe
	mu     sync.Mutex
	counts map[string]int
}

func (c *countingDP) count(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[op]++
}

func (c *countingDP) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.counts
	c.counts = nil
	return m
}

func (c *countingDP) RouteReplace(r *netlink.Route) error {
	c.count("RouteReplace")
	return c.Handle.RouteReplace(r)
}

// RouteReplaceAll and NeighSetAll make countingDP a batchWriter: the
// writes go through a pipe in the namespace, as New's table sends them.
func (c *countingDP) RouteReplaceAll(rs []*netlink.Route) []error {
	for range rs {
		c.count("RouteReplace")
	}
	return c.pipe.RouteReplaceAll(rs)
}

func (c *countingDP) NeighSetAll(ns []*netlink.Neigh) []error {
	for range ns {
		c.count("NeighSet")
	}
	return c.pipe.NeighSetAll(ns)
}

func (c *countingDP) RouteDel(r *netlink.Route) error {
	c.count("RouteDel")
	return c.Handle.RouteDel(r)
}

func (c *countingDP) NeighSet(n *netlink.Neigh) error {
	c.count("NeighSet")
	return c.Handle.NeighSet(n)
}

func (c *countingDP) NeighDel(n *netlink.Neigh) error {
	c.count("NeighDel")
	return c.Handle.NeighDel(n)
}

func (c *countingDP) RouteListFiltered(family int, filter *netlink.Route, mask uint64) ([]netlink.Route, error) {
	c.count("RouteListFiltered")
	return c.Handle.RouteListFiltered(family, filter, mask)
}

// kernelTable returns a Table bound to ns through a counting wrapper, with
// a fake clock.
func kernelTable(t *testing.T, ns *netnstest.NS, cfg Config) (*Table, *countingDP, *fakeClock) {
	t.Helper()
	clk := newClock()
	if cfg.Clock == nil {
		cfg.Clock = clk.Now
	}
	p, err := openPipe(ns.Handle())
	require.NoError(t, err)
	t.Cleanup(p.close)
	dp := &countingDP{Handle: ns.Netlink(), pipe: p}
	tbl, err := newTable(cfg, dp)
	if err != nil {
		t.Fatalf("newTable: %v", err)
	}
	// Registered after the namespace's cleanup, so it runs before it.
	t.Cleanup(tbl.Close)
	return tbl, dp, clk
}

// waitRunning waits until the link is operationally up: a veth reports
// carrier through linkwatch, which may lag LinkSetUp by up to a second.
func waitRunning(t *testing.T, ns *netnstest.NS, name string) int {
	t.Helper()
	index := 0
	require.Eventually(t, func() bool {
		l := ns.Link(t, name)
		index = l.Attrs().Index
		return linkOperUp(l)
	}, waitLimit, pollTick, fmt.Sprintf("%s running in namespace %s", name, ns.Name))
	return index
}

// ipOut runs `ip args…` in ns and returns its output lines, sorted (the
// neighbour table lists in hash order), without blank lines or trailing spaces.
func ipOut(t *testing.T, ns *netnstest.NS, args ...string) string {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(ns.Run(t, "ip", args...), "\n") {
		if l = strings.TrimRight(l, " "); l != "" {
			lines = append(lines, l)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func checkIP(t *testing.T, ns *netnstest.NS, want string, args ...string) {
	t.Helper()
	wl := strings.Split(dedent(want), "\n")
	sort.Strings(wl)
	if diff := cmp.Diff(strings.Join(wl, "\n"), ipOut(t, ns, args...)); diff != "" {
		t.Errorf("ip %s (-want +got):\n%s", strings.Join(args, " "), diff)
	}
}

// TestKernelRoutesAndNeighbours: IPv4 and IPv6 targets become routes with
// the right device, scope, protocol and metric, IPv4 ones with a permanent
// neighbour; removing the targets removes the routes; a foreign route on
// another interface survives throughout.
func TestKernelRoutesAndNeighbours(t *testing.T) {
	ns, peer := netnstest.New(t), netnstest.New(t)
	netnstest.Veth(t, ns, "cali1", peer, "p1")
	netnstest.Veth(t, ns, "eth0", peer, "up0")
	ns.AddAddr(t, "eth0", "192.0.2.2/24")
	// Foreign: added with protocol boot, like `ip route add` does.
	ns.AddRoute(t, "198.51.100.0/24", "eth0", "192.0.2.1")
	waitRunning(t, ns, "cali1")
	waitRunning(t, ns, "eth0")

	tbl, dp, _ := kernelTable(t, ns, Config{})
	tbl.SetRoutes("cali1", []Target{
		target("10.65.0.1/32", "ee:ee:ee:ee:ee:01"),
		{CIDR: pfx("10.65.0.2/32"), DestMAC: mac("ee:ee:ee:ee:ee:02"), Priority: 512},
		target("10.0.240.2/24", ""),
		target("2001:db8:65::1/128", "ee:ee:ee:ee:ee:01"),
	})
	mustApply(t, tbl)

	checkIP(t, ns, `
		unicast 10.0.240.0/24 proto boot scope link metric 1024
		unicast 10.65.0.1 proto boot scope link metric 1024
		unicast 10.65.0.2 proto boot scope link metric 512`,
		"-d", "-4", "route", "show", "dev", "cali1")
	checkIP(t, ns, `
		unicast 2001:db8:65::1 proto boot scope global metric 1024 pref medium
		unicast fe80::/64 proto kernel scope global metric 256 pref medium`,
		"-d", "-6", "route", "show", "dev", "cali1")
	checkIP(t, ns, `
		10.65.0.1 lladdr ee:ee:ee:ee:ee:01 PERMANENT
		10.65.0.2 lladdr ee:ee:ee:ee:ee:02 PERMANENT`,
		"-4", "neigh", "show", "dev", "cali1", "nud", "permanent")
	// No static neighbour for IPv6 (B5).
	checkIP(t, ns, "", "-6", "neigh", "show", "dev", "cali1", "nud", "permanent")

	// In sync: a full resync writes nothing. This also proves that our
	// idea of each route (IPv6 scope, say) matches what the kernel reports.
	dp.take()
	tbl.QueueResync()
	mustApply(t, tbl)
	if c := dp.take(); c["RouteReplace"]+c["RouteDel"]+c["NeighSet"]+c["NeighDel"] != 0 {
		t.Errorf("resync of a table in sync wrote: %v", c)
	}

	// One target changes its MAC, one goes (with its neighbour): three
	// writes, no dump.
	tbl.SetRoutes("cali1", []Target{
		target("10.65.0.1/32", "ee:ee:ee:ee:ee:11"),
		target("10.0.240.2/24", ""),
		target("2001:db8:65::1/128", "ee:ee:ee:ee:ee:01"),
	})
	mustApply(t, tbl)
	if diff := cmp.Diff(map[string]int{"RouteDel": 1, "NeighDel": 1, "NeighSet": 1}, dp.take()); diff != "" {
		t.Errorf("writes for one change (-want +got):\n%s", diff)
	}
	checkIP(t, ns, "10.65.0.1 lladdr ee:ee:ee:ee:ee:11 PERMANENT", "-4", "neigh", "show", "dev", "cali1", "nud", "permanent")

	tbl.SetRoutes("cali1", nil)
	mustApply(t, tbl)
	checkIP(t, ns, "", "-d", "-4", "route", "show", "dev", "cali1")
	checkIP(t, ns, "", "-4", "neigh", "show", "dev", "cali1", "nud", "permanent")
	checkIP(t, ns, "unicast fe80::/64 proto kernel scope global metric 256 pref medium", "-d", "-6", "route", "show", "dev", "cali1")
	checkIP(t, ns, `
		unicast 192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2
		unicast 198.51.100.0/24 via 192.0.2.1 dev eth0 proto boot scope global`,
		"-d", "-4", "route", "show")
}

// TestKernelRepair: routes deleted or changed by someone else, and a deleted
// neighbour, are repaired by the next full resync and by the rescan of an
// interface that comes back up.
func TestKernelRepair(t *testing.T) {
	ns, peer := netnstest.New(t), netnstest.New(t)
	netnstest.Veth(t, ns, "cali1", peer, "p1")
	idx := waitRunning(t, ns, "cali1")
	tbl, _, _ := kernelTable(t, ns, Config{})
	tbl.SetRoutes("cali1", []Target{
		target("10.65.0.1/32", "ee:ee:ee:ee:ee:01"),
		target("10.65.0.2/32", ""),
		target("2001:db8:65::3/128", ""),
	})
	mustApply(t, tbl)
	const routes4 = `
		unicast 10.65.0.1 proto boot scope link metric 1024
		unicast 10.65.0.2 proto boot scope link metric 1024`
	const neigh = "10.65.0.1 lladdr ee:ee:ee:ee:ee:01 PERMANENT"
	sabotage := func() {
		ns.Run(t, "ip", "route", "del", "10.65.0.1/32", "dev", "cali1", "metric", "1024")
		ns.Run(t, "ip", "route", "replace", "10.65.0.2/32", "dev", "cali1", "metric", "1024", "proto", "static")
		ns.Run(t, "ip", "-6", "route", "del", "2001:db8:65::3/128", "dev", "cali1", "metric", "1024")
		ns.Run(t, "ip", "neigh", "del", "10.65.0.1", "dev", "cali1")
	}
	check := func(step string) {
		t.Helper()
		checkIP(t, ns, routes4, "-d", "-4", "route", "show", "dev", "cali1")
		checkIP(t, ns, `
			unicast 2001:db8:65::3 proto boot scope global metric 1024 pref medium
			unicast fe80::/64 proto kernel scope global metric 256 pref medium`, "-d", "-6", "route", "show", "dev", "cali1")
		checkIP(t, ns, neigh, "-4", "neigh", "show", "dev", "cali1", "nud", "permanent")
		if t.Failed() {
			t.Fatalf("after %s", step)
		}
	}

	sabotage()
	tbl.QueueResync()
	mustApply(t, tbl)
	check("a full resync")

	sabotage()
	tbl.OnIfaceStateChanged("cali1", idx, IfaceDown)
	mustApply(t, tbl)
	tbl.OnIfaceStateChanged("cali1", idx, IfaceUp)
	mustApply(t, tbl)
	check("an interface rescan")
}

// TestKernelGracePeriod: an unknown route on a workload interface survives
// the grace period and is removed after it; a route on the host's uplink
// stays. The clock is the test's, so nothing sleeps for 10 s.
func TestKernelGracePeriod(t *testing.T) {
	ns, peer := netnstest.New(t), netnstest.New(t)
	netnstest.Veth(t, ns, "cali1", peer, "p1")
	netnstest.Veth(t, ns, "eth0", peer, "up0")
	ns.AddAddr(t, "eth0", "192.0.2.2/24")
	waitRunning(t, ns, "cali1")
	waitRunning(t, ns, "eth0")
	// What a CNI plugin adds before the endpoint reaches us.
	ns.Run(t, "ip", "route", "add", "10.65.0.9/32", "dev", "cali1", "proto", "static")
	ns.Run(t, "ip", "route", "add", "default", "via", "192.0.2.1", "dev", "eth0", "proto", "static")

	tbl, _, clk := kernelTable(t, ns, Config{})
	mustApply(t, tbl)
	clk.Step(9 * time.Second)
	tbl.QueueResync()
	mustApply(t, tbl)
	checkIP(t, ns, "unicast 10.65.0.9 proto static scope link", "-d", "-4", "route", "show", "dev", "cali1")

	clk.Step(time.Second)
	mustApply(t, tbl)
	checkIP(t, ns, "", "-d", "-4", "route", "show", "dev", "cali1")
	checkIP(t, ns, `
		unicast default via 192.0.2.1 proto static scope global
		unicast 192.0.2.0/24 proto kernel scope link src 192.0.2.2`, "-d", "-4", "route", "show", "dev", "eth0")
}

// TestKernelInterfaceAppearsLater: routes for an interface that does not
// exist yet cause no error, and are programmed once the monitor reports it.
func TestKernelInterfaceAppearsLater(t *testing.T) {
	ns, peer := netnstest.New(t), netnstest.New(t)
	tbl, _, _ := kernelTable(t, ns, Config{})
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", "ee:ee:ee:ee:ee:01")})
	mustApply(t, tbl)

	states := make(chan InterfaceStateUpdate, 100)
	startMonitor(t, ns, MonitorConfig{}, func(u any) {
		if s, ok := u.(InterfaceStateUpdate); ok {
			tbl.OnIfaceStateChanged(s.Name, s.Index, s.State)
			states <- s
		}
	})

	// Applies while the interface is missing, or not yet up, are quiet.
	mustApply(t, tbl)
	netnstest.Veth(t, ns, "cali1", peer, "p1")
	waitState(t, states, "cali1", IfaceUp, func() { mustApply(t, tbl) })
	mustApply(t, tbl)
	checkIP(t, ns, "unicast 10.65.0.1 proto boot scope link metric 1024", "-d", "-4", "route", "show", "dev", "cali1")
	checkIP(t, ns, "10.65.0.1 lladdr ee:ee:ee:ee:ee:01 PERMANENT", "-4", "neigh", "show", "dev", "cali1", "nud", "permanent")

	// Deleted: quiet again; re-created: programmed again.
	if err := ns.Netlink().LinkDel(ns.Link(t, "cali1")); err != nil {
		t.Fatal(err)
	}
	waitState(t, states, "cali1", IfaceGone, func() { mustApply(t, tbl) })
	mustApply(t, tbl)
	netnstest.Veth(t, ns, "cali1", peer, "p1")
	waitState(t, states, "cali1", IfaceUp, func() { mustApply(t, tbl) })
	mustApply(t, tbl)
	checkIP(t, ns, "unicast 10.65.0.1 proto boot scope link metric 1024", "-d", "-4", "route", "show", "dev", "cali1")
}

// waitState waits for the given state of name, calling between (which may
// fail the test) while it waits.
func waitState(t *testing.T, ch <-chan InterfaceStateUpdate, name string, state IfaceState, between func()) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case u := <-ch:
			if u.Name == name && u.State == state {
				return
			}
		case <-time.After(10 * time.Millisecond):
			between()
		case <-timeout:
			t.Fatalf("no %s update for %s within 10s", state, name)
		}
	}
}

// TestKernelInterfaceRecreatedUnannounced: the interface is re-created
// under the table's feet with a new index; the add meets ENODEV, which is not
// reported, and the route lands on the new interface in the same Apply.
func TestKernelInterfaceRecreatedUnannounced(t *testing.T) {
	ns, peer := netnstest.New(t), netnstest.New(t)
	netnstest.Veth(t, ns, "cali1", peer, "p1")
	waitRunning(t, ns, "cali1")
	tbl, _, _ := kernelTable(t, ns, Config{})
	mustApply(t, tbl)
	if err := ns.Netlink().LinkDel(ns.Link(t, "cali1")); err != nil {
		t.Fatal(err)
	}
	netnstest.Veth(t, ns, "cali1", peer, "p1")
	waitRunning(t, ns, "cali1")
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", "")})
	if err := tbl.Apply(); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	checkIP(t, ns, "unicast 10.65.0.1 proto boot scope link metric 1024", "-d", "-4", "route", "show", "dev", "cali1")
}

// TestKernelConntrack: removing a /32 deletes the conntrack entries of its
// address (as source or destination); other entries stay.
func TestKernelConntrack(t *testing.T) {
	ns, peer := netnstest.New(t), netnstest.New(t)
	netnstest.Veth(t, ns, "cali1", peer, "p1")
	waitRunning(t, ns, "cali1")
	h := ns.Netlink()
	flow := func(src, dst string) *netlink.ConntrackFlow {
		return &netlink.ConntrackFlow{
			FamilyType: netlink.FAMILY_V4,
			Forward:    netlink.IPTuple{SrcIP: net.ParseIP(src).To4(), DstIP: net.ParseIP(dst).To4(), SrcPort: 40000, DstPort: 53, Protocol: unix.IPPROTO_UDP},
			Reverse:    netlink.IPTuple{SrcIP: net.ParseIP(dst).To4(), DstIP: net.ParseIP(src).To4(), SrcPort: 53, DstPort: 40000, Protocol: unix.IPPROTO_UDP},
			TimeOut:    300,
		}
	}
	for _, f := range []*netlink.ConntrackFlow{
		flow("10.65.0.1", "192.0.2.53"),
		flow("192.0.2.7", "10.65.0.1"),
		flow("10.65.0.2", "192.0.2.53"),
	} {
		if err := h.ConntrackCreate(netlink.ConntrackTable, netlink.FAMILY_V4, f); err != nil {
			if isConntrackUnavailable(err) {
				t.Skipf("conntrack netlink unavailable in this kernel: %v", err)
			}
			t.Fatalf("create conntrack entry %s: %v", f, err)
		}
	}

	tbl, err := New(Config{Netlink: h})
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", ""), target("10.65.0.2/32", "")})
	mustApply(t, tbl)
	tbl.SetRoutes("cali1", []Target{target("10.65.0.2/32", "")})
	mustApply(t, tbl)
	tbl.ct.waitIdle()

	flows, err := h.ConntrackTableList(netlink.ConntrackTable, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, f := range flows {
		left = append(left, f.Forward.SrcIP.String()+" -> "+f.Forward.DstIP.String())
	}
	if diff := cmp.Diff([]string{"10.65.0.2 -> 192.0.2.53"}, left); diff != "" {
		t.Errorf("conntrack entries left (-want +got):\n%s", diff)
	}
}

// TestKernelNoNetfilterSocket: a handle without a netfilter socket must not
// clean conntrack at all (the library would fall back to the caller's
// namespace), and says so instead of failing.
func TestKernelNoNetfilterSocket(t *testing.T) {
	ns, peer := netnstest.New(t), netnstest.New(t)
	netnstest.Veth(t, ns, "cali1", peer, "p1")
	waitRunning(t, ns, "cali1")
	h, err := netlink.NewHandleAt(ns.Handle(), unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	tbl, err := New(Config{Netlink: h})
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Close()
	if tbl.conntrack {
		t.Fatalf("table thinks it can reach conntrack through a route-only handle")
	}
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", "")})
	mustApply(t, tbl)
	tbl.SetRoutes("cali1", nil)
	mustApply(t, tbl)
	checkIP(t, ns, "", "-d", "-4", "route", "show", "dev", "cali1")
	checkIP(t, ns, "", "-4", "neigh", "show", "dev", "cali1", "nud", "permanent")
}

package routes

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// waitLimit and pollTick are how long require.Eventually waits for a
// condition of these tests, and how often it checks.
const (
	waitLimit = 5 * time.Second
	pollTick  = 5 * time.Millisecond
)

// Conventions of these tests: workload interfaces are cali1, cali2, …;
// eth0 is the host's uplink; workload addresses are 10.65.0.x and
// 2001:db8:65::x; the fake clock starts at t0 and only moves when told.

// eqAddr lets cmp compare netip values, whose fields are unexported.
var eqAddr = cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{})

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time       { return c.now }
func (c *fakeClock) Step(d time.Duration) { c.now = c.now.Add(d) }
func newClock() *fakeClock                { return &fakeClock{now: t0} }
func pfx(s string) netip.Prefix           { return netip.MustParsePrefix(s) }
func mac(s string) net.HardwareAddr       { m, _ := net.ParseMAC(s); return m }
func ipnet(s string) *net.IPNet           { return prefixToIPNet(pfx(s)) }
func target(cidr string, m string) Target { return Target{CIDR: pfx(cidr), DestMAC: macOrNil(m)} }
func macOrNil(s string) net.HardwareAddr {
	if s == "" {
		return nil
	}
	return mac(s)
}

func newTestTable(t *testing.T, k *fakeKernel, cfg Config) (*Table, *fakeClock) {
	t.Helper()
	clk := newClock()
	if cfg.Clock == nil {
		cfg.Clock = clk.Now
	}
	tbl, err := newTable(cfg, k)
	if err != nil {
		t.Fatalf("newTable: %v", err)
	}
	return tbl, clk
}

func mustApply(t *testing.T, tbl *Table) {
	t.Helper()
	if err := tbl.Apply(); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func assertDump(t *testing.T, k *fakeKernel, want string) {
	t.Helper()
	want = strings.TrimLeft(want, "\n")
	if diff := cmp.Diff(want, k.dump()); diff != "" {
		t.Errorf("kernel state (-want +got):\n%s", diff)
	}
}

// writes sums the calls that change the kernel.
func writes(c map[string]int) int {
	return c["RouteReplace"] + c["RouteDel"] + c["NeighSet"]
}

func TestApplyRoutesAndNeighbours(t *testing.T) {
	k := newFakeKernel()
	k.addLink("eth0", true)
	k.addLink("cali1", true)
	tbl, _ := newTestTable(t, k, Config{})
	// Acceptance case 20: the /24 is masked; both families carry the MAC but
	// only IPv4 gets a static neighbour.
	tbl.SetRoutes("cali1", []Target{
		target("10.0.240.2/24", "01:02:03:04:05:06"),
		target("2001:db8:2::2/128", "01:02:03:04:05:06"),
		{CIDR: pfx("10.65.0.1/32"), DestMAC: mac("ee:ee:ee:ee:ee:01"), Priority: 512},
	})
	mustApply(t, tbl)
	assertDump(t, k, `
10.0.240.0/24 dev cali1 proto boot scope link metric 1024
10.65.0.1/32 dev cali1 proto boot scope link metric 512
2001:db8:2::2/128 dev cali1 proto boot metric 1024
neigh 10.0.240.0 dev cali1 lladdr 01:02:03:04:05:06 state 0x80
neigh 10.65.0.1 dev cali1 lladdr ee:ee:ee:ee:ee:01 state 0x80
`)

	// Removing the targets removes the routes and the neighbours.
	tbl.SetRoutes("cali1", nil)
	mustApply(t, tbl)
	assertDump(t, k, "")
}

// TestOneChangeIsConstant pins the cost of changing one target: the same
// three writes and no reads, whatever the table size (10 or 1,000 interfaces
// of 10 targets each).
func TestOneChangeIsConstant(t *testing.T) {
	for _, ifaces := range []int{10, 1000} {
		t.Run(fmt.Sprint(ifaces), func(t *testing.T) {
			k := newFakeKernel()
			tbl, _ := newTestTable(t, k, Config{})
			targets := func(i, first int) []Target {
				var ts []Target
				for j := first; j < first+10; j++ {
					ts = append(ts, target(fmt.Sprintf("10.%d.%d.%d/32", 64+i/250, i%250, j), "ee:ee:ee:ee:ee:ee"))
				}
				return ts
			}
			for i := range ifaces {
				k.addLink(fmt.Sprintf("cali%d", i), true)
				tbl.SetRoutes(fmt.Sprintf("cali%d", i), targets(i, 1))
			}
			mustApply(t, tbl)
			k.resetCalls()

			// cali3's first address 10.64.3.1 becomes 10.64.3.11.
			tbl.SetRoutes("cali3", targets(3, 2))
			mustApply(t, tbl)
			tbl.ct.waitIdle()
			// Old address: 1 route delete, 1 neighbour delete, 1 conntrack
			// cleanup; new address: 1 route replace, 1 neighbour set.
			want := map[string]int{"RouteDel": 1, "NeighDel": 1, "ConntrackDeleteFilters": 1, "RouteReplace": 1, "NeighSet": 1}
			if diff := cmp.Diff(want, k.callCounts()); diff != "" {
				t.Errorf("calls for one change (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConflictHighestIndexWins(t *testing.T) {
	k := newFakeKernel()
	k.addLink("cali1", true)
	i2 := k.addLink("cali2", true)
	tbl, _ := newTestTable(t, k, Config{})
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", "")})
	tbl.SetRoutes("cali2", []Target{target("10.65.0.1/32", "")})
	mustApply(t, tbl)
	assertDump(t, k, "10.65.0.1/32 dev cali2 proto boot scope link metric 1024\n")

	// 1. cali2 goes down: cali1 is the only valid candidate (B3); the move
	// cuts the address's conntrack entries.
	k.setUp(i2, false)
	k.resetCalls()
	tbl.OnIfaceStateChanged("cali2", i2, IfaceDown)
	mustApply(t, tbl)
	tbl.ct.waitIdle()
	assertDump(t, k, "10.65.0.1/32 dev cali1 proto boot scope link metric 1024\n")
	if diff := cmp.Diff([]netip.Addr{netip.MustParseAddr("10.65.0.1")}, k.cleaned, eqAddr); diff != "" {
		t.Errorf("conntrack cleanup (-want +got):\n%s", diff)
	}

	// 2. cali1 drops the target: nobody valid wants it, it goes.
	tbl.SetRoutes("cali1", nil)
	mustApply(t, tbl)
	assertDump(t, k, "")

	// 3. cali2 comes back up: it still wants it.
	k.setUp(i2, true)
	tbl.OnIfaceStateChanged("cali2", i2, IfaceUp)
	mustApply(t, tbl)
	assertDump(t, k, "10.65.0.1/32 dev cali2 proto boot scope link metric 1024\n")
}

func TestOwnership(t *testing.T) {
	setup := func(t *testing.T, cfg Config) (*fakeKernel, *Table) {
		k := newFakeKernel()
		eth := k.addLink("eth0", true)
		cali := k.addLink("cali1", true)
		for _, r := range []netlink.Route{
			{Dst: ipnet("0.0.0.0/0"), Gw: net.ParseIP("192.0.2.1"), LinkIndex: eth, Protocol: unix.RTPROT_STATIC},
			{Dst: ipnet("192.0.2.0/24"), LinkIndex: eth, Protocol: unix.RTPROT_KERNEL, Scope: netlink.SCOPE_LINK},
			{Dst: ipnet("198.51.100.0/24"), LinkIndex: eth, Protocol: unix.RTPROT_BOOT, Scope: netlink.SCOPE_LINK},
			{Dst: ipnet("198.51.101.0/24"), LinkIndex: eth, Protocol: 80, Scope: netlink.SCOPE_LINK},
			{Dst: ipnet("198.51.102.0/24"), LinkIndex: eth, Protocol: 99, Scope: netlink.SCOPE_LINK},
			{Dst: ipnet("10.65.0.7/32"), LinkIndex: cali, Protocol: unix.RTPROT_STATIC, Scope: netlink.SCOPE_LINK},
			{Dst: ipnet("10.65.0.8/32"), LinkIndex: cali, Protocol: unix.RTPROT_BOOT, Scope: netlink.SCOPE_LINK},
			{Dst: ipnet("fe80::/64"), LinkIndex: cali, Protocol: unix.RTPROT_KERNEL, Priority: 256},
		} {
			k.addRoute(r)
		}
		cfg.GracePeriod = -1
		tbl, _ := newTestTable(t, k, cfg)
		mustApply(t, tbl)
		return k, tbl
	}

	t.Run("defaults", func(t *testing.T) {
		// Protocol 80 anywhere and everything on cali1 (but fe80::/64) is ours.
		k, _ := setup(t, Config{})
		assertDump(t, k, `
0.0.0.0/0 via 192.0.2.1 dev eth0 proto static scope global metric 0
192.0.2.0/24 dev eth0 proto kernel scope link metric 0
198.51.100.0/24 dev eth0 proto boot scope link metric 0
198.51.102.0/24 dev eth0 proto 99 scope link metric 0
fe80::/64 dev cali1 proto kernel metric 256
`)
	})
	t.Run("keep external routes", func(t *testing.T) {
		// On cali1 only boot (and 80) routes are ours now.
		k, _ := setup(t, Config{RemoveExternalRoutes: new(false)})
		assertDump(t, k, `
0.0.0.0/0 via 192.0.2.1 dev eth0 proto static scope global metric 0
10.65.0.7/32 dev cali1 proto static scope link metric 0
192.0.2.0/24 dev eth0 proto kernel scope link metric 0
198.51.100.0/24 dev eth0 proto boot scope link metric 0
198.51.102.0/24 dev eth0 proto 99 scope link metric 0
fe80::/64 dev cali1 proto kernel metric 256
`)
	})
	t.Run("own protocol", func(t *testing.T) {
		// Protocol 99 is ours anywhere; 80 no longer is.
		k, _ := setup(t, Config{Protocol: 99, RemoveExternalRoutes: new(false)})
		assertDump(t, k, `
0.0.0.0/0 via 192.0.2.1 dev eth0 proto static scope global metric 0
10.65.0.7/32 dev cali1 proto static scope link metric 0
192.0.2.0/24 dev eth0 proto kernel scope link metric 0
198.51.100.0/24 dev eth0 proto boot scope link metric 0
198.51.101.0/24 dev eth0 proto 80 scope link metric 0
fe80::/64 dev cali1 proto kernel metric 256
`)
	})
}

func TestGracePeriod(t *testing.T) {
	k := newFakeKernel()
	eth := k.addLink("eth0", true)
	cali := k.addLink("cali1", true)
	cali2 := k.addLink("cali2", true)
	// What the CNI plugin added before we heard of the endpoints.
	k.addRoute(netlink.Route{Dst: ipnet("10.65.0.1/32"), LinkIndex: cali, Protocol: unix.RTPROT_STATIC, Scope: netlink.SCOPE_LINK})
	k.addRoute(netlink.Route{Dst: ipnet("10.65.0.2/32"), LinkIndex: cali2, Protocol: unix.RTPROT_STATIC, Scope: netlink.SCOPE_LINK})
	k.addRoute(netlink.Route{Dst: ipnet("0.0.0.0/0"), Gw: net.ParseIP("192.0.2.1"), LinkIndex: eth, Protocol: unix.RTPROT_STATIC})
	tbl, clk := newTestTable(t, k, Config{})

	// 1. Within the grace period the unknown routes survive, even a resync.
	mustApply(t, tbl)
	clk.Step(9 * time.Second)
	tbl.QueueResync()
	mustApply(t, tbl)
	assertDump(t, k, `
0.0.0.0/0 via 192.0.2.1 dev eth0 proto static scope global metric 0
10.65.0.1/32 dev cali1 proto static scope link metric 0
10.65.0.2/32 dev cali2 proto static scope link metric 0
`)
	if got, want := tbl.NextDeadline(), t0.Add(10*time.Second); !got.Equal(want) {
		t.Errorf("NextDeadline = %v, want the end of the grace period %v", got, want)
	}

	// 2. Wanting a route on cali2 ends its grace period at once: the
	// CNI's route becomes ours (replaced in place by our own).
	tbl.SetRoutes("cali2", []Target{target("10.65.0.9/32", "")})
	mustApply(t, tbl)
	assertDump(t, k, `
0.0.0.0/0 via 192.0.2.1 dev eth0 proto static scope global metric 0
10.65.0.1/32 dev cali1 proto static scope link metric 0
10.65.0.9/32 dev cali2 proto boot scope link metric 1024
`)

	// 3. After 10 s the spared route on cali1 goes; eth0's stays.
	clk.Step(time.Second)
	mustApply(t, tbl)
	assertDump(t, k, `
0.0.0.0/0 via 192.0.2.1 dev eth0 proto static scope global metric 0
10.65.0.9/32 dev cali2 proto boot scope link metric 1024
`)
}

func TestRepairOnResyncAndRescan(t *testing.T) {
	k := newFakeKernel()
	cali := k.addLink("cali1", true)
	tbl, _ := newTestTable(t, k, Config{})
	tbl.SetRoutes("cali1", []Target{
		target("10.65.0.1/32", "ee:ee:ee:ee:ee:01"),
		target("10.65.0.2/32", ""),
		target("10.65.0.3/32", ""),
	})
	mustApply(t, tbl)
	const want = `
10.65.0.1/32 dev cali1 proto boot scope link metric 1024
10.65.0.2/32 dev cali1 proto boot scope link metric 1024
10.65.0.3/32 dev cali1 proto boot scope link metric 1024
neigh 10.65.0.1 dev cali1 lladdr ee:ee:ee:ee:ee:01 state 0x80
`
	sabotage := func() {
		k.RouteDel(&netlink.Route{Dst: ipnet("10.65.0.2/32"), Priority: 1024, Table: unix.RT_TABLE_MAIN, Scope: netlink.SCOPE_LINK})
		k.RouteReplace(&netlink.Route{Dst: ipnet("10.65.0.3/32"), LinkIndex: cali, Priority: 1024, Table: unix.RT_TABLE_MAIN, Protocol: unix.RTPROT_STATIC, Scope: netlink.SCOPE_LINK})
		k.delNeigh(cali, "10.65.0.1")
	}

	// 1. Without a resync nothing is read back: the damage stays.
	sabotage()
	k.resetCalls()
	mustApply(t, tbl)
	if c := k.callCounts(); len(c) != 0 {
		t.Errorf("Apply with nothing to do made calls: %v", c)
	}

	// 2. A full resync repairs it.
	tbl.QueueResync()
	mustApply(t, tbl)
	assertDump(t, k, want)

	// 3. So does the rescan of an interface that comes (back) up.
	sabotage()
	k.setUp(cali, false)
	tbl.OnIfaceStateChanged("cali1", cali, IfaceDown)
	mustApply(t, tbl)
	k.setUp(cali, true)
	tbl.OnIfaceStateChanged("cali1", cali, IfaceUp)
	mustApply(t, tbl)
	assertDump(t, k, want)

	// 4. In sync: a resync writes nothing.
	k.resetCalls()
	tbl.QueueResync()
	mustApply(t, tbl)
	if n := writes(k.callCounts()); n != 0 {
		t.Errorf("resync of a table in sync made %d writes", n)
	}
}

func TestPeriodicResync(t *testing.T) {
	k := newFakeKernel()
	tbl, clk := newTestTable(t, k, Config{ResyncInterval: time.Minute})
	mustApply(t, tbl)
	k.resetCalls()
	clk.Step(59 * time.Second)
	mustApply(t, tbl)
	if n := k.callCounts()["LinkList"]; n != 0 {
		t.Errorf("resync before the interval")
	}
	clk.Step(time.Second)
	mustApply(t, tbl)
	if n := k.callCounts()["LinkList"]; n != 1 {
		t.Errorf("no resync after the interval")
	}
	if got, want := tbl.NextDeadline(), clk.Now().Add(time.Minute); !got.Equal(want) {
		t.Errorf("NextDeadline = %v, want %v", got, want)
	}
}

// TestPeriodicResyncSkippedWhileEventsTrusted: with the kernel's events
// subscribed (EventsSubscribed), the periodic resync is skipped, and a
// resync that began before the subscription is repeated; a loss
// (EventsLost) brings a resync at once and the periodic ones back.
func TestPeriodicResyncSkippedWhileEventsTrusted(t *testing.T) {
	k := newFakeKernel()
	tbl, clk := newTestTable(t, k, Config{ResyncInterval: time.Minute})
	mustApply(t, tbl)
	clk.Step(time.Second)
	if !tbl.EventsSubscribed(clk.Now()) {
		t.Error("a subscription after the last resync queued none")
	}
	mustApply(t, tbl) // the repeated resync
	k.resetCalls()
	if tbl.EventsSubscribed(clk.Now().Add(-time.Millisecond)) {
		t.Error("a subscription before the last resync queued one")
	}
	if dl := tbl.NextDeadline(); !dl.IsZero() {
		t.Errorf("NextDeadline = %v while the events are trusted, want none", dl)
	}
	clk.Step(10 * time.Minute)
	mustApply(t, tbl)
	if n := k.callCounts()["LinkList"]; n != 0 {
		t.Errorf("%d resyncs while the events are trusted, want 0", n)
	}
	tbl.EventsLost()
	mustApply(t, tbl)
	if n := k.callCounts()["LinkList"]; n != 1 {
		t.Errorf("%d resyncs after the events were lost, want 1", n)
	}
	if got, want := tbl.NextDeadline(), clk.Now().Add(time.Minute); !got.Equal(want) {
		t.Errorf("NextDeadline = %v after the loss, want %v (periodic again)", got, want)
	}
}

func TestInterfaceNotThereYet(t *testing.T) {
	k := newFakeKernel()
	tbl, _ := newTestTable(t, k, Config{})
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", "ee:ee:ee:ee:ee:01")})
	mustApply(t, tbl) // nothing to program, and no error
	assertDump(t, k, "")

	idx := k.addLink("cali1", true)
	tbl.OnIfaceStateChanged("cali1", idx, IfaceUp)
	mustApply(t, tbl)
	assertDump(t, k, `
10.65.0.1/32 dev cali1 proto boot scope link metric 1024
neigh 10.65.0.1 dev cali1 lladdr ee:ee:ee:ee:ee:01 state 0x80
`)
}

// TestInterfaceGoneUnannounced: the interface is deleted and re-created
// without the table being told. The add meets ENODEV, which is not
// reported; the table looks the link up and programs the new one.
func TestInterfaceGoneUnannounced(t *testing.T) {
	k := newFakeKernel()
	old := k.addLink("cali1", true)
	tbl, _ := newTestTable(t, k, Config{})
	mustApply(t, tbl)

	k.delLink(old)
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", "")})
	if err := tbl.Apply(); err != nil {
		t.Fatalf("Apply with the interface gone: %v", err)
	}
	assertDump(t, k, "")

	k.addLink("cali1", true)
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", ""), target("10.65.0.2/32", "")})
	if err := tbl.Apply(); err != nil {
		t.Fatalf("Apply with the interface re-created: %v", err)
	}
	// The table had forgotten the link: it learns of the new one from
	// the monitor or the next resync.
	tbl.QueueResync()
	mustApply(t, tbl)
	assertDump(t, k, `
10.65.0.1/32 dev cali1 proto boot scope link metric 1024
10.65.0.2/32 dev cali1 proto boot scope link metric 1024
`)
}

// TestInterfaceRecreatedUnannounced: the same, but the table still has the
// old index when the new link exists: the ENODEV leads to a lookup and the
// route lands in the same Apply.
func TestInterfaceRecreatedUnannounced(t *testing.T) {
	k := newFakeKernel()
	old := k.addLink("cali1", true)
	tbl, _ := newTestTable(t, k, Config{})
	mustApply(t, tbl)
	k.delLink(old)
	k.addLink("cali1", true)
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", "")})
	if err := tbl.Apply(); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	assertDump(t, k, "10.65.0.1/32 dev cali1 proto boot scope link metric 1024\n")
}

func TestErrorsNameTheRouteAndRetry(t *testing.T) {
	k := newFakeKernel()
	k.addLink("cali1", true)
	tbl, _ := newTestTable(t, k, Config{})
	k.fail = func(op string, r *netlink.Route) error {
		if op == "RouteReplace" && r.Dst.String() == "10.65.0.1/32" {
			return unix.EPERM
		}
		return nil
	}
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", ""), target("10.65.0.2/32", "")})
	err := tbl.Apply()
	if !errors.Is(err, unix.EPERM) {
		t.Fatalf("Apply error = %v, want EPERM", err)
	}
	if want := "add route 10.65.0.1/32 dev cali1 proto 3 metric 1024: operation not permitted"; err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err, want)
	}
	assertDump(t, k, "10.65.0.2/32 dev cali1 proto boot scope link metric 1024\n")

	k.fail = nil
	mustApply(t, tbl)
	assertDump(t, k, `
10.65.0.1/32 dev cali1 proto boot scope link metric 1024
10.65.0.2/32 dev cali1 proto boot scope link metric 1024
`)
}

func TestDumpInterruptedIsRetried(t *testing.T) {
	k := newFakeKernel()
	k.addLink("cali1", true)
	k.interrupt = 3
	tbl, _ := newTestTable(t, k, Config{})
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", "")})
	mustApply(t, tbl)
	assertDump(t, k, "10.65.0.1/32 dev cali1 proto boot scope link metric 1024\n")

	k.interrupt = dumpRetries
	tbl.QueueResync()
	if err := tbl.Apply(); !errors.Is(err, netlink.ErrDumpInterrupted) {
		t.Errorf("Apply after %d interrupted dumps = %v, want ErrDumpInterrupted", dumpRetries, err)
	}
}

// Acceptance case 60 (docs/acceptance-cases.md): a change and its reversal
// before Apply write nothing.
func TestBackToSameWritesNothing(t *testing.T) {
	k := newFakeKernel()
	k.addLink("cali1", true)
	tbl, _ := newTestTable(t, k, Config{})
	ts := []Target{target("10.65.0.1/32", "ee:ee:ee:ee:ee:01")}
	tbl.SetRoutes("cali1", ts)
	mustApply(t, tbl)
	k.resetCalls()
	tbl.SetRoutes("cali1", nil)
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", "ee:ee:ee:ee:ee:02")})
	tbl.SetRoutes("cali1", ts)
	mustApply(t, tbl)
	if c := k.callCounts(); len(c) != 0 {
		t.Errorf("calls: %v, want none", c)
	}
}

// Acceptance case 62: priorities are part of the key; IPv6 priority 0 is
// 1024.
func TestPriorities(t *testing.T) {
	k := newFakeKernel()
	cali := k.addLink("cali1", true)
	k.addRoute(netlink.Route{Dst: ipnet("10.65.0.1/32"), LinkIndex: cali, Protocol: unix.RTPROT_BOOT, Scope: netlink.SCOPE_LINK, Priority: 7})
	tbl, _ := newTestTable(t, k, Config{GracePeriod: -1})
	tbl.SetRoutes("cali1", []Target{
		{CIDR: pfx("10.65.0.1/32"), Priority: 100},
		{CIDR: pfx("10.65.0.1/32"), Priority: 50},
		{CIDR: pfx("2001:db8:65::1/128")},
	})
	mustApply(t, tbl)
	assertDump(t, k, `
10.65.0.1/32 dev cali1 proto boot scope link metric 100
10.65.0.1/32 dev cali1 proto boot scope link metric 50
2001:db8:65::1/128 dev cali1 proto boot metric 1024
`)
	tbl.SetRoutes("cali1", []Target{{CIDR: pfx("10.65.0.1/32"), Priority: 50}, {CIDR: pfx("2001:db8:65::1/128"), Priority: 1024}})
	mustApply(t, tbl)
	assertDump(t, k, `
10.65.0.1/32 dev cali1 proto boot scope link metric 50
2001:db8:65::1/128 dev cali1 proto boot metric 1024
`)
}

// Acceptance cases 56 and 58: routes with another protocol or a stale src are
// replaced in place.
func TestProtocolAndSourceAreFixed(t *testing.T) {
	k := newFakeKernel()
	cali := k.addLink("cali1", true)
	k.addRoute(netlink.Route{Dst: ipnet("10.65.0.1/32"), LinkIndex: cali, Protocol: 80, Scope: netlink.SCOPE_LINK, Priority: 1024})
	k.addRoute(netlink.Route{Dst: ipnet("10.65.0.2/32"), LinkIndex: cali, Protocol: unix.RTPROT_BOOT, Scope: netlink.SCOPE_LINK, Priority: 1024, Src: net.ParseIP("192.0.2.9")})
	tbl, _ := newTestTable(t, k, Config{})
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", ""), target("10.65.0.2/32", "")})
	k.resetCalls()
	mustApply(t, tbl)
	assertDump(t, k, `
10.65.0.1/32 dev cali1 proto boot scope link metric 1024
10.65.0.2/32 dev cali1 proto boot scope link metric 1024
`)
	if c := k.callCounts(); c["RouteDel"] != 0 || c["RouteReplace"] != 2 {
		t.Errorf("calls %v: want two replaces in place and no delete", c)
	}

	k2 := newFakeKernel()
	k2.addLink("cali1", true)
	tbl2, _ := newTestTable(t, k2, Config{SourceAddressV4: netip.MustParseAddr("192.0.2.1")})
	tbl2.SetRoutes("cali1", []Target{target("10.65.0.1/32", ""), target("2001:db8:65::1/128", "")})
	mustApply(t, tbl2)
	assertDump(t, k2, `
10.65.0.1/32 dev cali1 proto boot scope link metric 1024 src 192.0.2.1
2001:db8:65::1/128 dev cali1 proto boot metric 1024
`)
}

// Acceptance case 55 / B10: deleting a /32 or /128 cleans its conntrack
// entries; wider prefixes and unchanged routes do not.
func TestConntrackCleanup(t *testing.T) {
	k := newFakeKernel()
	k.addLink("cali1", true)
	tbl, _ := newTestTable(t, k, Config{})
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", ""), target("10.65.0.2/32", ""), target("10.66.0.0/24", ""), target("2001:db8:65::1/128", "")})
	mustApply(t, tbl)
	k.resetCalls()
	tbl.SetRoutes("cali1", []Target{target("10.65.0.2/32", "")})
	mustApply(t, tbl)
	tbl.ct.waitIdle()
	want := []netip.Addr{netip.MustParseAddr("10.65.0.1"), netip.MustParseAddr("2001:db8:65::1")}
	if diff := cmp.Diff(want, k.cleaned, eqAddr); diff != "" {
		t.Errorf("conntrack cleanup (-want +got):\n%s", diff)
	}
	if n := k.callCounts()["ConntrackDeleteFilters"]; n != 2 {
		t.Errorf("%d conntrack dumps, want one per family", n)
	}
}

// Acceptance case 59: conntrack cleanup runs in the background; an add of an
// address whose cleanup is still running waits for it, other adds do not.
func TestAddWaitsForConntrackCleanup(t *testing.T) {
	k := newFakeKernel()
	k.addLink("cali1", true)
	k.addLink("cali2", true)
	tbl, _ := newTestTable(t, k, Config{})
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", ""), target("10.65.0.2/32", "")})
	mustApply(t, tbl)

	gate := make(chan struct{})
	k.setCTGate(gate)
	tbl.SetRoutes("cali1", nil)
	mustApply(t, tbl) // returns with the cleanup still blocked

	tbl.SetRoutes("cali2", []Target{target("10.65.0.3/32", "")})
	mustApply(t, tbl) // an unrelated add does not wait

	done := make(chan error, 1)
	go func() {
		tbl.SetRoutes("cali2", []Target{target("10.65.0.3/32", ""), target("10.65.0.1/32", "")})
		done <- tbl.Apply()
	}()
	select {
	case err := <-done:
		t.Fatalf("Apply re-adding 10.65.0.1 returned (%v) while its conntrack cleanup ran", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatalf("Apply: %v", err)
	}
	assertDump(t, k, `
10.65.0.1/32 dev cali2 proto boot scope link metric 1024
10.65.0.3/32 dev cali2 proto boot scope link metric 1024
`)
}

// While Apply waits for a slow conntrack cleanup (B10), it does not hold
// the table: SetRoutes, OnIfaceStateChanged and NextDeadline return, and
// the waiting key is planned again with their changes before it is added.
func TestSetRoutesDoesNotBlockWhileApplyWaitsForConntrack(t *testing.T) {
	k := newFakeKernel()
	k.addLink("cali1", true)
	cali2 := k.addLink("cali2", true)
	cali3 := k.addLink("cali3", true)
	tbl, _ := newTestTable(t, k, Config{})
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", ""), target("10.65.0.2/32", "")})
	mustApply(t, tbl)

	gate := make(chan struct{})
	k.setCTGate(gate)
	t.Cleanup(func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	})
	tbl.SetRoutes("cali1", nil)
	mustApply(t, tbl) // the cleanup of 10.65.0.1 and .2 stays blocked

	done := make(chan error, 1)
	go func() {
		tbl.SetRoutes("cali2", []Target{target("10.65.0.1/32", ""), target("10.65.0.2/32", "")})
		done <- tbl.Apply()
	}()
	require.Eventually(t, func() bool { return tbl.ct.waiting() > 0 }, waitLimit, pollTick, "Apply to wait for the conntrack cleanup")

	within := func(what string, f func()) {
		t.Helper()
		ret := make(chan struct{})
		go func() { f(); close(ret) }()
		select {
		case <-ret:
		case <-time.After(2 * time.Second):
			t.Fatalf("%s blocked while Apply waited for a conntrack cleanup", what)
		}
	}
	// .1 is no longer wanted, .2 moves to cali3, .4 is new.
	within("SetRoutes", func() {
		tbl.SetRoutes("cali2", []Target{target("10.65.0.4/32", "")})
		tbl.SetRoutes("cali3", []Target{target("10.65.0.2/32", "")})
	})
	within("OnIfaceStateChanged", func() {
		tbl.OnIfaceStateChanged("cali2", cali2, IfaceUp)
		tbl.OnIfaceStateChanged("cali3", cali3, IfaceUp)
	})
	within("NextDeadline", func() { tbl.NextDeadline() })
	select {
	case err := <-done:
		t.Fatalf("Apply returned (%v) while the conntrack cleanup ran", err)
	default:
	}
	if got := k.dump(); strings.Contains(got, "10.65.0.1/") || strings.Contains(got, "10.65.0.2/") {
		t.Fatalf("an address was added during its conntrack cleanup:\n%s", got)
	}

	close(gate)
	if err := <-done; err != nil {
		t.Fatalf("Apply: %v", err)
	}
	assertDump(t, k, `
10.65.0.2/32 dev cali3 proto boot scope link metric 1024
10.65.0.4/32 dev cali2 proto boot scope link metric 1024
`)
	if dl := tbl.NextDeadline(); !dl.After(t0) {
		t.Errorf("NextDeadline %v: Apply left work behind", dl)
	}
	tbl.Close()
}

func TestConntrackUnavailableIsNotFatal(t *testing.T) {
	k := newFakeKernel()
	k.addLink("cali1", true)
	tbl, _ := newTestTable(t, k, Config{})
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", "")})
	mustApply(t, tbl)
	k.fail = func(op string, _ *netlink.Route) error {
		if op == "ConntrackDeleteFilters" {
			return unix.EPROTONOSUPPORT
		}
		return nil
	}
	tbl.SetRoutes("cali1", nil)
	mustApply(t, tbl)
	assertDump(t, k, "")
}

func TestFamilyFilter(t *testing.T) {
	k := newFakeKernel()
	cali := k.addLink("cali1", true)
	// An IPv6 route of ours: an IPv4-only table must not see it.
	k.addRoute(netlink.Route{Dst: ipnet("2001:db8:65::7/128"), LinkIndex: cali, Protocol: unix.RTPROT_BOOT, Priority: 1024})
	tbl, _ := newTestTable(t, k, Config{IPVersion: 4, GracePeriod: -1})
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", ""), target("2001:db8:65::1/128", "")})
	mustApply(t, tbl)
	assertDump(t, k, `
10.65.0.1/32 dev cali1 proto boot scope link metric 1024
2001:db8:65::7/128 dev cali1 proto boot metric 1024
`)
}

func TestRename(t *testing.T) {
	k := newFakeKernel()
	idx := k.addLink("tmp123", true)
	tbl, _ := newTestTable(t, k, Config{})
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", "")})
	mustApply(t, tbl)
	assertDump(t, k, "")
	// The CNI plugin renames its interface into place.
	k.links[idx].Name = "cali1"
	tbl.OnIfaceStateChanged("cali1", idx, IfaceUp)
	mustApply(t, tbl)
	assertDump(t, k, "10.65.0.1/32 dev cali1 proto boot scope link metric 1024\n")
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []Config{
		{IPVersion: 5},
		{Metric: -1},
		{InterfacePrefixes: []string{""}},
		{SourceAddressV4: netip.MustParseAddr("::1")},
		{SourceAddressV6: netip.MustParseAddr("10.0.0.1")},
	} {
		if _, err := newTable(cfg, newFakeKernel()); err == nil {
			t.Errorf("newTable(%+v) succeeded", cfg)
		}
	}
}

// Acceptance case 57 and our B5 variant: a neighbour is not written for a
// route removed before Apply; a removed target's neighbour goes on a workload
// interface but stays on any other (we do not own it there).
func TestNeighbourLifecycle(t *testing.T) {
	k := newFakeKernel()
	k.addLink("cali1", true)
	k.addLink("eth1", true)
	tbl, _ := newTestTable(t, k, Config{})
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", "ee:ee:ee:ee:ee:01")})
	tbl.SetRoutes("cali1", nil)
	mustApply(t, tbl)
	if n := k.callCounts()["NeighSet"]; n != 0 {
		t.Errorf("%d neighbour writes for a route removed before Apply", n)
	}

	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", "ee:ee:ee:ee:ee:01")})
	tbl.SetRoutes("eth1", []Target{target("10.66.0.1/32", "ee:ee:ee:ee:ee:02")})
	mustApply(t, tbl)
	tbl.SetRoutes("cali1", nil)
	tbl.SetRoutes("eth1", nil)
	mustApply(t, tbl)
	assertDump(t, k, "neigh 10.66.0.1 dev eth1 lladdr ee:ee:ee:ee:ee:02 state 0x80\n")
}

// A target moving between workload interfaces takes its neighbour along.
func TestNeighbourMoves(t *testing.T) {
	k := newFakeKernel()
	k.addLink("cali1", true)
	k.addLink("cali2", true)
	tbl, _ := newTestTable(t, k, Config{})
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", "ee:ee:ee:ee:ee:01")})
	mustApply(t, tbl)
	tbl.SetRoutes("cali1", nil)
	tbl.SetRoutes("cali2", []Target{target("10.65.0.1/32", "ee:ee:ee:ee:ee:01")})
	mustApply(t, tbl)
	assertDump(t, k, `
10.65.0.1/32 dev cali2 proto boot scope link metric 1024
neigh 10.65.0.1 dev cali2 lladdr ee:ee:ee:ee:ee:01 state 0x80
`)
}

// TestAdoptedInterfacesHaveNoGrace: the routes an earlier process wanted
// (Adopt, from its Owned) are nftep's own, so a table that no longer wants
// them removes them at its first Apply instead of sparing them for the
// grace period. A re-created interface of the same name (another index)
// is new and keeps its grace; so does an interface nobody adopted.
func TestAdoptedInterfacesHaveNoGrace(t *testing.T) {
	k := newFakeKernel()
	cali1 := k.addLink("cali1", true)
	cali2 := k.addLink("cali2", true)
	cali3 := k.addLink("cali3", true)

	// The earlier process: routes on all three.
	first, _ := newTestTable(t, k, Config{})
	for name, dst := range map[string]string{"cali1": "10.65.0.1/32", "cali2": "10.65.0.2/32", "cali3": "10.65.0.3/32"} {
		first.SetRoutes(name, []Target{target(dst, "")})
	}
	mustApply(t, first)
	owned := first.Owned()
	if want := map[string]int{"cali1": cali1, "cali2": cali2, "cali3": cali3}; !maps.Equal(owned, want) {
		t.Fatalf("Owned = %v, want %v", owned, want)
	}

	// The next process wants cali1's route only; cali3 was re-created
	// meanwhile (another index), with a route its CNI plugin made.
	delete(owned, "cali3")
	owned["cali3"] = cali3 + 100
	next, _ := newTestTable(t, k, Config{})
	next.Adopt(owned)
	next.SetRoutes("cali1", []Target{target("10.65.0.1/32", "")})
	mustApply(t, next)
	assertDump(t, k, `
10.65.0.1/32 dev cali1 proto boot scope link metric 1024
10.65.0.3/32 dev cali3 proto boot scope link metric 1024
`)
}

// TestTrustWanted: a table that trusts what it wants as what the kernel
// holds (a record of the last apply) lists nothing and writes only what
// changes afterwards; routes of interfaces it was not told about stay.
func TestTrustWanted(t *testing.T) {
	k := newFakeKernel()
	full, _ := newTestTable(t, k, Config{})
	idx := map[string]int{}
	for i := range 5 {
		name := fmt.Sprintf("cali%d", i)
		idx[name] = k.addLink(name, true)
		full.SetRoutes(name, []Target{target(fmt.Sprintf("10.65.0.%d/32", i), "ee:ee:ee:ee:ee:0"+fmt.Sprint(i))})
	}
	mustApply(t, full)
	before := k.allRoutes()
	k.resetCalls()

	// A new process knows cali1 and cali2 only.
	tbl, _ := newTestTable(t, k, Config{})
	for _, name := range []string{"cali1", "cali2"} {
		tbl.OnIfaceStateChanged(name, idx[name], IfaceUp)
		i := name[len(name)-1:]
		tbl.SetRoutes(name, []Target{target("10.65.0."+i+"/32", "ee:ee:ee:ee:ee:0"+i)})
	}
	tbl.TrustWanted()
	mustApply(t, tbl)
	assert.Empty(t, k.callCounts(), "nothing listed, nothing written")
	require.ElementsMatch(t, before, k.allRoutes())

	// cali1's endpoint goes, cali2 moves to another address.
	k.resetCalls()
	tbl.SetRoutes("cali1", nil)
	tbl.SetRoutes("cali2", []Target{target("10.65.0.22/32", "ee:ee:ee:ee:ee:02")})
	mustApply(t, tbl)
	tbl.ct.waitIdle()
	counts := k.callCounts()
	assert.Equal(t, 2, counts["RouteDel"], "cali1's route and cali2's old one")
	assert.Equal(t, 1, counts["RouteReplace"], "cali2's new route")
	assert.Zero(t, counts["RouteListFiltered"]+counts["LinkList"]+counts["NeighList"], "no listing")
	var dsts []string
	for _, r := range k.allRoutes() {
		dsts = append(dsts, r.Dst.String())
	}
	assert.ElementsMatch(t, []string{"10.65.0.0/32", "10.65.0.22/32", "10.65.0.3/32", "10.65.0.4/32"}, dsts)
}

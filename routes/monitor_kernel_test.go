package routes

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"

	"github.com/nftep/nftep/internal/netnstest"
)

// startMonitor runs a Monitor on ns until the test ends (before the
// namespace goes: cleanups run last-in first-out).
func startMonitor(t *testing.T, ns *netnstest.NS, cfg MonitorConfig, cb func(any)) *Monitor {
	t.Helper()
	h := ns.Handle()
	cfg.Namespace = &h
	m := NewMonitor(cfg, cb)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Monitor.Run: %v", err)
		}
	})
	return m
}

// updates reads a monitor's updates for some interfaces.
type updates struct {
	t  *testing.T
	ch chan any
}

// next returns the next update about one of names, within 10 s.
func (u *updates) next(names ...string) string {
	u.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case up := <-u.ch:
			var name string
			switch up := up.(type) {
			case InterfaceStateUpdate:
				name = up.Name
			case InterfaceAddrsUpdate:
				name = up.Name
			}
			if slices.Contains(names, name) {
				return updateText(up)
			}
		case <-timeout:
			u.t.Fatalf("no update for %v within 10s", names)
		}
	}
}

// waitFor skips updates about name until want.
func (u *updates) waitFor(name, want string) {
	u.t.Helper()
	for {
		got := u.next(name)
		u.t.Logf("update: %s", got)
		if got == want {
			return
		}
	}
}

// none checks that no update about name comes within d.
func (u *updates) none(name string, d time.Duration) {
	u.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case up := <-u.ch:
			if isState(up, name) || isAddrs(up, name) {
				u.t.Errorf("unexpected update: %s", updateText(up))
			}
		case <-deadline:
			return
		}
	}
}

func isState(u any, name string) bool { s, ok := u.(InterfaceStateUpdate); return ok && s.Name == name }
func isAddrs(u any, name string) bool { a, ok := u.(InterfaceAddrsUpdate); return ok && a.Name == name }

// TestKernelMonitor: up, address add, down, address removal, rename and
// deletion of a veth are reported, in order.
func TestKernelMonitor(t *testing.T) {
	ns, peer := netnstest.New(t), netnstest.New(t)
	u := &updates{t: t, ch: make(chan any, 1000)}
	startMonitor(t, ns, MonitorConfig{}, func(up any) { u.ch <- up })

	// The existing loopback is listed first.
	u.waitFor("lo", fmt.Sprintf("state lo up %d", ns.Link(t, "lo").Attrs().Index))

	netnstest.Veth(t, ns, "cali1", peer, "p1")
	idx := ns.Link(t, "cali1").Attrs().Index
	u.waitFor("cali1", fmt.Sprintf("state cali1 up %d", idx))

	// The IPv6 link-local address comes and goes on its own, so wait for
	// the set we expect rather than for the next update.
	hasAddr := func(want bool) {
		for {
			got := u.next("cali1")
			t.Logf("update: %s", got)
			if strings.HasPrefix(got, "addrs cali1 ") && strings.Contains(got, "10.0.0.1") == want {
				return
			}
		}
	}
	ns.AddAddr(t, "cali1", "10.0.0.1/24")
	hasAddr(true)

	link := ns.Link(t, "cali1")
	if err := ns.Netlink().LinkSetDown(link); err != nil {
		t.Fatal(err)
	}
	u.waitFor("cali1", fmt.Sprintf("state cali1 down %d", idx))

	addr, _ := netlink.ParseAddr("10.0.0.1/24")
	if err := ns.Netlink().AddrDel(link, addr); err != nil {
		t.Fatal(err)
	}
	hasAddr(false)

	// Rename: the old name goes (state, then addresses), the new one appears.
	if err := ns.Netlink().LinkSetName(link, "cali1x"); err != nil {
		t.Fatal(err)
	}
	u.waitFor("cali1", fmt.Sprintf("state cali1 gone %d", idx))
	if got := u.next("cali1", "cali1x"); got != "addrs cali1 nil" {
		t.Errorf("after gone: %s, want addrs cali1 nil", got)
	}
	if got := u.next("cali1", "cali1x"); got != fmt.Sprintf("state cali1x down %d", idx) {
		t.Errorf("after the rename: %s, want the new name down", got)
	}

	// Deletion: gone, then a nil address set, then silence.
	if err := ns.Netlink().LinkDel(ns.Link(t, "cali1x")); err != nil {
		t.Fatal(err)
	}
	u.waitFor("cali1x", fmt.Sprintf("state cali1x gone %d", idx))
	if got := u.next("cali1x"); got != "addrs cali1x nil" {
		t.Errorf("after gone: %s, want addrs cali1x nil", got)
	}
	u.none("cali1x", 300*time.Millisecond)
	u.none("cali1", 0)
}

// ifaceView is what a consumer knows from the updates: per name, state,
// index and addresses.
type ifaceView map[string]string

func (v ifaceView) apply(u any) {
	switch u := u.(type) {
	case InterfaceStateUpdate:
		if u.State == IfaceGone {
			delete(v, u.Name+" state")
			return
		}
		v[u.Name+" state"] = fmt.Sprintf("%s %d", u.State, u.Index)
	case InterfaceAddrsUpdate:
		if u.Addrs == nil {
			delete(v, u.Name+" addrs")
			return
		}
		v[u.Name+" addrs"] = fmt.Sprint(u.Addrs)
	}
}

// truth reads the namespace's links and addresses into an ifaceView.
func truth(t *testing.T, h *netlink.Handle) ifaceView {
	t.Helper()
	links, err := retryDump(h.LinkList)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return h.AddrList(nil, netlink.FAMILY_ALL) })
	if err != nil {
		t.Fatal(err)
	}
	byIndex := map[int][]netip.Addr{}
	for _, a := range addrs {
		byIndex[a.LinkIndex] = append(byIndex[a.LinkIndex], ipToAddr(a.IP))
	}
	v := ifaceView{}
	for _, l := range links {
		a := l.Attrs()
		state := IfaceDown
		if linkOperUp(l) {
			state = IfaceUp
		}
		v[a.Name+" state"] = fmt.Sprintf("%s %d", state, a.Index)
		as := byIndex[a.Index]
		slices.SortFunc(as, func(x, y netip.Addr) int { return x.Compare(y) })
		as = slices.Compact(as)
		if as == nil {
			as = []netip.Addr{}
		}
		v[a.Name+" addrs"] = fmt.Sprint(as)
	}
	return v
}

// TestKernelMonitorOverrun: the consumer stalls while dozens of interfaces
// come and go, with a tiny socket buffer, so the kernel drops events
// (ENOBUFS). The monitor must subscribe again, relist, and end with a view
// equal to the kernel's, deletions included.
func TestKernelMonitorOverrun(t *testing.T) {
	ns, peer := netnstest.New(t), netnstest.New(t)
	var (
		mu      sync.Mutex
		view    = ifaceView{}
		stalled atomic.Bool
		gate    = make(chan struct{})
	)
	// The smallest buffer the kernel allows (it rounds 1 up to ~4.6 KiB).
	m := startMonitor(t, ns, MonitorConfig{ReceiveBufferSize: 1}, func(u any) {
		if stalled.Load() {
			<-gate
		}
		mu.Lock()
		defer mu.Unlock()
		view.apply(u)
	})
	defer func() {
		if stalled.Load() {
			close(gate)
		}
	}()
	waitView := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("%s: view never matched the kernel:\n%s", what, cmp.Diff(truth(t, ns.Netlink()), view))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	same := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return cmp.Equal(truth(t, ns.Netlink()), view)
	}
	waitView("initial listing", same)

	stalled.Store(true)
	const n = 40
	for i := range n {
		netnstest.Veth(t, ns, fmt.Sprintf("cali%d", i), peer, fmt.Sprintf("p%d", i))
		if i%2 == 0 {
			ns.AddAddr(t, fmt.Sprintf("cali%d", i), fmt.Sprintf("10.1.%d.1/32", i))
		}
	}
	for i := 0; i < n; i += 3 {
		if err := ns.Netlink().LinkDel(ns.Link(t, fmt.Sprintf("cali%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	close(gate)
	stalled.Store(false)

	waitView("after the overrun", func() bool { return m.resubscribes.Load() > 0 && same() })
	t.Logf("subscriptions renewed: %d", m.resubscribes.Load())
}

// TestKernelListInterfacesNamed: the interfaces looked up by name, with
// their addresses from a dump the kernel filters by interface, are what the
// whole listing says of them; a missing one is left out.
func TestKernelListInterfacesNamed(t *testing.T) {
	ns := netnstest.New(t)
	peer := netnstest.New(t)
	netnstest.Veth(t, ns, "cali1", peer, "p1")
	netnstest.Veth(t, ns, "cali2", peer, "p2")
	netnstest.Veth(t, ns, "eth1", peer, "up1")
	ns.AddAddr(t, "eth1", "192.168.7.10/24")
	ns.AddAddr(t, "eth1", "fd00:7::10/64")
	ns.AddAddr(t, "cali2", "10.65.0.1/32")
	ns.Run(t, "ip", "link", "set", "cali1", "up")

	all, err := ListInterfaces(ns.Netlink())
	if err != nil {
		t.Fatal(err)
	}
	addrsOf := func(index int) ([]netip.Addr, error) {
		var addrs []netip.Addr
		err := ns.Do(func() error {
			var err error
			addrs, err = AddrsOfIndex(index)
			return err
		})
		return addrs, err
	}
	names := []string{"cali2", "missing", "eth1", "cali1", "lo"}
	got, err := ListInterfacesNamed(ns.Netlink(), addrsOf, names)
	if err != nil {
		t.Fatal(err)
	}
	var want []any
	for _, name := range names {
		for i, u := range all {
			if s, ok := u.(InterfaceStateUpdate); ok && s.Name == name {
				want = append(want, all[i], all[i+1])
			}
		}
	}
	if len(want) != 8 {
		t.Fatalf("the whole listing lacks interfaces: %v", all)
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("ListInterfacesNamed differs from ListInterfaces (-whole +named):\n%s", diff)
	}
}

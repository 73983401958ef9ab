package routes

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// fakeKernel is an in-memory main routing table, link list and neighbour
// table with the kernel semantics Table relies on: a route's identity is
// (destination, TOS, metric); replace overwrites the first route with that
// identity whatever its device; routes need an existing, up device; delete
// matches device, protocol and type only when given; deleting a link takes
// its routes and neighbours with it.
type fakeKernel struct {
	mu    sync.Mutex
	links map[int]*netlink.Device
	next  int
	// routes by identity (routeID), each a list as `ip route append` allows.
	routes map[string][]netlink.Route
	neighs []netlink.Neigh
	// cleaned lists every address passed to conntrack cleanup, in order.
	cleaned []netip.Addr
	calls   map[string]int
	// interrupt makes that many dumps return ErrDumpInterrupted first.
	interrupt int
	// fail returns an error for a call, by operation name, if set.
	fail func(op string, r *netlink.Route) error
	// ctGate, if set, holds conntrack cleanups until it is closed.
	ctGate chan struct{}
}

func (f *fakeKernel) setCTGate(g chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ctGate = g
}

var _ dataplane = (*fakeKernel)(nil)

func newFakeKernel() *fakeKernel {
	return &fakeKernel{links: map[int]*netlink.Device{}, next: 10, calls: map[string]int{}, routes: map[string][]netlink.Route{}}
}

// addLink creates a link, up (running) or not, and returns its index.
func (f *fakeKernel) addLink(name string, up bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	d := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Name: name, Index: f.next}}
	if up {
		d.RawFlags = unix.IFF_UP | unix.IFF_RUNNING
	}
	f.links[f.next] = d
	return f.next
}

func (f *fakeKernel) setUp(index int, up bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if up {
		f.links[index].RawFlags = unix.IFF_UP | unix.IFF_RUNNING
		return
	}
	f.links[index].RawFlags = 0
	// Like IPv4 on admin down: the device's routes are flushed.
	f.dropRoutesOf(index)
}

func (f *fakeKernel) delLink(index int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.links, index)
	f.dropRoutesOf(index)
	f.neighs = slices.DeleteFunc(f.neighs, func(n netlink.Neigh) bool { return n.LinkIndex == index })
}

// addRoute puts a route in the table directly, as someone else would.
func (f *fakeKernel) addRoute(r netlink.Route) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r.Family = familyOfIPNet(r.Dst)
	if r.Table == 0 {
		r.Table = unix.RT_TABLE_MAIN
	}
	if r.Type == 0 {
		r.Type = unix.RTN_UNICAST
	}
	f.routes[routeID(&r)] = append(f.routes[routeID(&r)], r)
}

func (f *fakeKernel) dropRoutesOf(index int) {
	for id, rs := range f.routes {
		rs = slices.DeleteFunc(rs, func(r netlink.Route) bool { return r.LinkIndex == index })
		if len(rs) == 0 {
			delete(f.routes, id)
		} else {
			f.routes[id] = rs
		}
	}
}

func (f *fakeKernel) allRoutes() []netlink.Route {
	var out []netlink.Route
	for _, rs := range f.routes {
		out = append(out, rs...)
	}
	return out
}

func (f *fakeKernel) resetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = map[string]int{}
	f.cleaned = nil
}

func (f *fakeKernel) callCounts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.calls)
}

func familyOfIPNet(n *net.IPNet) int {
	if n.IP.To4() != nil {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

func (f *fakeKernel) call(op string, r *netlink.Route) error {
	f.calls[op]++
	if f.fail != nil {
		return f.fail(op, r)
	}
	return nil
}

func (f *fakeKernel) dumpErr() error {
	if f.interrupt > 0 {
		f.interrupt--
		return netlink.ErrDumpInterrupted
	}
	return nil
}

func (f *fakeKernel) LinkList() ([]netlink.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("LinkList", nil); err != nil {
		return nil, err
	}
	var out []netlink.Link
	for _, i := range sortedKeys(f.links) {
		d := *f.links[i]
		out = append(out, &d)
	}
	return out, f.dumpErr()
}

func sortedKeys(m map[int]*netlink.Device) []int {
	var ks []int
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}

func (f *fakeKernel) LinkByName(name string) (netlink.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("LinkByName", nil); err != nil {
		return nil, err
	}
	for _, d := range f.links {
		if d.Name == name {
			c := *d
			return &c, nil
		}
	}
	return nil, netlink.LinkNotFoundError{}
}

// routeID is the kernel's identity of a route in a table.
func routeID(r *netlink.Route) string {
	table := r.Table
	if table == 0 {
		table = unix.RT_TABLE_MAIN
	}
	return fmt.Sprintf("%s|%d|%d|%d", r.Dst, r.Tos, r.Priority, table)
}

func (f *fakeKernel) RouteListFiltered(family int, filter *netlink.Route, mask uint64) ([]netlink.Route, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("RouteListFiltered", nil); err != nil {
		return nil, err
	}
	var out []netlink.Route
	for _, r := range f.allRoutes() {
		if r.Family != family {
			continue
		}
		if mask&netlink.RT_FILTER_TABLE != 0 && filter.Table != 0 && r.Table != filter.Table {
			continue
		}
		if mask&netlink.RT_FILTER_OIF != 0 && r.LinkIndex != filter.LinkIndex {
			continue
		}
		out = append(out, r)
	}
	return out, f.dumpErr()
}

func (f *fakeKernel) RouteReplace(r *netlink.Route) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("RouteReplace", r); err != nil {
		return err
	}
	if r.Type == unix.RTN_UNICAST || r.Type == 0 {
		d, ok := f.links[r.LinkIndex]
		if !ok {
			return unix.ENODEV
		}
		if d.RawFlags&unix.IFF_UP == 0 {
			return unix.ENETDOWN
		}
	}
	nr := *r
	nr.Family = familyOfIPNet(r.Dst)
	id := routeID(&nr)
	if rs := f.routes[id]; len(rs) > 0 {
		rs[0] = nr
		return nil
	}
	f.routes[id] = []netlink.Route{nr}
	return nil
}

func (f *fakeKernel) RouteDel(r *netlink.Route) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("RouteDel", r); err != nil {
		return err
	}
	id := routeID(r)
	rs := f.routes[id]
	for i := range rs {
		have := &rs[i]
		if (r.LinkIndex != 0 && r.LinkIndex != have.LinkIndex) ||
			(r.Protocol != 0 && r.Protocol != have.Protocol) ||
			(r.Type != 0 && r.Type != have.Type) ||
			(have.Family == netlink.FAMILY_V4 && r.Scope != have.Scope) {
			continue
		}
		rs = slices.Delete(rs, i, i+1)
		if len(rs) == 0 {
			delete(f.routes, id)
		} else {
			f.routes[id] = rs
		}
		return nil
	}
	return unix.ESRCH
}

func (f *fakeKernel) NeighList(index, family int) ([]netlink.Neigh, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("NeighList", nil); err != nil {
		return nil, err
	}
	var out []netlink.Neigh
	for _, n := range f.neighs {
		if n.Family == family && (index == 0 || n.LinkIndex == index) {
			out = append(out, n)
		}
	}
	return out, f.dumpErr()
}

func (f *fakeKernel) NeighSet(n *netlink.Neigh) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("NeighSet", nil); err != nil {
		return err
	}
	if _, ok := f.links[n.LinkIndex]; !ok {
		return unix.ENODEV
	}
	for i := range f.neighs {
		if f.neighs[i].LinkIndex == n.LinkIndex && f.neighs[i].IP.Equal(n.IP) {
			f.neighs[i] = *n
			return nil
		}
	}
	f.neighs = append(f.neighs, *n)
	return nil
}

func (f *fakeKernel) NeighDel(n *netlink.Neigh) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("NeighDel", nil); err != nil {
		return err
	}
	for i := range f.neighs {
		if f.neighs[i].LinkIndex == n.LinkIndex && f.neighs[i].IP.Equal(n.IP) {
			f.neighs = slices.Delete(f.neighs, i, i+1)
			return nil
		}
	}
	return unix.ENOENT
}

func (f *fakeKernel) delNeigh(index int, ip string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.neighs = slices.DeleteFunc(f.neighs, func(n netlink.Neigh) bool {
		return n.LinkIndex == index && n.IP.String() == ip
	})
}

func (f *fakeKernel) ConntrackDeleteFilters(_ netlink.ConntrackTableType, _ netlink.InetFamily, filters ...netlink.CustomConntrackFilter) (uint, error) {
	f.mu.Lock()
	gate := f.ctGate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("ConntrackDeleteFilters", nil); err != nil {
		return 0, err
	}
	for _, flt := range filters {
		for ip := range flt.(ipSetFilter) {
			f.cleaned = append(f.cleaned, ip)
		}
	}
	slices.SortFunc(f.cleaned, func(a, b netip.Addr) int { return a.Compare(b) })
	return 0, nil
}

// dump renders the routes and neighbours like `ip route; ip neigh`, sorted,
// with device names, for golden comparisons.
func (f *fakeKernel) dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := func(i int) string {
		if d, ok := f.links[i]; ok {
			return d.Name
		}
		return fmt.Sprintf("if%d", i)
	}
	var lines []string
	for _, r := range f.allRoutes() {
		s := r.Dst.String()
		if r.Type == unix.RTN_BLACKHOLE {
			s = "blackhole " + s
		}
		if r.Gw != nil {
			s += " via " + r.Gw.String()
		}
		if r.LinkIndex != 0 {
			s += " dev " + name(r.LinkIndex)
		}
		if r.Flags&int(netlink.FLAG_ONLINK) != 0 {
			s += " onlink"
		}
		if r.MTU != 0 {
			s += fmt.Sprintf(" mtu %d", r.MTU)
		}
		s += fmt.Sprintf(" proto %s", protoName(r.Protocol))
		if r.Family == netlink.FAMILY_V4 {
			s += " scope " + scopeName(r.Scope)
		}
		s += fmt.Sprintf(" metric %d", r.Priority)
		if r.Src != nil {
			s += " src " + r.Src.String()
		}
		lines = append(lines, s)
	}
	for _, n := range f.neighs {
		lines = append(lines, fmt.Sprintf("neigh %s dev %s lladdr %s state %#x", n.IP, name(n.LinkIndex), n.HardwareAddr, n.State))
	}
	if len(lines) == 0 {
		return ""
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

func protoName(p netlink.RouteProtocol) string {
	switch p {
	case unix.RTPROT_KERNEL:
		return "kernel"
	case unix.RTPROT_BOOT:
		return "boot"
	case unix.RTPROT_STATIC:
		return "static"
	}
	return fmt.Sprint(int(p))
}

func scopeName(s netlink.Scope) string {
	switch s {
	case netlink.SCOPE_LINK:
		return "link"
	case netlink.SCOPE_UNIVERSE:
		return "global"
	}
	return fmt.Sprint(int(s))
}

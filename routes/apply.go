package routes

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Apply brings the kernel in line with the desired routes.
//
// It starts with a full resync when one is queued or due (at the first call,
// after QueueResync, every ResyncInterval unless the kernel's events are
// trusted, see EventsSubscribed); then rescans the interfaces that
// came up or returned an ENODEV-style error; then fixes every key that
// changed since the last Apply, in three steps: deletions; conntrack cleanup
// of deleted or moved /32 and /128 addresses, queued to run in the background
// (B10); and additions with their static neighbours. An addition whose
// address has a cleanup still pending or running waits for it, so that only
// old flows are cut; unrelated additions do not. That wait happens without
// the table's lock, so SetRoutes and OnIfaceStateChanged are not held up by
// a conntrack dump; afterwards Apply plans the waiting keys again, with
// whatever changed meanwhile, so a route that is no longer wanted is not
// added. After maxCTWaits such waits, what is still waiting is left for the
// next Apply, and NextDeadline asks for it at once.
//
// Errors that mean the interface is down or gone are not returned (B9): the
// interface is looked up again and its routes follow its state. Other errors
// name the route and are returned joined; their keys are retried by the next
// Apply. Conntrack failures are only logged.
func (t *Table) Apply() error {
	t.applyMu.Lock()
	defer t.applyMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ctDeferred = false
	now := t.cfg.Clock()
	periodic := t.cfg.ResyncInterval > 0 && !t.eventsTrusted && !now.Before(t.lastResync.Add(t.cfg.ResyncInterval))
	if t.needResync || periodic {
		before := maps.Clone(t.dirty)
		if err := t.resync(now); err != nil {
			t.needResync = true
			return fmt.Errorf("resync routes: %w", err)
		}
		t.resyncDirty = map[routeKey]struct{}{}
		for k := range t.dirty {
			if _, ok := before[k]; !ok {
				t.resyncDirty[k] = struct{}{}
			}
		}
		defer func() { t.resyncDirty = nil }()
	}
	failed := map[routeKey]bool{}
	failedScans := map[string]bool{}
	var errs []error
	// Another pass when additions wait for conntrack cleanups (after the
	// wait), or once when a pass met a gone interface: looking it up
	// settles its state, and its routes follow in the same Apply.
	lookedUp, waits := false, 0
	for {
		errs = append(errs, t.rescanQueued(now, failedScans)...)
		t.expireGrace(now)
		var lookups bool
		var waitFor []netip.Addr
		errs = append(errs, t.applyDirty(now, failed, &lookups, &waitFor)...)
		if len(waitFor) > 0 {
			if waits == maxCTWaits {
				// Only a caller that keeps moving these addresses
				// while we wait gets here; the keys stay dirty.
				t.ctDeferred = true
				break
			}
			waits++
			t.mu.Unlock()
			t.ct.waitAll(waitFor)
			t.mu.Lock()
			now = t.cfg.Clock()
			continue
		}
		if !lookups || lookedUp {
			break
		}
		lookedUp = true
	}
	return errors.Join(errs...)
}

// maxCTWaits bounds the conntrack waits of one Apply. A second wait needs
// the address to be removed or moved again during the first.
const maxCTWaits = 4

// listLinks lists every link: through the pipe's lean dump when the table
// has one (pipe.links), else through the dataplane's LinkList.
func (t *Table) listLinks() ([]linkBrief, error) {
	if t.pipe != nil {
		return retryDump(t.pipe.links)
	}
	links, err := retryDump(t.dp.LinkList)
	if err != nil {
		return nil, err
	}
	out := make([]linkBrief, len(links))
	for i, l := range links {
		a := l.Attrs()
		out[i] = linkBrief{index: a.Index, name: a.Name, running: linkOperUp(l)}
	}
	return out, nil
}

// resync relists links, all routes of the main table and the permanent
// neighbours, replaces the view with them, and marks every key dirty.
func (t *Table) resync(now time.Time) error {
	links, err := t.listLinks()
	if err != nil {
		return fmt.Errorf("list links: %w", err)
	}
	seen := make(map[string]bool, len(links))
	for _, l := range links {
		seen[l.name] = true
		t.setLink(l.name, l.index, l.running, now, true)
	}
	for name := range t.ifaces {
		if !seen[name] {
			t.forgetIface(name)
		}
	}

	t.kernel = map[routeKey][]kroute{}
	t.kernelOn = map[int]*smallMap[routeKey, struct{}]{}
	for _, fam := range t.families {
		rs, err := retryDump(func() ([]netlink.Route, error) {
			return t.dp.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		})
		if err != nil {
			return fmt.Errorf("list %s routes: %w", familyName(fam), err)
		}
		for _, r := range rs {
			t.trackKernel(r)
		}
	}
	t.neighs = map[int]*smallMap[netip.Addr, string]{}
	if t.familyEnabled(netlink.FAMILY_V4) {
		ns, err := retryDump(func() ([]netlink.Neigh, error) { return t.dp.NeighList(0, netlink.FAMILY_V4) })
		if err != nil {
			return fmt.Errorf("list neighbours: %w", err)
		}
		for _, n := range ns {
			t.trackNeigh(n)
		}
	}

	for k := range t.wanted {
		t.dirty[k] = struct{}{}
	}
	for k := range t.kernel {
		t.dirty[k] = struct{}{}
	}
	clear(t.rescan)
	t.lastResync = now
	t.needResync = false
	return nil
}

// trackKernel adds a kernel route to the view if it is ours (B6) or has a
// key we want (we will overwrite it, so we must know it is there).
func (t *Table) trackKernel(r netlink.Route) {
	if r.Table != unix.RT_TABLE_MAIN {
		return
	}
	dst, ok := ipNetToPrefix(r.Dst, r.Family)
	if !ok || !t.familyEnabled(familyOf(dst)) {
		return
	}
	k, kr := keyOf(r, dst)
	if !t.owns(k, kr) && len(t.wanted[k]) == 0 {
		return
	}
	t.addKernel(k, kr)
}

// keyOf returns the key and attributes of kernel route r with destination
// dst. A route that is not unicast (blackhole, unreachable...) has no
// interface: the kernel lists IPv6 ones on lo.
func keyOf(r netlink.Route, dst netip.Prefix) (routeKey, kroute) {
	k := routeKey{dst: dst, tos: r.Tos, metric: r.Priority}
	kr := kroute{
		ifindex: r.LinkIndex,
		proto:   r.Protocol,
		scope:   r.Scope,
		typ:     r.Type,
		src:     ipToAddr(r.Src),
		gw:      ipToAddr(r.Gw),
		onlink:  r.Flags&int(netlink.FLAG_ONLINK) != 0,
		mtu:     r.MTU,
		via:     len(r.MultiPath) > 0 || r.Via != nil || r.Encap != nil,
	}
	if kr.typ != unix.RTN_UNICAST {
		kr.ifindex = 0
	}
	return k, kr
}

func (t *Table) addKernel(k routeKey, kr kroute) {
	for _, have := range t.kernel[k] {
		if have == kr {
			return
		}
	}
	t.kernel[k] = append(t.kernel[k], kr)
	on := t.kernelOn[kr.ifindex]
	if on == nil {
		on = &smallMap[routeKey, struct{}]{}
		t.kernelOn[kr.ifindex] = on
	}
	on.put(k, struct{}{})
}

func (t *Table) removeKernel(k routeKey, kr kroute) {
	krs := t.kernel[k]
	out := krs[:0]
	stillOn := false
	for _, have := range krs {
		if have == kr {
			continue
		}
		out = append(out, have)
		stillOn = stillOn || have.ifindex == kr.ifindex
	}
	if len(out) == 0 {
		delete(t.kernel, k)
	} else {
		t.kernel[k] = out
	}
	if !stillOn {
		if on := t.kernelOn[kr.ifindex]; on != nil {
			on.del(k)
			if on.len() == 0 {
				delete(t.kernelOn, kr.ifindex)
			}
		}
	}
}

// setNeigh records a permanent neighbour entry of the kernel.
func (t *Table) setNeigh(index int, addr netip.Addr, mac string) {
	m := t.neighs[index]
	if m == nil {
		m = &smallMap[netip.Addr, string]{}
		t.neighs[index] = m
	}
	m.put(addr, mac)
}

func (t *Table) trackNeigh(n netlink.Neigh) {
	if n.State&netlink.NUD_PERMANENT == 0 || n.HardwareAddr == nil {
		return
	}
	ip := ipToAddr(n.IP)
	if !ip.Is4() {
		return
	}
	t.setNeigh(n.LinkIndex, ip, n.HardwareAddr.String())
}

// rescanQueued re-reads the routes (and, after an ENODEV-style error, the
// link) of each queued interface. A failing rescan stays queued.
// Interfaces in skip already failed in this Apply and are left for the next.
func (t *Table) rescanQueued(now time.Time, skip map[string]bool) []error {
	var errs []error
	for name, lookup := range t.rescan {
		if skip[name] {
			continue
		}
		if err := t.rescanIface(name, lookup, now); err != nil {
			skip[name] = true
			errs = append(errs, err)
			continue
		}
		delete(t.rescan, name)
	}
	return errs
}

func (t *Table) rescanIface(name string, lookup bool, now time.Time) error {
	if lookup {
		l, err := t.dp.LinkByName(name)
		switch {
		case isLinkGone(err):
			t.forgetIface(name)
			return nil
		case err != nil:
			return fmt.Errorf("look up interface %s: %w", name, err)
		}
		t.setLink(name, l.Attrs().Index, linkOperUp(l), now, true)
	}
	rec := t.ifaces[name]
	if rec == nil || !rec.up {
		return nil
	}
	index := rec.index
	var routes []netlink.Route
	for _, fam := range t.families {
		rs, err := retryDump(func() ([]netlink.Route, error) {
			return t.dp.RouteListFiltered(fam, &netlink.Route{LinkIndex: index, Table: unix.RT_TABLE_MAIN},
				netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
		})
		if err != nil {
			return fmt.Errorf("list %s routes of %s: %w", familyName(fam), name, err)
		}
		routes = append(routes, rs...)
	}
	var neighs []netlink.Neigh
	if t.familyEnabled(netlink.FAMILY_V4) {
		var err error
		neighs, err = retryDump(func() ([]netlink.Neigh, error) { return t.dp.NeighList(index, netlink.FAMILY_V4) })
		if err != nil && !isLinkGone(err) {
			return fmt.Errorf("list neighbours of %s: %w", name, err)
		}
	}

	// Replace the view of this interface with what was read.
	for k := range t.kernelOn[index].keys() {
		t.kernel[k] = removeIndex(t.kernel[k], index)
		if len(t.kernel[k]) == 0 {
			delete(t.kernel, k)
		}
		t.dirty[k] = struct{}{}
	}
	delete(t.kernelOn, index)
	for _, r := range routes {
		if r.LinkIndex == index {
			t.trackKernel(r)
		}
	}
	delete(t.neighs, index)
	for _, n := range neighs {
		if n.LinkIndex == index {
			t.trackNeigh(n)
		}
	}
	t.markKernelDirty(index)
	t.markDesiredDirty(name)
	return nil
}

// expireGrace marks the routes spared on interfaces whose grace period has
// ended, so that this Apply removes them.
func (t *Table) expireGrace(now time.Time) {
	for name, end := range t.graceWatch {
		if now.Before(end) {
			continue
		}
		delete(t.graceWatch, name)
		if rec := t.ifaces[name]; rec != nil {
			rec.graceOver = true
			t.markKernelDirty(rec.index)
		}
	}
}

// addOp is a planned route write.
type addOp struct {
	key  routeKey
	want kroute
	name string
	// inPlace is the route being replaced on the same interface, if any.
	inPlace *kroute
}

type delOp struct {
	key routeKey
	kr  kroute
}

// applyDirty plans and writes the changes of every dirty key not in skip.
// Keys that fail are added to skip (so a second pass does not report them
// twice) and stay dirty for the next Apply. Keys that met a gone interface
// only stay dirty, and *lookups tells the caller to look the interface up.
// Additions of an address with a conntrack cleanup pending or running are
// not written: their keys stay dirty and the address goes to *waitFor, for
// the caller to wait on without the lock, then plan again (B10).
func (t *Table) applyDirty(now time.Time, skip map[routeKey]bool, lookups *bool, waitFor *[]netip.Addr) []error {
	var (
		dels     []delOp
		adds     []addOp
		cutAddrs []netip.Addr
		// touched holds the static neighbours to reconcile: every
		// (interface, IPv4 address) whose route was kept, added or deleted.
		touched = map[neighKey]*neighTouch{}
	)
	cut := func(k routeKey) {
		if k.host() {
			cutAddrs = append(cutAddrs, k.dst.Addr())
		}
	}
	touch := func(k routeKey, index int, mac net.HardwareAddr) {
		if k.family() != netlink.FAMILY_V4 || index == 0 {
			return
		}
		nk := neighKey{index, k.dst.Addr()}
		if tc := touched[nk]; tc != nil {
			if mac != nil {
				tc.mac = mac
			}
			return
		}
		touched[nk] = &neighTouch{key: k, mac: mac}
	}

	for k := range t.dirty {
		if skip[k] {
			continue
		}
		delete(t.dirty, k)
		have := t.kernel[k]
		name, index, tg, ok := t.winner(k)
		if !ok {
			for _, kr := range have {
				if end, spared := t.inGrace(t.byIndex[kr.ifindex], now); spared {
					t.graceWatch[t.byIndex[kr.ifindex]] = end
					continue
				}
				dels = append(dels, delOp{k, kr})
				cut(k)
				touch(k, kr.ifindex, nil)
			}
			continue
		}
		want := t.wantRoute(k, index, tg)
		touch(k, index, tg.DestMAC)
		match := -1
		for i, kr := range have {
			if kr == want {
				match = i
				break
			}
		}
		var inPlace *kroute
		switch {
		case match >= 0:
			// Already right; stray extra routes for the key go.
		case len(have) == 1 && have[0].ifindex == index:
			// Same interface, other attributes (protocol, src...): one
			// replace fixes it without a moment with no route.
			inPlace = &have[0]
		}
		for i, kr := range have {
			if i == match || (inPlace != nil && i == 0) {
				continue
			}
			dels = append(dels, delOp{k, kr})
			if kr.ifindex != index {
				cut(k) // the address moved to another interface
				touch(k, kr.ifindex, nil)
			}
		}
		if match < 0 {
			adds = append(adds, addOp{key: k, want: want, name: name, inPlace: inPlace})
		}
	}

	var errs []error
	fail := func(k routeKey, err error) {
		t.dirty[k] = struct{}{}
		skip[k] = true
		errs = append(errs, err)
	}
	gone := func(k routeKey, name string) {
		t.dirty[k] = struct{}{}
		if name != "" {
			t.rescan[name] = true
			*lookups = true
		}
	}

	for _, d := range dels {
		err := t.dp.RouteDel(t.delRoute(d.key, d.kr))
		if err != nil && !isNotFound(err) && !isLinkGone(err) {
			fail(d.key, fmt.Errorf("delete route %s: %w", t.describe(d.key, d.kr), err))
			continue
		}
		if err == nil {
			t.countWrite(d.key, false)
		}
		t.removeKernel(d.key, d.kr)
	}

	t.cleanConntrack(cutAddrs)

	// The additions go to the kernel together (batchWriter: many in
	// flight, each acknowledgement matched to its route).
	ready := adds[:0]
	var rs []*netlink.Route
	for _, a := range adds {
		if a.key.host() && t.conntrack && t.ct.busy(a.key.dst.Addr()) {
			// B10: never add an address while its old flows are being
			// cut. Only this Apply queues cleanups, so an address that is
			// not busy now stays so until the add.
			t.dirty[a.key] = struct{}{}
			*waitFor = append(*waitFor, a.key.dst.Addr())
			continue
		}
		ready = append(ready, a)
		rs = append(rs, t.addRoute(a.key, a.want))
	}
	var addErrs []error
	if len(rs) > 0 {
		addErrs = t.batch.RouteReplaceAll(rs)
	}
	for i, a := range ready {
		err := addErrs[i]
		switch {
		case err == nil:
			t.countWrite(a.key, true)
			if a.inPlace != nil {
				t.removeKernel(a.key, *a.inPlace)
			}
			t.addKernel(a.key, a.want)
		case isLinkGone(err):
			t.log.Debug("interface down or gone, will look it up again", "iface", a.name, "route", t.describe(a.key, a.want), "error", err)
			gone(a.key, a.name)
		default:
			t.unknownOutcome(err)
			fail(a.key, fmt.Errorf("add route %s: %w", t.describe(a.key, a.want), err))
		}
	}

	// Neighbours: deletions one by one (rare: a workload gone or moved),
	// sets together.
	var (
		sets    []*netlink.Neigh
		setKeys []neighKey
	)
	for nk, tc := range touched {
		n, err := t.reconcileNeigh(nk, tc.mac)
		if n != nil {
			sets = append(sets, n)
			setKeys = append(setKeys, nk)
			continue
		}
		if err != nil {
			if isLinkGone(err) {
				gone(tc.key, t.byIndex[nk.index])
				continue
			}
			fail(tc.key, err)
		}
	}
	var setErrs []error
	if len(sets) > 0 {
		setErrs = t.batch.NeighSetAll(sets)
	}
	for i, n := range sets {
		nk, tc := setKeys[i], touched[setKeys[i]]
		err := setErrs[i]
		switch {
		case err == nil:
			t.setNeigh(nk.index, nk.addr, n.HardwareAddr.String())
		case isLinkGone(err):
			gone(tc.key, t.byIndex[nk.index])
		default:
			t.unknownOutcome(err)
			fail(tc.key, fmt.Errorf("set neighbour %s lladdr %s dev %s: %w", nk.addr, n.HardwareAddr, t.devName(nk.index), err))
		}
	}
	return errs
}

// unknownOutcome queues a resync when err says a write may or may not
// have happened: the view of the kernel cannot be trusted until reread.
func (t *Table) unknownOutcome(err error) {
	if errors.Is(err, ErrOutcomeUnknown) {
		t.needResync = true
	}
}

// neighKey names a static neighbour: interface index and IPv4 address.
type neighKey struct {
	index int
	addr  netip.Addr
}

// neighTouch is a neighbour to reconcile: the key that touched it (to
// retry), and the MAC that key wants there, if it won the interface.
type neighTouch struct {
	key routeKey
	mac net.HardwareAddr
}

// reconcileNeigh makes the permanent neighbour entry for nk match what the
// winning targets on that interface want (B5): set it when a target has a
// MAC, like Felix, for the CIDR's address whatever the prefix length.
//
//	ip neigh replace <addr> lladdr <mac> dev <if> nud permanent
//
// A set is returned for the caller to write (with the others, see
// batchWriter), and to record once it succeeded. When no target wants it
// any more, a permanent entry on a workload interface is deleted here
// (`ip neigh del <addr> dev <if>`). Felix leaves it; but a permanent entry
// never expires, and an interface that outlives its address (a changed IP)
// would keep answering for it.
func (t *Table) reconcileNeigh(nk neighKey, mac net.HardwareAddr) (*netlink.Neigh, error) {
	if mac == nil {
		mac = t.neighWanted(nk)
	}
	have, ok := t.neighs[nk.index].get(nk.addr)
	switch {
	case mac != nil && have != mac.String():
		return &netlink.Neigh{
			LinkIndex:    nk.index,
			Family:       netlink.FAMILY_V4,
			State:        netlink.NUD_PERMANENT,
			IP:           nk.addr.AsSlice(),
			HardwareAddr: mac,
		}, nil
	case mac == nil && ok && t.isWorkload(t.byIndex[nk.index]):
		err := t.dp.NeighDel(&netlink.Neigh{LinkIndex: nk.index, Family: netlink.FAMILY_V4, IP: nk.addr.AsSlice()})
		if err != nil && !isNotFound(err) && !isLinkGone(err) {
			return nil, fmt.Errorf("delete neighbour %s dev %s: %w", nk.addr, t.devName(nk.index), err)
		}
		t.neighs[nk.index].del(nk.addr)
	}
	return nil, nil
}

// neighWanted returns the MAC that a winning target on nk's interface wants
// for nk's address, or nil. It looks at that interface's targets only.
func (t *Table) neighWanted(nk neighKey) net.HardwareAddr {
	name := t.byIndex[nk.index]
	for _, kt := range t.desired[name] {
		k, tg := kt.key, kt.target
		if tg.DestMAC == nil || k.dst.Addr() != nk.addr {
			continue
		}
		if _, index, _, ok := t.winner(k); ok && index == nk.index {
			return tg.DestMAC
		}
	}
	return nil
}

// addRoute builds the route we write (B4):
//
//	ip route replace <dst> dev <if> proto <p> scope link metric <m> [src <s>]
//
// or, for cluster routes (package overlay),
//
//	ip route replace <dst> via <gw> dev <if> onlink proto <p> metric <m> mtu <mtu>
//	ip route replace blackhole <dst> proto <p> metric <m>
func (t *Table) addRoute(k routeKey, kr kroute) *netlink.Route {
	r := &netlink.Route{
		LinkIndex: kr.ifindex,
		Dst:       prefixToIPNet(k.dst),
		Priority:  k.metric,
		Tos:       k.tos,
		Table:     unix.RT_TABLE_MAIN,
		Protocol:  kr.proto,
		Scope:     kr.scope,
		Type:      kr.typ,
		MTU:       kr.mtu,
	}
	if kr.src.IsValid() {
		r.Src = kr.src.AsSlice()
	}
	if kr.gw.IsValid() {
		r.Gw = kr.gw.AsSlice()
	}
	if kr.onlink {
		r.Flags = int(netlink.FLAG_ONLINK)
	}
	return r
}

// delRoute builds the delete of one kernel route:
//
//	ip route del <dst> [dev <if>] proto <p> scope <s> metric <m> [tos <t>] table main
//
// Protocol, type and device pick the one route among several of the same
// key; the scope must be the route's own, because the library always sends
// one and the kernel only ignores RT_SCOPE_NOWHERE.
func (t *Table) delRoute(k routeKey, kr kroute) *netlink.Route {
	r := &netlink.Route{
		Dst:      prefixToIPNet(k.dst),
		Priority: k.metric,
		Tos:      k.tos,
		Table:    unix.RT_TABLE_MAIN,
		Protocol: kr.proto,
		Scope:    kr.scope,
		Type:     kr.typ,
	}
	if !kr.via && kr.ifindex != 0 {
		r.LinkIndex = kr.ifindex
	}
	return r
}

// cleanConntrack hands the addresses of deleted or moved host routes to
// the background cleaner (B10).
func (t *Table) cleanConntrack(addrs []netip.Addr) {
	if len(addrs) == 0 {
		return
	}
	if !t.conntrack {
		if !t.warnedCT {
			t.warnedCT = true
			t.log.Warn("netlink handle has no netfilter socket: conntrack entries of removed routes are not cleaned")
		}
		return
	}
	t.ct.queue(addrs)
}

func familyName(fam int) string {
	if fam == netlink.FAMILY_V6 {
		return "IPv6"
	}
	return "IPv4"
}

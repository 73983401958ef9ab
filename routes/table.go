package routes

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Table reconciles the routes and static neighbours that callers want per
// interface with the kernel's main routing table (as Felix's
// felix/routetable/route_table.go; rules B1–B11 in docs/acceptance-cases.md).
//
// Callers state the desired targets with SetRoutes and report interfaces
// with OnIfaceStateChanged; Apply then writes only what changed. Table keeps
// its own view of the kernel (refreshed by full resyncs and per-interface
// rescans), so an Apply after one SetRoutes sends only that interface's
// changes and reads nothing back: its cost does not grow with the table.
//
// Ownership (B6): a kernel route is ours, and removed when nobody wants it,
// if it has our protocol and that protocol is not boot (the one `ip route
// add` uses), or protocol 80 when ours is boot; or if it sits on a workload
// interface and either RemoveExternalRoutes is on or its protocol is boot or
// 80. Other routes are never touched unless we want their exact key, nor is
// IPv6's fe80::/64.
//
// All methods are safe for concurrent use. Applies run one at a time and
// hold the table while they read and write the kernel, but not while an
// addition waits for a conntrack cleanup (B10), which lasts as long as a
// conntrack dump: SetRoutes, OnIfaceStateChanged and the rest go on
// meanwhile, and Apply re-plans the waiting keys with their changes.
type Table struct {
	// applyMu serialises Apply and Close; mu guards every field below
	// and is released while Apply waits for conntrack cleanups.
	applyMu sync.Mutex
	mu      sync.Mutex

	cfg Config // with defaults filled in
	dp  dataplane
	own *netlink.Handle // created by New, closed by Close
	// batch writes routes and neighbours in bulk: the dataplane itself
	// when it can, else pipe (opened by New, closed by Close), else one
	// at a time through dp.
	batch          batchWriter
	pipe           *pipe
	log            *slog.Logger
	families       []int
	exclusive      map[netlink.RouteProtocol]bool
	removeExternal bool
	// conntrack is false when the handle has no netfilter socket: the
	// library would then open one in the caller's namespace, and delete
	// conntrack entries of the wrong network namespace.
	conntrack bool
	ct        *ctCleaner

	// Interfaces by name, and names by index.
	ifaces  map[string]*iface
	byIndex map[int]string

	// desired holds the targets per interface, keyed like kernel routes;
	// wanted lists, per key, the interfaces that want it (B3 conflicts):
	// nearly always one, so a slice rather than a set (a map per route
	// was a tenth of a cold apply's live heap).
	desired map[string]targetSet
	wanted  map[routeKey][]string

	// kernel is our view of the kernel's routes that we track (ours, or a
	// key we want), per key and per interface index; neighs is the view of
	// permanent IPv4 neighbour entries (MAC as text) per index and address.
	kernel   map[routeKey][]kroute
	kernelOn map[int]*smallMap[routeKey, struct{}]
	neighs   map[int]*smallMap[netip.Addr, string]

	// dirty keys are compared and fixed by the next Apply.
	dirty map[routeKey]struct{}
	// rescan lists interfaces whose routes must be re-read; true means
	// the link itself must be looked up first (after an ENODEV-style error).
	rescan map[string]bool
	// graceWatch holds, per workload interface in its grace period that
	// has routes we spared, when the grace period ends.
	graceWatch map[string]time.Time
	// adopted holds the interfaces (name → index) an earlier process
	// wanted routes on (see Adopt): no grace period for them.
	adopted map[string]int

	needResync bool
	// eventsTrusted: the kernel's route and neighbour events reach the
	// table from a subscription that reports any loss (EventsSubscribed),
	// so the periodic resync has nothing to find.
	eventsTrusted bool
	lastResync    time.Time
	warnedCT      bool
	// ctDeferred is set when an Apply gave up waiting for conntrack
	// cleanups (maxCTWaits) with additions left dirty: NextDeadline then
	// asks for another Apply at once.
	ctDeferred bool

	// stats counts the writes since the last TakeStats; resyncDirty holds,
	// during an Apply that resynced, the keys only the resync marked dirty
	// (their writes are repairs).
	stats       Stats
	resyncDirty map[routeKey]struct{}
}

// iface is what the table knows of one interface.
type iface struct {
	index int
	up    bool
	// firstSeen starts the grace period; graceOver ends it for good, once
	// it ran out or once we wanted a route on the interface (B7).
	firstSeen time.Time
	graceOver bool
}

// routeKey identifies a route in the main table as the kernel does:
// destination, TOS and metric (B2). Routes that differ only in the device
// replace one another.
type routeKey struct {
	dst    netip.Prefix
	tos    int
	metric int
}

func (k routeKey) family() int { return familyOf(k.dst) }

// host reports a /32 or /128: conntrack entries follow such routes (B10).
func (k routeKey) host() bool { return k.dst.IsSingleIP() }

// kroute is one kernel route for a key: the attributes we compare.
type kroute struct {
	ifindex int
	proto   netlink.RouteProtocol
	scope   netlink.Scope
	typ     int
	src     netip.Addr
	// gw is the gateway, onlink its RTNH_F_ONLINK flag; mtu the mtu
	// metric (0: none).
	gw     netip.Addr
	onlink bool
	mtu    int
	// via: a multipath, encap or via route; never one of ours as we write
	// them, so always rewritten if we want its key.
	via bool
}

// New returns a Table for cfg. It reads nothing yet: the first Apply starts
// with a full resync.
func New(cfg Config) (*Table, error) {
	var own *netlink.Handle
	if cfg.Netlink == nil {
		h, err := netlink.NewHandle()
		if err != nil {
			return nil, fmt.Errorf("open netlink handle: %w", err)
		}
		own, cfg.Netlink = h, h
	}
	t, err := newTable(cfg, cfg.Netlink)
	if err != nil {
		if own != nil {
			own.Close()
		}
		return nil, err
	}
	t.own = own
	t.conntrack = cfg.Netlink.SupportsNetlinkFamily(unix.NETLINK_NETFILTER)
	if ns := cfg.Namespace; ns != nil || own != nil {
		at := netns.None()
		if ns != nil {
			at = *ns
		}
		p, err := openPipe(at)
		if err != nil {
			if own != nil {
				own.Close()
			}
			return nil, err
		}
		t.pipe, t.batch = p, p
	}
	return t, nil
}

// newTable builds a Table over any dataplane (the fake in unit tests).
func newTable(cfg Config, dp dataplane) (*Table, error) {
	switch cfg.IPVersion {
	case 0:
	case 4, 6:
	default:
		return nil, fmt.Errorf("invalid IPVersion %d: want 4, 6 or 0 for both", cfg.IPVersion)
	}
	if cfg.Protocol == 0 {
		cfg.Protocol = DefaultProtocol
	}
	if cfg.Metric == 0 {
		cfg.Metric = DefaultMetric
	}
	if cfg.Metric < 0 {
		return nil, fmt.Errorf("invalid Metric %d", cfg.Metric)
	}
	if cfg.InterfacePrefixes == nil {
		cfg.InterfacePrefixes = []string{"cali"}
	}
	for _, p := range cfg.InterfacePrefixes {
		if p == "" {
			return nil, errors.New("invalid InterfacePrefixes: empty prefix would make every interface a workload")
		}
	}
	if cfg.GracePeriod == 0 {
		cfg.GracePeriod = DefaultGracePeriod
	}
	if cfg.ResyncInterval == 0 {
		cfg.ResyncInterval = DefaultResyncInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.SourceAddressV4.IsValid() && !cfg.SourceAddressV4.Is4() {
		return nil, fmt.Errorf("invalid SourceAddressV4 %s: not IPv4", cfg.SourceAddressV4)
	}
	if cfg.SourceAddressV6.IsValid() && !cfg.SourceAddressV6.Is6() {
		return nil, fmt.Errorf("invalid SourceAddressV6 %s: not IPv6", cfg.SourceAddressV6)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Table{
		cfg:            cfg,
		dp:             dp,
		log:            log,
		removeExternal: cfg.RemoveExternalRoutes == nil || *cfg.RemoveExternalRoutes,
		conntrack:      true,
		ifaces:         map[string]*iface{},
		byIndex:        map[int]string{},
		desired:        map[string]targetSet{},
		wanted:         map[routeKey][]string{},
		kernel:         map[routeKey][]kroute{},
		kernelOn:       map[int]*smallMap[routeKey, struct{}]{},
		neighs:         map[int]*smallMap[netip.Addr, string]{},
		dirty:          map[routeKey]struct{}{},
		rescan:         map[string]bool{},
		graceWatch:     map[string]time.Time{},
		adopted:        map[string]int{},
		needResync:     true,
	}
	t.ct = newCTCleaner(dp, log)
	t.batch = oneByOne{dp}
	if b, ok := dp.(batchWriter); ok {
		t.batch = b
	}
	if cfg.IPVersion != 6 {
		t.families = append(t.families, netlink.FAMILY_V4)
	}
	if cfg.IPVersion != 4 {
		t.families = append(t.families, netlink.FAMILY_V6)
	}
	// B6: with the default protocol (boot, which `ip route add` also
	// uses), only protocol 80 marks our routes everywhere; boot routes
	// are ours only on workload interfaces.
	if cfg.Protocol == DefaultProtocol {
		t.exclusive = map[netlink.RouteProtocol]bool{legacyProtocol: true}
	} else {
		t.exclusive = map[netlink.RouteProtocol]bool{cfg.Protocol: true}
	}
	return t, nil
}

// Close waits for a running Apply and for background conntrack cleanups to
// finish, then releases the netlink handle that New opened when
// Config.Netlink was nil. A handle passed in Config stays open, but must
// outlive Close.
func (t *Table) Close() {
	t.applyMu.Lock()
	defer t.applyMu.Unlock()
	t.ct.waitIdle()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.own != nil {
		t.own.Close()
		t.own = nil
	}
	t.pipe.close()
	t.pipe = nil
}

// SetRoutes replaces every target of interface name; nil or empty removes
// them all (B1). Nothing reaches the kernel before Apply. Invalid targets
// (no CIDR, or a family this table does not manage) are logged and skipped;
// of two targets with the same CIDR and priority, the last wins.
func (t *Table) SetRoutes(name string, targets []Target) {
	t.mu.Lock()
	defer t.mu.Unlock()

	next := make(map[routeKey]Target, len(targets))
	for _, tg := range targets {
		if !tg.CIDR.IsValid() || tg.CIDR.Addr().Is4In6() {
			t.log.Error("skipping invalid route target", "iface", name, "target", tg.String())
			continue
		}
		tg.CIDR = tg.CIDR.Masked()
		if !t.familyEnabled(familyOf(tg.CIDR)) {
			t.log.Error("skipping route target of a family this table does not manage",
				"iface", name, "target", tg.String(), "ipVersion", t.cfg.IPVersion)
			continue
		}
		switch tg.Priority {
		case 0:
			tg.Priority = t.cfg.Metric
		case MetricZero:
			tg.Priority = 0
		}
		if tg.Gateway.IsValid() && familyOf(netip.PrefixFrom(tg.Gateway, 0)) != familyOf(tg.CIDR) {
			t.log.Error("skipping route target whose gateway is of another family", "iface", name, "target", tg.String())
			continue
		}
		if tg.Blackhole != (name == BlackholeIface) {
			t.log.Error("skipping route target: blackholes, and only they, go on BlackholeIface", "iface", name, "target", tg.String())
			continue
		}
		next[routeKey{dst: tg.CIDR, metric: tg.Priority}] = tg
	}

	prev := t.desired[name]
	for k, tg := range next {
		old, ok := prev.get(k)
		if !ok {
			t.addWanted(k, name)
		}
		if !ok || !sameTarget(old, tg) {
			t.dirty[k] = struct{}{}
		}
	}
	for _, kt := range prev {
		if _, ok := next[kt.key]; !ok {
			t.removeWanted(kt.key, name)
			t.dirty[kt.key] = struct{}{}
		}
	}
	if len(next) == 0 {
		delete(t.desired, name)
		return
	}
	ts := make(targetSet, 0, len(next))
	for k, tg := range next {
		ts = append(ts, keyedTarget{key: k, target: tg})
	}
	t.desired[name] = ts
	// B7: wanting any route on an interface ends its grace period; routes
	// we spared on it are now judged like any other.
	if rec := t.ifaces[name]; rec != nil && !rec.graceOver {
		rec.graceOver = true
		if _, ok := t.graceWatch[name]; ok {
			delete(t.graceWatch, name)
			t.markKernelDirty(rec.index)
		}
	}
}

// sameTarget reports whether two targets of one key write the same route.
func sameTarget(a, b Target) bool {
	return bytes.Equal(a.DestMAC, b.DestMAC) && a.Gateway == b.Gateway && a.OnLink == b.OnLink &&
		a.Blackhole == b.Blackhole && a.MTU == b.MTU && a.Protocol == b.Protocol && a.Class == b.Class
}

func (t *Table) addWanted(k routeKey, name string) {
	if names := t.wanted[k]; !slices.Contains(names, name) {
		t.wanted[k] = append(names, name)
	}
}

func (t *Table) removeWanted(k routeKey, name string) {
	names := slices.DeleteFunc(t.wanted[k], func(n string) bool { return n == name })
	if len(names) == 0 {
		delete(t.wanted, k)
		return
	}
	t.wanted[k] = names
}

// OnIfaceStateChanged tells the table about an interface, as the Monitor
// reports it: its index and whether it is up. An interface that appears or
// comes up has its routes rescanned by the next Apply (B8), and its wanted
// routes programmed; one that goes down or away loses them (B3).
func (t *Table) OnIfaceStateChanged(name string, index int, state IfaceState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch state {
	case IfaceGone:
		// A late "gone" for an older interface of the same name must not
		// remove the current one.
		if rec := t.ifaces[name]; rec != nil && (index == 0 || rec.index == index) {
			t.forgetIface(name)
		}
	case IfaceUp, IfaceDown:
		if index <= 0 {
			t.log.Error("ignoring interface update without an index", "iface", name, "state", state)
			return
		}
		t.setLink(name, index, state == IfaceUp, t.cfg.Clock(), false)
	default:
		t.log.Error("ignoring interface update with an unknown state", "iface", name, "state", state)
	}
}

// EventsSubscribed tells the table that the kernel's route and neighbour
// events reach it (OnRouteEvent, OnNeighEvent) from a subscription made at
// at, which reports any loss (then EventsLost). From then on the periodic
// resync (ResyncInterval) is skipped: the events already keep the view
// current, and the kernel does not drop a multicast event silently (an
// overrun fails the subscriber's next read with ENOBUFS). At 10,000
// workloads each periodic resync was a dump of 10,000 routes and
// neighbours, about a third of a CPU second and hundreds of wakeups of an
// idle node. A resync that began before at is repeated, since the events
// between it and the subscription were not seen.
// It reports whether that queued a resync.
func (t *Table) EventsSubscribed(at time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.eventsTrusted = true
	if t.lastResync.Before(at) && !t.needResync {
		t.needResync = true
		return true
	}
	return false
}

// EventsLost says the subscription lost events: the next Apply starts with
// a full resync, and periodic resyncs resume until EventsSubscribed.
func (t *Table) EventsLost() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.eventsTrusted = false
	t.needResync = true
}

// QueueResync makes the next Apply start with a full resync: relist links
// and every route of the main table, then fix all differences (B8).
func (t *Table) QueueResync() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.needResync = true
}

// NextDeadline returns when Apply next has work that no event will trigger:
// the periodic resync, the end of a grace period, or (now) additions that
// the last Apply left waiting for conntrack cleanups. The dataplane loop
// arms a timer for it. It is zero if there is none.
func (t *Table) NextDeadline() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var next time.Time
	earlier := func(d time.Time) {
		if next.IsZero() || d.Before(next) {
			next = d
		}
	}
	if t.needResync || t.ctDeferred {
		earlier(t.cfg.Clock())
	}
	if t.cfg.ResyncInterval > 0 && !t.eventsTrusted {
		earlier(t.lastResync.Add(t.cfg.ResyncInterval))
	}
	for _, d := range t.graceWatch {
		earlier(d)
	}
	return next
}

// Adopt tells the table which workload interfaces (name → index) an
// earlier nftep process wanted routes on: their routes are nftep's own,
// not routes a CNI plugin made for an endpoint that is still on its way,
// so they get no grace period (B7). Without it, a route that one `nftep
// apply` programmed and the next one no longer wants would be spared for
// the grace period by each later process, which exits before it ends, and
// stay for good. An interface with another index is a new interface of the
// same name, and keeps its grace. Call it before the first Apply.
func (t *Table) Adopt(owned map[string]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, index := range owned {
		if !t.isWorkload(name) || index <= 0 {
			continue
		}
		t.adopted[name] = index
		if rec := t.ifaces[name]; rec != nil && rec.index == index && !rec.graceOver {
			rec.graceOver = true
			delete(t.graceWatch, name)
			t.markKernelDirty(index)
		}
	}
}

// Owned returns the workload interfaces (name → index) the table wants
// routes on now and knows the index of: what the next process should
// Adopt.
func (t *Table) Owned() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for name, ts := range t.desired {
		if rec := t.ifaces[name]; rec != nil && len(ts) > 0 && t.isWorkload(name) {
			out[name] = rec.index
		}
	}
	return out
}

// setLink records that interface name has index and is up or not. It
// handles renames (the index moves to a new name: the old name is gone) and
// re-creation (the name gets a new index: a new interface). Unless the
// caller is about to read all routes anyway, an interface that appears up or
// comes up is queued for a rescan.
func (t *Table) setLink(name string, index int, up bool, now time.Time, fromResync bool) {
	if other, ok := t.byIndex[index]; ok && other != name {
		t.forgetIface(other)
	}
	rec := t.ifaces[name]
	if rec != nil && rec.index != index {
		t.forgetIface(name)
		rec = nil
	}
	changed := false
	if rec == nil {
		rec = &iface{index: index, firstSeen: now, graceOver: len(t.desired[name]) > 0 || t.adopted[name] == index}
		t.ifaces[name] = rec
		t.byIndex[index] = name
		changed = true
	}
	if rec.up != up {
		rec.up = up
		changed = true
	}
	if !changed {
		return
	}
	t.markDesiredDirty(name)
	if up && !fromResync {
		if _, ok := t.rescan[name]; !ok {
			t.rescan[name] = false
		}
	}
}

// forgetIface drops an interface that is gone (or renamed, or re-created),
// with our view of its routes and neighbours: the kernel removed them.
func (t *Table) forgetIface(name string) {
	rec := t.ifaces[name]
	if rec == nil {
		return
	}
	for k := range t.kernelOn[rec.index].keys() {
		t.kernel[k] = removeIndex(t.kernel[k], rec.index)
		if len(t.kernel[k]) == 0 {
			delete(t.kernel, k)
		}
		t.dirty[k] = struct{}{}
	}
	delete(t.kernelOn, rec.index)
	delete(t.neighs, rec.index)
	delete(t.byIndex, rec.index)
	delete(t.ifaces, name)
	delete(t.graceWatch, name)
	delete(t.rescan, name)
	t.markDesiredDirty(name)
}

func removeIndex(krs []kroute, index int) []kroute {
	out := krs[:0]
	for _, kr := range krs {
		if kr.ifindex != index {
			out = append(out, kr)
		}
	}
	return out
}

func (t *Table) markDesiredDirty(name string) {
	for _, kt := range t.desired[name] {
		t.dirty[kt.key] = struct{}{}
	}
}

func (t *Table) markKernelDirty(index int) {
	for k := range t.kernelOn[index].keys() {
		t.dirty[k] = struct{}{}
	}
}

func (t *Table) familyEnabled(family int) bool {
	for _, f := range t.families {
		if f == family {
			return true
		}
	}
	return false
}

func (t *Table) isWorkload(name string) bool {
	for _, p := range t.cfg.InterfacePrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

var ipv6LinkLocal = netip.MustParsePrefix("fe80::/64")

// owns applies B6 to a kernel route.
func (t *Table) owns(k routeKey, kr kroute) bool {
	if k.dst == ipv6LinkLocal {
		// The kernel's own link-local route; removing it breaks IPv6 on the link.
		return false
	}
	if t.exclusive[kr.proto] {
		return true
	}
	if len(t.cfg.OwnedDevices) > 0 {
		if name, ok := t.byIndex[kr.ifindex]; ok && kr.ifindex != 0 {
			for _, od := range t.cfg.OwnedDevices {
				if od.Name != name || (od.Family != 0 && od.Family != k.family()) {
					continue
				}
				if od.Protocols == nil {
					if kr.proto != unix.RTPROT_KERNEL {
						return true
					}
				} else if slices.Contains(od.Protocols, kr.proto) {
					return true
				}
			}
		}
	}
	if name, ok := t.byIndex[kr.ifindex]; ok && t.isWorkload(name) {
		return t.removeExternal || kr.proto == DefaultProtocol || kr.proto == legacyProtocol
	}
	return false
}

// inGrace reports whether undesired routes on interface name are spared
// now, and until when (B7).
func (t *Table) inGrace(name string, now time.Time) (time.Time, bool) {
	if t.cfg.GracePeriod <= 0 || !t.isWorkload(name) {
		return time.Time{}, false
	}
	rec := t.ifaces[name]
	if rec == nil || rec.graceOver {
		return time.Time{}, false
	}
	end := rec.firstSeen.Add(t.cfg.GracePeriod)
	if now.Before(end) {
		return end, true
	}
	rec.graceOver = true
	return time.Time{}, false
}

// winner resolves which interface gets key k (B3): among the interfaces
// that want it and are known and up (the blackhole pseudo-interface always
// is, with index 0), the lowest class wins, then the highest index.
func (t *Table) winner(k routeKey) (name string, index int, tg Target, ok bool) {
	class := 0
	for _, n := range t.wanted[k] {
		tg, _ := t.desired[n].get(k)
		i, c := 0, tg.Class
		if n != BlackholeIface {
			rec := t.ifaces[n]
			if rec == nil || !rec.up {
				continue
			}
			i = rec.index
		}
		if ok && (c > class || c == class && i <= index) {
			continue
		}
		name, index, class, ok = n, i, c, true
	}
	if !ok {
		return "", 0, Target{}, false
	}
	tg, _ = t.desired[name].get(k)
	return name, index, tg, true
}

// targetSet is one interface's targets, by key: a slice searched in
// order, since an interface has one target or a few. (A map of one entry
// takes a group of eight slots: at 10,000 workloads these maps held 16 MB.)
type targetSet []keyedTarget

type keyedTarget struct {
	key    routeKey
	target Target
}

// get returns the target of key k.
func (s targetSet) get(k routeKey) (Target, bool) {
	for i := range s {
		if s[i].key == k {
			return s[i].target, true
		}
	}
	return Target{}, false
}

// wantRoute is the kernel route we write for key k on interface index (B4),
// for target tg.
func (t *Table) wantRoute(k routeKey, index int, tg Target) kroute {
	kr := kroute{ifindex: index, proto: t.cfg.Protocol, typ: unix.RTN_UNICAST, mtu: tg.MTU}
	if tg.Protocol != 0 {
		kr.proto = tg.Protocol
	}
	switch {
	case tg.Blackhole:
		kr.ifindex, kr.typ, kr.scope, kr.mtu = 0, unix.RTN_BLACKHOLE, netlink.SCOPE_UNIVERSE, 0
		return kr
	case tg.Gateway.IsValid():
		kr.gw, kr.onlink, kr.scope = tg.Gateway, tg.OnLink, netlink.SCOPE_UNIVERSE
	case k.family() == netlink.FAMILY_V4:
		kr.scope = netlink.SCOPE_LINK
	default:
		// IPv6 has no route scopes; the kernel reports every route as
		// universe, so asking for link scope would never compare equal.
		kr.scope = netlink.SCOPE_UNIVERSE
	}
	if k.family() == netlink.FAMILY_V4 {
		kr.src = t.cfg.SourceAddressV4
	} else {
		kr.src = t.cfg.SourceAddressV6
	}
	return kr
}

// devName names an interface index for messages.
func (t *Table) devName(index int) string {
	if name, ok := t.byIndex[index]; ok {
		return name
	}
	if index == 0 {
		return "(none)"
	}
	return fmt.Sprintf("if%d", index)
}

// describe renders a route in `ip route` syntax for errors and logs.
func (t *Table) describe(k routeKey, kr kroute) string {
	s := k.dst.String()
	if kr.typ == unix.RTN_BLACKHOLE {
		s = "blackhole " + s
	}
	if kr.gw.IsValid() {
		s += " via " + kr.gw.String()
	}
	if kr.ifindex != 0 {
		s += " dev " + t.devName(kr.ifindex)
	}
	if kr.onlink {
		s += " onlink"
	}
	if kr.mtu > 0 {
		s += fmt.Sprintf(" mtu %d", kr.mtu)
	}
	s += fmt.Sprintf(" proto %d metric %d", kr.proto, k.metric)
	if k.tos != 0 {
		s += fmt.Sprintf(" tos %d", k.tos)
	}
	return s
}

// TrustWanted makes the table take the routes and static neighbours it
// wants now as what the kernel holds, without listing the kernel: a record
// of the last apply says that the kernel holds them (a one-shot `nftep
// apply` that programs only what changed since). From then on only the
// routes whose wanted state changes are written, and nothing else the
// kernel holds is looked at: routes of interfaces the table does not know
// stay as they are.
func (t *Table) TrustWanted() {
	t.applyMu.Lock()
	defer t.applyMu.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.wanted {
		_, index, tg, ok := t.winner(k)
		if !ok {
			continue
		}
		t.addKernel(k, t.wantRoute(k, index, tg))
		if tg.DestMAC != nil && k.family() == netlink.FAMILY_V4 && index != 0 {
			t.setNeigh(index, k.dst.Addr(), tg.DestMAC.String())
		}
	}
	clear(t.dirty)
	// Nor are the interfaces it was told about read back: at 10,000
	// routes, each rescan is a dump of the whole main table.
	clear(t.rescan)
	t.needResync = false
	t.lastResync = t.cfg.Clock()
}

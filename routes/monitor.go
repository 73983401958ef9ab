package routes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// MonitorConfig configures a Monitor.
type MonitorConfig struct {
	// Namespace is the network namespace to watch; nil means the caller's.
	Namespace *netns.NsHandle
	// ResyncInterval is the period of full relists, which catch anything a
	// lost event hid (Felix's InterfaceRefreshInterval). 0 means 90s;
	// negative disables them.
	ResyncInterval time.Duration
	// ReceiveBufferSize of each subscription socket, forced past rmem_max
	// (needs CAP_NET_ADMIN). 0 means 4 MiB: enough for the burst of events
	// when hundreds of workloads start at once.
	ReceiveBufferSize int
	// Logger receives subscription errors and relists; nil discards.
	Logger *slog.Logger
	// KernelEvents also subscribes to route and neighbour (and bridge FDB)
	// events and reports each as a RouteEvent or NeighEvent, so that what
	// someone deletes by hand is put back at once rather than at the next
	// resync; each subscription is reported as KernelEventsSubscribed, a
	// lost one as KernelEventsLost.
	KernelEvents bool
	// WatchLinks names links whose every change (MTU, MAC, attributes) is
	// also reported as a LinkEvent: the tunnel devices nftep owns.
	WatchLinks []string
}

// Monitor watches the links and addresses of a network namespace and
// reports them as InterfaceStateUpdate and InterfaceAddrsUpdate values.
//
// Updates are delivered by calling the callback given to NewMonitor, from
// Run's goroutine, one at a time and in order; the callback should hand the
// value on (to a channel, say) rather than block: while it blocks, events
// queue in the kernel and may overrun. Per interface the order is: the
// state when it appears or changes; then its addresses (once when it
// appears, and on every change); on deletion, IfaceGone and then a nil
// address set. A rename is reported as the old name gone and the new one
// appearing. Only changes are reported.
//
// Events come from two netlink subscriptions (links, addresses) that start
// with a listing of what exists (ListExisting). When the kernel drops events
// (ENOBUFS on overrun), the subscription ends; Monitor subscribes again and
// relists, reporting whatever changed meanwhile, deletions included. It also
// relists every ResyncInterval and on Resync.
type Monitor struct {
	cfg  MonitorConfig
	emit func(any)
	log  *slog.Logger

	relistC chan struct{}

	// links by index; names maps a name to its index.
	links map[int]*monLink
	names map[string]int
	// orphanAddrs holds addresses whose link has not been reported yet:
	// links and addresses come over different sockets, in no common order.
	orphanAddrs map[int]map[netip.Prefix]struct{}

	// resubscribes counts subscriptions lost and renewed (for tests and logs).
	resubscribes atomic.Int64
}

type monLink struct {
	name  string
	state IfaceState
	addrs map[netip.Prefix]struct{}
	// sent is the last address set reported; nil before the first report.
	sent []netip.Addr
}

// lister is what a relist reads: *netlink.Handle in production.
type lister interface {
	LinkList() ([]netlink.Link, error)
	AddrList(link netlink.Link, family int) ([]netlink.Addr, error)
}

// NewMonitor returns a Monitor that reports to callback. Nothing happens
// before Run.
func NewMonitor(cfg MonitorConfig, callback func(update any)) *Monitor {
	if cfg.ResyncInterval == 0 {
		cfg.ResyncInterval = DefaultResyncInterval
	}
	if cfg.ReceiveBufferSize == 0 {
		cfg.ReceiveBufferSize = 4 << 20
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Monitor{
		cfg:         cfg,
		emit:        callback,
		log:         log,
		relistC:     make(chan struct{}, 1),
		links:       map[int]*monLink{},
		names:       map[string]int{},
		orphanAddrs: map[int]map[netip.Prefix]struct{}{},
	}
}

// Resync asks Run to relist links and addresses soon and report any
// difference. It does not block.
func (m *Monitor) Resync() {
	select {
	case m.relistC <- struct{}{}:
	default:
	}
}

// Run watches until ctx is done, then returns nil. It returns an error only
// if it cannot start: no netlink handle, or the first subscription fails.
// Later failures are logged and retried.
func (m *Monitor) Run(ctx context.Context) error {
	var (
		h   *netlink.Handle
		err error
	)
	if m.cfg.Namespace != nil {
		h, err = netlink.NewHandleAt(*m.cfg.Namespace, unix.NETLINK_ROUTE)
	} else {
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	}
	if err != nil {
		return fmt.Errorf("interface monitor: open netlink handle: %w", err)
	}
	defer h.Close()

	var tick <-chan time.Time
	if m.cfg.ResyncInterval > 0 {
		t := time.NewTicker(m.cfg.ResyncInterval)
		defer t.Stop()
		tick = t.C
	}

	for first := true; ; first = false {
		subscribedAt := time.Now() // before: what happens while subscribing is seen
		sub, err := m.subscribe()
		if err != nil {
			if first {
				return fmt.Errorf("interface monitor: %w", err)
			}
			m.log.Warn("interface monitor: subscribe failed, retrying", "error", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
				continue
			}
		}
		if m.cfg.KernelEvents {
			m.emit(KernelEventsSubscribed{At: subscribedAt})
		}
		if !first {
			// The new subscription lists what exists; the relist also
			// finds what was deleted while no one was listening.
			m.relist(h)
		}
		lost := m.loop(ctx, h, sub, tick)
		sub.stop()
		if !lost {
			return nil
		}
		if m.cfg.KernelEvents {
			m.emit(KernelEventsLost{})
		}
		m.resubscribes.Add(1)
		m.log.Warn("interface monitor: netlink subscription lost, subscribing again and relisting")
	}
}

// subscription is one pair of link and address subscriptions.
type subscription struct {
	links   chan netlink.LinkUpdate
	addrs   chan netlink.AddrUpdate
	routes  chan netlink.RouteUpdate // nil without KernelEvents
	neighs  chan netlink.NeighUpdate // nil without KernelEvents
	done    chan struct{}
	stopped atomic.Bool
}

// stop closes the sockets and drains both channels until the library's
// goroutines close them, so none is left blocked on a send.
func (s *subscription) stop() {
	if s.stopped.Swap(true) {
		return
	}
	close(s.done)
	for range s.links {
	}
	for range s.addrs {
	}
	if s.routes != nil {
		for range s.routes {
		}
	}
	if s.neighs != nil {
		for range s.neighs {
		}
	}
}

func (m *Monitor) subscribe() (*subscription, error) {
	s := &subscription{
		links: make(chan netlink.LinkUpdate, 64),
		addrs: make(chan netlink.AddrUpdate, 64),
		done:  make(chan struct{}),
	}
	onError := func(err error) {
		if s.stopped.Load() {
			return // the socket was closed on purpose
		}
		// An overrun also closes the channel, which Run handles; any
		// other error (an interrupted initial listing, say) may have hidden
		// a change, so relist.
		m.log.Warn("interface monitor: netlink error, will relist", "error", err)
		m.Resync()
	}
	err := netlink.LinkSubscribeWithOptions(s.links, s.done, netlink.LinkSubscribeOptions{
		Namespace:              m.cfg.Namespace,
		ErrorCallback:          onError,
		ListExisting:           true,
		ReceiveBufferSize:      m.cfg.ReceiveBufferSize,
		ReceiveBufferForceSize: true,
	})
	if err != nil {
		close(s.done)
		return nil, fmt.Errorf("subscribe to link updates: %w", err)
	}
	err = netlink.AddrSubscribeWithOptions(s.addrs, s.done, netlink.AddrSubscribeOptions{
		Namespace:              m.cfg.Namespace,
		ErrorCallback:          onError,
		ListExisting:           true,
		ReceiveBufferSize:      m.cfg.ReceiveBufferSize,
		ReceiveBufferForceSize: true,
	})
	if err != nil {
		s.stopped.Store(true)
		close(s.done)
		for range s.links {
		}
		return nil, fmt.Errorf("subscribe to address updates: %w", err)
	}
	if !m.cfg.KernelEvents {
		return s, nil
	}
	s.routes = make(chan netlink.RouteUpdate, 256)
	err = netlink.RouteSubscribeWithOptions(s.routes, s.done, netlink.RouteSubscribeOptions{
		Namespace:              m.cfg.Namespace,
		ErrorCallback:          onError,
		ReceiveBufferSize:      m.cfg.ReceiveBufferSize,
		ReceiveBufferForceSize: true,
	})
	if err == nil {
		s.neighs = make(chan netlink.NeighUpdate, 256)
		// The same forced buffer as the others: an apply of thousands of
		// workloads writes as many static neighbours as routes, and with
		// the default buffer (rmem_default) their events overran this
		// socket, which cost a new subscription and a relist each time.
		err = netlink.NeighSubscribeWithOptions(s.neighs, s.done, netlink.NeighSubscribeOptions{
			Namespace:              m.cfg.Namespace,
			ErrorCallback:          onError,
			ReceiveBufferSize:      m.cfg.ReceiveBufferSize,
			ReceiveBufferForceSize: true,
		})
		if err != nil {
			s.neighs = nil
		}
	} else {
		s.routes = nil
	}
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("subscribe to route and neighbour updates: %w", err)
	}
	return s, nil
}

// loop handles events until ctx is done (false) or a subscription ends (true).
func (m *Monitor) loop(ctx context.Context, h lister, sub *subscription, tick <-chan time.Time) (lost bool) {
	for {
		select {
		case <-ctx.Done():
			return false
		case u, ok := <-sub.links:
			if !ok {
				return true
			}
			m.onLinkUpdate(u)
		case u, ok := <-sub.addrs:
			if !ok {
				return true
			}
			m.onAddrUpdate(u.LinkIndex, u.LinkAddress, u.NewAddr)
		case u, ok := <-sub.routes:
			if !ok {
				return true
			}
			m.emit(RouteEvent{Route: u.Route, Deleted: u.Type == unix.RTM_DELROUTE})
		case u, ok := <-sub.neighs:
			if !ok {
				return true
			}
			m.emit(NeighEvent{Neigh: u.Neigh, Deleted: u.Type == unix.RTM_DELNEIGH})
		case <-tick:
			m.relist(h)
		case <-m.relistC:
			m.relist(h)
		}
	}
}

func (m *Monitor) onLinkUpdate(u netlink.LinkUpdate) {
	if u.IfInfomsg.Family == unix.AF_BRIDGE {
		// Bridge-port notifications: an RTM_DELLINK of family AF_BRIDGE
		// means a port left its bridge, not that the link is gone.
		return
	}
	a := u.Link.Attrs()
	if a == nil {
		return
	}
	if slices.Contains(m.cfg.WatchLinks, a.Name) {
		m.emit(LinkEvent{Link: u.Link, Deleted: u.Header.Type == unix.RTM_DELLINK})
	}
	m.setLink(a.Index, a.Name, u.Header.Type == unix.RTM_NEWLINK, linkOperUp(u.Link))
}

func (m *Monitor) onAddrUpdate(index int, ipnet net.IPNet, add bool) {
	addr, ok := netip.AddrFromSlice(ipnet.IP)
	if !ok {
		return
	}
	ones, _ := ipnet.Mask.Size()
	p := netip.PrefixFrom(addr.Unmap(), ones)
	set := m.addrSet(index)
	if add {
		set[p] = struct{}{}
	} else {
		delete(set, p)
	}
	if l := m.links[index]; l != nil {
		m.sendAddrs(l)
	}
}

// addrSet returns the address set of a link, or of a link not yet seen.
func (m *Monitor) addrSet(index int) map[netip.Prefix]struct{} {
	if l := m.links[index]; l != nil {
		return l.addrs
	}
	set := m.orphanAddrs[index]
	if set == nil {
		set = map[netip.Prefix]struct{}{}
		m.orphanAddrs[index] = set
	}
	return set
}

// setLink applies one link observation and reports what changed.
func (m *Monitor) setLink(index int, name string, exists, up bool) {
	l := m.links[index]
	if l != nil && l.name != name {
		// Renamed: the old name is gone; the addresses stay with the link.
		m.removeLink(index)
		if exists {
			m.orphanAddrs[index] = l.addrs
		}
		l = nil
	}
	if !exists {
		if l != nil {
			m.removeLink(index)
		}
		delete(m.orphanAddrs, index)
		return
	}
	if other, ok := m.names[name]; ok && other != index {
		// The name moved to a new link: its old link was deleted unseen.
		m.removeLink(other)
	}
	state := IfaceDown
	if up {
		state = IfaceUp
	}
	if l == nil {
		l = &monLink{name: name, addrs: m.orphanAddrs[index]}
		if l.addrs == nil {
			l.addrs = map[netip.Prefix]struct{}{}
		}
		delete(m.orphanAddrs, index)
		m.links[index] = l
		m.names[name] = index
	}
	if l.state != state {
		l.state = state
		m.emit(InterfaceStateUpdate{Name: name, State: state, Index: index})
	}
	m.sendAddrs(l)
}

func (m *Monitor) removeLink(index int) {
	l := m.links[index]
	delete(m.links, index)
	if m.names[l.name] == index {
		delete(m.names, l.name)
	}
	m.emit(InterfaceStateUpdate{Name: l.name, State: IfaceGone, Index: index})
	m.emit(InterfaceAddrsUpdate{Name: l.name, Addrs: nil})
}

// sendAddrs reports the link's address set if it differs from the last
// report (or there was none).
func (m *Monitor) sendAddrs(l *monLink) {
	addrs := make([]netip.Addr, 0, len(l.addrs))
	for p := range l.addrs {
		addrs = append(addrs, p.Addr())
	}
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	addrs = slices.Compact(addrs)
	if l.sent != nil && slices.Equal(l.sent, addrs) {
		return
	}
	l.sent = addrs
	m.emit(InterfaceAddrsUpdate{Name: l.name, Addrs: slices.Clone(addrs)})
}

// relist reads every link and address and reports the differences from
// what was reported, deletions included. A failed relist is retried soon.
func (m *Monitor) relist(h lister) {
	links, byIndex, err := dumpInterfaces(h)
	if err != nil {
		m.log.Warn("interface monitor: relist failed, retrying in a second", "error", err)
		time.AfterFunc(time.Second, m.Resync)
		return
	}
	present := map[int]bool{}
	for _, l := range links {
		present[l.Attrs().Index] = true
	}
	for _, index := range slices.Sorted(maps.Keys(m.links)) {
		if !present[index] {
			m.removeLink(index)
		}
	}
	clear(m.orphanAddrs)
	for _, l := range links {
		a := l.Attrs()
		set := byIndex[a.Index]
		if set == nil {
			set = map[netip.Prefix]struct{}{}
		}
		if known := m.links[a.Index]; known != nil {
			known.addrs = set
		} else {
			m.orphanAddrs[a.Index] = set
		}
		m.setLink(a.Index, a.Name, true, linkOperUp(l))
	}
	m.log.Debug("interface monitor: relisted", "links", len(links))
}

// dumpInterfaces reads every link, sorted by index, and every address by
// link index. Dumps the kernel flags as interrupted are retried.
func dumpInterfaces(h lister) ([]netlink.Link, map[int]map[netip.Prefix]struct{}, error) {
	links, err := retryDump(h.LinkList)
	if err != nil {
		return nil, nil, fmt.Errorf("list links: %w", err)
	}
	addrs, err := retryDump(func() ([]netlink.Addr, error) { return h.AddrList(nil, netlink.FAMILY_ALL) })
	if err != nil {
		return nil, nil, fmt.Errorf("list addresses: %w", err)
	}
	byIndex := map[int]map[netip.Prefix]struct{}{}
	for _, a := range addrs {
		if a.IPNet == nil {
			continue
		}
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ones, _ := a.Mask.Size()
		set := byIndex[a.LinkIndex]
		if set == nil {
			set = map[netip.Prefix]struct{}{}
			byIndex[a.LinkIndex] = set
		}
		set[netip.PrefixFrom(ip.Unmap(), ones)] = struct{}{}
	}
	slices.SortFunc(links, func(a, b netlink.Link) int { return cmp.Compare(a.Attrs().Index, b.Attrs().Index) })
	return links, byIndex, nil
}

// ListInterfaces lists the interfaces that exist now, as a Monitor first
// reports them: per interface, by index, an InterfaceStateUpdate (IfaceUp
// or IfaceDown) and an InterfaceAddrsUpdate with its sorted addresses
// (empty, not nil, when it has none). h decides the namespace
// (*netlink.Handle); dumps the kernel flags as interrupted are retried.
//
// Equivalent to: ip link show; ip addr show.
func ListInterfaces(h interface {
	LinkList() ([]netlink.Link, error)
	AddrList(link netlink.Link, family int) ([]netlink.Addr, error)
}) ([]any, error) {
	links, byIndex, err := dumpInterfaces(h)
	if err != nil {
		return nil, err
	}
	briefs := make([]linkBrief, len(links))
	addrs := make(map[int][]netip.Addr, len(byIndex))
	for i, l := range links {
		a := l.Attrs()
		briefs[i] = linkBrief{index: a.Index, name: a.Name, running: linkOperUp(l)}
		for p := range byIndex[a.Index] {
			addrs[a.Index] = append(addrs[a.Index], p.Addr())
		}
	}
	return interfaceUpdates(briefs, addrs), nil
}

// interfaceUpdates is the listing of links (sorted by index) and their
// addresses by index, as a Monitor first reports them (ListInterfaces).
func interfaceUpdates(links []linkBrief, addrs map[int][]netip.Addr) []any {
	out := make([]any, 0, 2*len(links))
	for _, l := range links {
		state := IfaceDown
		if l.running {
			state = IfaceUp
		}
		as := addrs[l.index]
		if as == nil {
			as = []netip.Addr{}
		}
		slices.SortFunc(as, func(x, y netip.Addr) int { return x.Compare(y) })
		out = append(out,
			InterfaceStateUpdate{Name: l.name, State: state, Index: l.index},
			InterfaceAddrsUpdate{Name: l.name, Addrs: slices.Compact(as)})
	}
	return out
}

// ListInterfacesNamed is ListInterfaces for the interfaces names only, each
// looked up by name: for a caller that needs a few interfaces of a node
// with thousands (a one-shot apply of one changed workload). An interface
// that does not exist is left out. addrsOf lists an interface's addresses
// by index (AddrsOfIndex, in the namespace of h).
//
// Equivalent to: ip link show dev NAME; ip addr show dev NAME.
func ListInterfacesNamed(h interface {
	LinkByName(name string) (netlink.Link, error)
}, addrsOf func(index int) ([]netip.Addr, error), names []string) ([]any, error) {
	var out []any
	for _, name := range names {
		l, err := h.LinkByName(name)
		if err != nil {
			var nf netlink.LinkNotFoundError
			if errors.As(err, &nf) {
				continue
			}
			return nil, fmt.Errorf("look up interface %s: %w", name, err)
		}
		addrs, err := addrsOf(l.Attrs().Index)
		if err != nil {
			return nil, fmt.Errorf("addresses of interface %s: %w", name, err)
		}
		state := IfaceDown
		if linkOperUp(l) {
			state = IfaceUp
		}
		out = append(out,
			InterfaceStateUpdate{Name: name, State: state, Index: l.Attrs().Index},
			InterfaceAddrsUpdate{Name: name, Addrs: slices.Compact(addrs)})
	}
	return out, nil
}

package routes

import (
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// RouteEvent is a route the kernel added, changed or deleted, as the
// Monitor reports it with MonitorConfig.KernelEvents.
type RouteEvent struct {
	Route   netlink.Route
	Deleted bool
}

// NeighEvent is a neighbour or bridge FDB entry (family AF_BRIDGE) the
// kernel added, changed or deleted, as the Monitor reports it with
// MonitorConfig.KernelEvents.
type NeighEvent struct {
	Neigh   netlink.Neigh
	Deleted bool
}

// LinkEvent is any change of a link named in MonitorConfig.WatchLinks (its
// MTU, MAC or attributes, not only its state), or its deletion.
type LinkEvent struct {
	Link    netlink.Link
	Deleted bool
}

// KernelEventsLost says the route or neighbour subscription lost events
// (the kernel dropped them): whoever keeps a view of routes, neighbours or
// FDB entries must read them back.
type KernelEventsLost struct{}

// KernelEventsSubscribed says the monitor subscribed to route and
// neighbour events at At: from then on it reports every change, or
// KernelEventsLost (see Table.EventsSubscribed).
type KernelEventsSubscribed struct{ At time.Time }

// OnRouteEvent updates the table's view of the kernel with a route event
// and reports whether that calls for an Apply: a route we track went or
// changed, or one we own or whose key we want appeared. Our own writes
// come back as events that change nothing, so they call for none.
func (t *Table) OnRouteEvent(ev RouteEvent) bool {
	r := ev.Route
	if r.Table != unix.RT_TABLE_MAIN {
		return false
	}
	dst, ok := ipNetToPrefix(r.Dst, r.Family)
	if !ok {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.familyEnabled(familyOf(dst)) {
		return false
	}
	k, kr := keyOf(r, dst)
	have := false
	for _, h := range t.kernel[k] {
		if h == kr {
			have = true
			break
		}
	}
	if ev.Deleted {
		if !have {
			return false
		}
		t.removeKernel(k, kr)
		t.dirty[k] = struct{}{}
		return true
	}
	if have || !t.owns(k, kr) && len(t.wanted[k]) == 0 {
		return false
	}
	t.addKernel(k, kr)
	t.dirty[k] = struct{}{}
	return true
}

// OnNeighEvent updates the view of permanent IPv4 neighbours with an event
// and reports whether that calls for an Apply: a permanent entry we know of
// went or changed. The routes of its interface are checked again, which
// puts a static neighbour a workload needs back.
func (t *Table) OnNeighEvent(ev NeighEvent) bool {
	n := ev.Neigh
	if n.Family != netlink.FAMILY_V4 {
		return false
	}
	ip := ipToAddr(n.IP)
	if !ip.Is4() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.familyEnabled(netlink.FAMILY_V4) {
		return false
	}
	have, ok := t.neighs[n.LinkIndex].get(ip)
	permanent := n.State&netlink.NUD_PERMANENT != 0 && n.HardwareAddr != nil
	switch {
	case !ev.Deleted && permanent && ok && have == n.HardwareAddr.String():
		return false
	case !ev.Deleted && permanent:
		t.trackNeigh(n)
	case !ok:
		return false
	default:
		t.neighs[n.LinkIndex].del(ip)
	}
	name, known := t.byIndex[n.LinkIndex]
	if !known {
		return false
	}
	t.markDesiredDirty(name)
	// Entries elsewhere (an overlay's VTEP neighbours) are not ours.
	return len(t.desired[name]) > 0 || t.isWorkload(name)
}

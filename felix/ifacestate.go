package felix

import "net/netip"

// IfaceState is the operational state of a network interface, as the
// interface monitor (package routes) reports it to the endpoint manager,
// the route table and the sysctl writer: Felix's ifacemonitor.State
// (felix/ifacemonitor/iface_monitor.go). The zero value is IfaceGone.
type IfaceState uint8

const (
	// IfaceGone means the interface does not exist (any more): Felix's ""
	// state.
	IfaceGone IfaceState = iota
	// IfaceDown means the interface exists but is not operationally up.
	IfaceDown
	// IfaceUp means the interface exists and is operationally up
	// (IFF_RUNNING: admin up with carrier). Only then can it carry routes.
	IfaceUp
)

// String returns "up", "down" or "gone".
func (s IfaceState) String() string {
	switch s {
	case IfaceUp:
		return "up"
	case IfaceDown:
		return "down"
	default:
		return "gone"
	}
}

// InterfaceStateUpdate reports a change of the state of the interface
// Name. Index is the kernel's ifindex (also set for IfaceGone: the index
// it had).
type InterfaceStateUpdate struct {
	Name  string
	State IfaceState
	Index int
}

// InterfaceAddrsUpdate reports the full set of addresses of the interface
// Name, sorted. Addrs is nil when the interface is gone, and non-nil (maybe
// empty) while it exists: an interface without addresses is still a
// candidate for host-endpoint resolution.
type InterfaceAddrsUpdate struct {
	Name  string
	Addrs []netip.Addr
}

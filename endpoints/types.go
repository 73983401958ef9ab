package endpoints

import (
	"iter"
	"net"
	"net/netip"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

// IfaceState is the operational state of a network interface, as the
// interface monitor (package routes) reports it: one type, held by package
// felix, so the daemon hands the monitor's updates on as they are.
type IfaceState = felix.IfaceState

// The states.
const (
	IfaceGone = felix.IfaceGone
	IfaceDown = felix.IfaceDown
	IfaceUp   = felix.IfaceUp
)

// InterfaceStateUpdate says that the interface Name changed state; the
// manager does not need Index (the route table tracks indexes itself).
type InterfaceStateUpdate = felix.InterfaceStateUpdate

// InterfaceAddrsUpdate gives the complete set of addresses of the interface
// Name. A nil Addrs means the interface is gone; an empty non-nil slice means
// it exists without addresses, which still makes it a candidate for host
// endpoint resolution.
type InterfaceAddrsUpdate = felix.InterfaceAddrsUpdate

// RouteTarget is one route the manager wants on a workload interface: a
// unicast, link-scope route to CIDR with metric Priority and, when DestMAC is
// set and the family is IPv4, a permanent neighbour entry for the address.
type RouteTarget struct {
	CIDR     netip.Prefix
	DestMAC  net.HardwareAddr
	Priority int
}

// Routes is the slice of a route table the manager uses (rule B1 in
// docs/acceptance-cases.md). SetRoutes replaces every local-workload route of
// iface, IPv4 and IPv6 together, with targets; a nil or empty targets removes
// them. One table serves both families (as routes.Table with IPVersion 0
// does), so the manager asks once per interface with the targets of both;
// IPv6 targets are left out unless Config.IPv6. The real table programs the
// kernel later, in the dataplane's apply step.
type Routes interface {
	SetRoutes(iface string, targets []RouteTarget)
}

// Sysctls configures the kernel settings of workload interfaces (Felix's
// configureInterface): it remembers which interfaces to configure, writes
// their settings while they are up, and retries failed writes.
// *sysctl.Interfaces implements it; the manager only says what it wants.
type Sysctls interface {
	// SetInterface declares name a workload interface. allowSpoofing means
	// rp_filter=0 instead of the default.
	SetInterface(name string, allowSpoofing bool)
	// RemoveInterface forgets name.
	RemoveInterface(name string)
	// OnIfaceStateChanged records whether name is up; settings are written
	// only while it is, and again each time it comes up.
	OnIfaceStateChanged(name string, up bool)
	// Pending reports whether name's settings are not all written yet.
	Pending(name string) bool
	// PendingUp yields every interface reported up for which Pending may
	// be true (more is harmless), so that a status cached while Pending
	// was false is known to still hold for the others.
	PendingUp() iter.Seq[string]
	// Apply writes the settings of pending interfaces that are up and
	// returns the failures by interface name.
	Apply() map[string]error
}

// Policies writes the policy and profile chains that chains jump to: the
// manager calls UseChain for each jump target of every chain it writes (at
// the first jump to a name the chain appears) and ReleaseChain when such a
// chain goes or changes (at the last the chain goes). *policy.Manager
// implements it.
type Policies interface {
	UseChain(name string)
	ReleaseChain(name string)
}

// Callbacks lets accelerators (XDP, sockmap) follow the manager's decisions
// (as Felix's endpoint manager callbacks do). Embed NoopCallbacks to
// implement only some of them. They run on the manager's goroutine and must
// not call back into the manager.
type Callbacks interface {
	// UpdateHostEndpoint runs from OnUpdate for every HostEndpointUpdate.
	UpdateHostEndpoint(id *proto.HostEndpointID)
	// RemoveHostEndpoint runs from OnUpdate for every HostEndpointRemove.
	RemoveHostEndpoint(id *proto.HostEndpointID)
	// AddInterface runs when iface gets a host endpoint. iface may be
	// AllInterfaces for the `*` host endpoint.
	AddInterface(iface string, id *proto.HostEndpointID)
	// UpdateInterface runs when iface moves to another host endpoint.
	UpdateInterface(iface string, id *proto.HostEndpointID)
	// RemoveInterface runs when iface loses its host endpoint.
	RemoveInterface(iface string)
	// UpdateWorkload runs after a workload endpoint is activated (old is
	// nil) or updated.
	UpdateWorkload(old, new *proto.WorkloadEndpoint)
	// RemoveWorkload runs when an active workload endpoint is deactivated
	// (removed, displaced by shadowing, or rejected as invalid).
	RemoveWorkload(old *proto.WorkloadEndpoint)
}

// NoopCallbacks implements Callbacks by doing nothing.
type NoopCallbacks struct{}

// UpdateHostEndpoint is part of Callbacks.
func (NoopCallbacks) UpdateHostEndpoint(*proto.HostEndpointID) {}

// RemoveHostEndpoint is part of Callbacks.
func (NoopCallbacks) RemoveHostEndpoint(*proto.HostEndpointID) {}

// AddInterface is part of Callbacks.
func (NoopCallbacks) AddInterface(string, *proto.HostEndpointID) {}

// UpdateInterface is part of Callbacks.
func (NoopCallbacks) UpdateInterface(string, *proto.HostEndpointID) {}

// RemoveInterface is part of Callbacks.
func (NoopCallbacks) RemoveInterface(string) {}

// UpdateWorkload is part of Callbacks.
func (NoopCallbacks) UpdateWorkload(_, _ *proto.WorkloadEndpoint) {}

// RemoveWorkload is part of Callbacks.
func (NoopCallbacks) RemoveWorkload(*proto.WorkloadEndpoint) {}

var _ Callbacks = NoopCallbacks{}

// StatusSink receives endpoint status reports in Felix's FromDataplane
// vocabulary: *proto.WorkloadEndpointStatusUpdate,
// *proto.WorkloadEndpointStatusRemove, *proto.HostEndpointStatusUpdate and
// *proto.HostEndpointStatusRemove. It is called at the end of
// CompleteDeferredWork, after all rendering of the batch.
type StatusSink func(msg any)

// Endpoint statuses, as Felix spells them.
const (
	StatusUp    = "up"
	StatusDown  = "down"
	StatusError = "error"
)

// AllInterfaces is the pseudo interface name under which the `*` host
// endpoint is resolved, as in Felix: longer than IFNAMSIZ, so it can never
// collide with a real interface.
const AllInterfaces = render.AnyInterface

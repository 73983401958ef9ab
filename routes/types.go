// Package routes programs the kernel state beside nftables that workloads
// need: a device route per workload address, a permanent neighbour entry for
// each IPv4 workload address with a known MAC, and the interface monitor that
// reports link and address changes. It is Felix's routetable and ifacemonitor
// (felix/routetable/route_table.go, felix/ifacemonitor) over
// vishvananda/netlink. The rules B1–B11 that comments cite are listed in
// docs/acceptance-cases.md.
//
// Table holds the desired routes per interface and reconciles them with the
// main routing table:
//
//	ip route replace 10.65.0.1/32 dev cali1 proto boot scope link metric 1024
//	ip neigh replace 10.65.0.1 lladdr ee:ee:ee:ee:ee:ee dev cali1 nud permanent
//
// Monitor subscribes to link and address events and turns them into
// InterfaceStateUpdate and InterfaceAddrsUpdate values for the endpoint
// manager, the route table and the sysctl writer.
package routes

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/nftep/nftep/felix"
)

// Target is one route the caller wants on an interface.
type Target struct {
	// CIDR is the destination. It is masked before use, so 10.0.240.2/24
	// means 10.0.240.0/24 (as Felix does).
	CIDR netip.Prefix
	// DestMAC, if set on an IPv4 target, adds a permanent neighbour entry
	// for the CIDR's address on the interface (static ARP). IPv6 targets
	// never get one (Felix makes none: proxy NDP answers instead).
	DestMAC net.HardwareAddr
	// Priority is the route's metric; 0 means Config.Metric, MetricZero
	// metric 0. Different priorities for one CIDR are different routes, as
	// in the kernel.
	Priority int

	// The fields below serve cluster routes (package overlay); workload
	// routes leave them zero.

	// Gateway, if valid, makes the route `via Gateway` (scope global); it
	// must have the CIDR's family.
	Gateway netip.Addr
	// OnLink sets RTNH_F_ONLINK: the gateway is on the link whatever the
	// interface's addresses say (`onlink`).
	OnLink bool
	// Blackhole makes the route `blackhole <CIDR>`: set it on targets of
	// the pseudo-interface BlackholeIface.
	Blackhole bool
	// MTU, if positive, is the route's mtu metric (RTAX_MTU).
	MTU int
	// Protocol, if non-zero, is the route's protocol instead of
	// Config.Protocol.
	Protocol netlink.RouteProtocol
	// Class ranks the targets of one destination wanted on several
	// interfaces: the lowest class wins, then the highest interface index
	// (Felix's route classes: a local workload, class 0, beats a tunnel
	// route to the same address). Blackholes lose to every interface of
	// the same class.
	Class int
}

// BlackholeIface is the pseudo-interface that blackhole targets are set on
// (SetRoutes(BlackholeIface, ...)): no real interface can have the name,
// since the kernel refuses ':' in interface names.
const BlackholeIface = ":blackhole"

// MetricZero as a Target's Priority asks for metric 0 (what `ip route add`
// gives an IPv4 route without one), since 0 there means Config.Metric.
const MetricZero = -1

// String renders the target like the route it becomes.
func (t Target) String() string {
	s := t.CIDR.String()
	if t.Blackhole {
		s = "blackhole " + s
	}
	if t.Gateway.IsValid() {
		s += " via " + t.Gateway.String()
	}
	if t.OnLink {
		s += " onlink"
	}
	if t.Protocol != 0 {
		s += fmt.Sprintf(" proto %d", t.Protocol)
	}
	if t.MTU > 0 {
		s += fmt.Sprintf(" mtu %d", t.MTU)
	}
	if t.Priority != 0 {
		s += fmt.Sprintf(" metric %d", t.Priority)
	}
	if t.DestMAC != nil {
		s += " lladdr " + t.DestMAC.String()
	}
	return s
}

// Config configures a Table. The zero value of each field means Felix's
// default, noted per field.
type Config struct {
	// Netlink is the handle to program through; it decides the network
	// namespace (netlink.NewHandleAt). It needs NETLINK_ROUTE, and
	// NETLINK_NETFILTER for conntrack cleanup. Nil means a new handle in the
	// caller's namespace, closed by Table.Close.
	Netlink *netlink.Handle
	// Namespace is the network namespace Netlink is bound to
	// (netns.None() for the caller's). With it, routes and neighbours are
	// written through a socket of the table's own in that namespace, many
	// requests in flight (see pipe); without it, one at a time through
	// Netlink. Nil with a nil Netlink means the caller's namespace.
	Namespace *netns.NsHandle
	// IPVersion limits the table to one family: 4 or 6. 0 manages both
	// families in one table. Felix runs one table per family; either way
	// the family rules hold (static ARP only for IPv4, fe80::/64 never
	// touched, conntrack cleanup per family).
	IPVersion int
	// Protocol marks our routes (Felix's DeviceRouteProtocol). 0 means 3
	// (RTPROT_BOOT); with 3, routes of protocol 80 also count as ours.
	Protocol netlink.RouteProtocol
	// Metric is the metric of a target with Priority 0. 0 means 1024, the
	// metric the kernel itself gives IPv6 routes without one.
	Metric int
	// InterfacePrefixes name the workload interfaces (Felix's
	// InterfacePrefix). Nil means []string{"cali"}.
	InterfacePrefixes []string
	// GracePeriod is how long an unknown route on a new workload interface
	// is left alone, so as not to race the CNI plugin that adds it before
	// we hear of the endpoint. 0 means 10s; negative disables it.
	GracePeriod time.Duration
	// RemoveExternalRoutes: every route on a workload interface is ours to
	// remove, whatever its protocol. Nil means true.
	RemoveExternalRoutes *bool
	// SourceAddressV4 and SourceAddressV6, if valid, are set as `src` on our
	// routes of that family (Felix's DeviceRouteSourceAddress[IPv6]).
	SourceAddressV4, SourceAddressV6 netip.Addr
	// ResyncInterval is the period of full resyncs that Apply does by
	// itself (Felix's RouteRefreshInterval). 0 means 90s; negative disables
	// them (QueueResync still works).
	ResyncInterval time.Duration
	// Clock returns the current time; nil means time.Now. Tests inject one
	// to step over the grace period.
	Clock func() time.Time
	// Logger receives suppressed and non-fatal errors; nil discards.
	Logger *slog.Logger
	// OwnedDevices lists interfaces whose routes are ours besides the
	// rules above (Felix's MainTableOwnershipPolicy: any route on the VXLAN
	// devices, BIRD's routes on tunl0 when Felix programs IPIP routes).
	OwnedDevices []OwnedDevice
}

// OwnedDevice says which routes on one interface are ours.
type OwnedDevice struct {
	// Name is the interface.
	Name string
	// Family limits the rule to netlink.FAMILY_V4 or FAMILY_V6; 0 is both.
	Family int
	// Protocols are the owned protocols; nil means every protocol but the
	// kernel's own (RTPROT_KERNEL: the prefix routes of the interface's
	// addresses).
	Protocols []netlink.RouteProtocol
}

// Defaults of Config, as Felix's.
const (
	DefaultProtocol       netlink.RouteProtocol = 3 // RTPROT_BOOT
	DefaultMetric                               = 1024
	DefaultGracePeriod                          = 10 * time.Second
	DefaultResyncInterval                       = 90 * time.Second
	// legacyProtocol is the protocol older Calico releases wrote; with the
	// default protocol such routes are still ours.
	legacyProtocol netlink.RouteProtocol = 80
)

// IfaceState is the state of an interface as the Monitor reports it; the
// endpoint manager takes the same type (package felix holds it, below
// both).
type IfaceState = felix.IfaceState

// The states.
const (
	IfaceUp   = felix.IfaceUp
	IfaceDown = felix.IfaceDown
	IfaceGone = felix.IfaceGone
)

// InterfaceStateUpdate reports a change of an interface's state.
type InterfaceStateUpdate = felix.InterfaceStateUpdate

// InterfaceAddrsUpdate reports the full set of addresses of an interface.
type InterfaceAddrsUpdate = felix.InterfaceAddrsUpdate

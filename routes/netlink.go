package routes

import (
	"errors"
	"net"
	"net/netip"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// dataplane is the part of *netlink.Handle that Table uses. Unit tests
// substitute an in-memory kernel for it; kernel tests wrap the real handle
// to count calls.
type dataplane interface {
	LinkList() ([]netlink.Link, error)
	LinkByName(name string) (netlink.Link, error)
	RouteListFiltered(family int, filter *netlink.Route, filterMask uint64) ([]netlink.Route, error)
	RouteReplace(route *netlink.Route) error
	RouteDel(route *netlink.Route) error
	NeighList(linkIndex, family int) ([]netlink.Neigh, error)
	NeighSet(neigh *netlink.Neigh) error
	NeighDel(neigh *netlink.Neigh) error
	ConntrackDeleteFilters(table netlink.ConntrackTableType, family netlink.InetFamily, filters ...netlink.CustomConntrackFilter) (uint, error)
}

var _ dataplane = (*netlink.Handle)(nil)

// dumpRetries bounds the retries of a dump that the kernel flagged
// NLM_F_DUMP_INTR (the table changed while it was read). Since
// vishvananda/netlink v1.3.0 such a dump returns ErrDumpInterrupted together
// with possibly inconsistent data, and is no longer a Temporary() error
// (vishvananda/netlink#1086), so every caller must retry by itself.
const dumpRetries = 5

// retryDump runs dump until it is not interrupted, at most dumpRetries
// times; the last error is returned as is.
func retryDump[T any](dump func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for range dumpRetries {
		v, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, err
}

// linkOperUp reports whether a link is operationally up. IFF_RUNNING, not
// IFF_UP: an admin-up veth whose peer is down has no carrier, and Felix
// (ifacemonitor.linkIsOperUp) counts only running links as up.
func linkOperUp(l netlink.Link) bool {
	return l.Attrs().RawFlags&unix.IFF_RUNNING != 0
}

// isLinkGone reports whether err means the interface is down or gone (B9):
// such errors are expected while an interface churns and are not reported.
func isLinkGone(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENETDOWN) ||
		errors.Is(err, unix.ENXIO) || errors.As(err, &nf)
}

// isNotFound reports whether a delete found nothing to delete.
func isNotFound(err error) bool {
	return errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT)
}

// isConntrackUnavailable reports whether the conntrack netlink subsystem is
// missing (nf_conntrack_netlink not loaded or built).
func isConntrackUnavailable(err error) bool {
	return errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ENOENT) ||
		errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, syscall.EAFNOSUPPORT)
}

func prefixToIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// ipNetToPrefix converts a route's destination; nil (a default route in some
// netlink versions) is the family's zero prefix.
func ipNetToPrefix(n *net.IPNet, family int) (netip.Prefix, bool) {
	if n == nil {
		if family == netlink.FAMILY_V6 {
			return netip.PrefixFrom(netip.IPv6Unspecified(), 0), true
		}
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0), true
	}
	addr, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	addr = addr.Unmap()
	ones, bits := n.Mask.Size()
	if bits != addr.BitLen() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(addr, ones).Masked(), true
}

func ipToAddr(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

func familyOf(p netip.Prefix) int {
	if p.Addr().Is4() {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

// ipSetFilter matches a conntrack flow if any of its four addresses (original
// and reply, source and destination) is in the set. One filter for all IPs
// keeps the cleanup at one conntrack dump per family, not one per address.
type ipSetFilter map[netip.Addr]struct{}

// MatchConntrackFlow is part of netlink.CustomConntrackFilter.
func (f ipSetFilter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	for _, ip := range []net.IP{flow.Forward.SrcIP, flow.Forward.DstIP, flow.Reverse.SrcIP, flow.Reverse.DstIP} {
		if _, ok := f[ipToAddr(ip)]; ok {
			return true
		}
	}
	return false
}

package explain

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// NetlinkFacts answers Facts from the kernel, over a netlink handle bound to
// the node's namespace.
type NetlinkFacts struct {
	nl *netlink.Handle
}

// NewNetlinkFacts returns Facts read through nl.
func NewNetlinkFacts(nl *netlink.Handle) *NetlinkFacts { return &NetlinkFacts{nl: nl} }

// Local implements Facts.
func (f *NetlinkFacts) Local(a netip.Addr) bool {
	addrs, err := f.nl.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return false
	}
	for _, x := range addrs {
		if y, ok := netip.AddrFromSlice(x.IP); ok && y.Unmap() == a {
			return true
		}
	}
	return false
}

// Route implements Facts: the kernel's own route lookup (RTM_GETROUTE), as
// `ip route get` does.
func (f *NetlinkFacts) Route(dst netip.Addr) (string, netip.Addr, error) {
	routes, err := f.nl.RouteGet(net.IP(dst.AsSlice()))
	if err != nil {
		return "", netip.Addr{}, err
	}
	if len(routes) == 0 {
		return "", netip.Addr{}, fmt.Errorf("no route to %s", dst)
	}
	r := routes[0]
	link, err := f.nl.LinkByIndex(r.LinkIndex)
	if err != nil {
		return "", netip.Addr{}, fmt.Errorf("route to %s: interface %d: %w", dst, r.LinkIndex, err)
	}
	src, _ := netip.AddrFromSlice(r.Src)
	return link.Attrs().Name, src.Unmap(), nil
}

// Addresses implements Facts: the host routes through iface (a workload's
// addresses, as nftep programs them), else iface's own addresses (a host
// interface).
func (f *NetlinkFacts) Addresses(iface string) ([]netip.Addr, error) {
	link, err := f.nl.LinkByName(iface)
	if err != nil {
		return nil, fmt.Errorf("interface %q: %w", iface, err)
	}
	routes, err := f.nl.RouteList(link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("routes of %q: %w", iface, err)
	}
	var out []netip.Addr
	for _, r := range routes {
		if r.Dst == nil {
			continue
		}
		ones, bits := r.Dst.Mask.Size()
		if ones != bits {
			continue
		}
		if a, ok := netip.AddrFromSlice(r.Dst.IP); ok {
			out = append(out, a.Unmap())
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	addrs, err := f.nl.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("addresses of %q: %w", iface, err)
	}
	for _, x := range addrs {
		if a, ok := netip.AddrFromSlice(x.IP); ok && !a.IsLinkLocalUnicast() {
			out = append(out, a.Unmap())
		}
	}
	return out, nil
}

// Exists implements Facts.
func (f *NetlinkFacts) Exists(iface string) bool {
	_, err := f.nl.LinkByName(iface)
	return err == nil
}

// HostAddrs returns every address of the namespace (what `fib … type
// local` asks about).
func (f *NetlinkFacts) HostAddrs() ([]netip.Addr, error) {
	return f.addrs(nil)
}

// IfaceAddrs returns iface's own addresses, in the kernel's order (a
// masquerade takes the first of the packet's family).
func (f *NetlinkFacts) IfaceAddrs(iface string) ([]netip.Addr, error) {
	link, err := f.nl.LinkByName(iface)
	if err != nil {
		return nil, fmt.Errorf("interface %q: %w", iface, err)
	}
	return f.addrs(link)
}

func (f *NetlinkFacts) addrs(link netlink.Link) ([]netip.Addr, error) {
	addrs, err := f.nl.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("addresses: %w", err)
	}
	var out []netip.Addr
	for _, x := range addrs {
		if a, ok := netip.AddrFromSlice(x.IP); ok {
			out = append(out, a.Unmap())
		}
	}
	return out, nil
}

package explain

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftep/nftep/overlay"
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

// Egress implements EgressFacts: the kernel's route lookup, the main-table
// route that matched (the longest prefix on the interface it chose), and
// what that interface does with the packet: a VXLAN device's VNI, port
// and the remote VTEP behind the next hop (its permanent neighbour gives
// the MAC, the FDB entry of that MAC the underlay address); an ipip
// device's outer addresses; or nothing (plain).
func (f *NetlinkFacts) Egress(dst netip.Addr) (*Egress, error) {
	got, err := f.nl.RouteGet(net.IP(dst.AsSlice()))
	if err != nil {
		return nil, err
	}
	if len(got) == 0 {
		return nil, fmt.Errorf("no route to %s", dst)
	}
	r := got[0]
	link, err := f.nl.LinkByIndex(r.LinkIndex)
	if err != nil {
		return nil, fmt.Errorf("route to %s: interface %d: %w", dst, r.LinkIndex, err)
	}
	name := link.Attrs().Name
	fam := netlink.FAMILY_V4
	if dst.Is6() {
		fam = netlink.FAMILY_V6
	}
	e := &Egress{Route: overlay.KernelRoute{Dst: "default", Type: "unicast", Device: name, Protocol: unix.RTPROT_BOOT}}
	main, err := f.nl.RouteListFiltered(fam, &netlink.Route{LinkIndex: r.LinkIndex, Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("routes of %s: %w", name, err)
	}
	best := -1
	for _, m := range main {
		if m.Dst == nil || !m.Dst.Contains(net.IP(dst.AsSlice())) {
			continue
		}
		if ones, _ := m.Dst.Mask.Size(); ones > best {
			best = ones
			e.Route.Dst, e.Route.Protocol, e.Route.MTU = m.Dst.String(), int(m.Protocol), m.MTU
			e.Route.OnLink = m.Flags&int(netlink.FLAG_ONLINK) != 0
			e.Route.Via = ""
			if m.Gw != nil {
				e.Route.Via = ipAddr(m.Gw).String()
			}
			if dst.Is6() && m.Priority != 1024 || dst.Is4() {
				e.Route.Metric = m.Priority
			}
		}
	}
	if best < 0 && r.Gw != nil {
		e.Route.Via = ipAddr(r.Gw).String()
	}
	next := dst
	if e.Route.Via != "" {
		next = netip.MustParseAddr(e.Route.Via)
	}
	switch l := link.(type) {
	case *netlink.Vxlan:
		e.Encap = Encap{Kind: "vxlan", VNI: l.VxlanId, Port: l.Port, NextHop: next.String()}
		if l.SrcAddr != nil {
			e.Encap.Local = ipAddr(l.SrcAddr).String()
		}
		neighs, err := f.nl.NeighList(r.LinkIndex, fam)
		if err != nil {
			return nil, fmt.Errorf("neighbours of %s: %w", name, err)
		}
		var mac net.HardwareAddr
		for _, n := range neighs {
			if ipAddr(n.IP) == next && n.HardwareAddr != nil {
				mac = n.HardwareAddr
			}
		}
		if mac == nil {
			e.Encap.Problem = fmt.Sprintf("no neighbour entry for %s on %s: the kernel cannot address the inner frame", next, name)
			break
		}
		e.Encap.RemoteMAC = mac.String()
		fdb, err := f.nl.NeighList(r.LinkIndex, unix.AF_BRIDGE)
		if err != nil {
			return nil, fmt.Errorf("fdb of %s: %w", name, err)
		}
		for _, n := range fdb {
			if bytes.Equal(n.HardwareAddr, mac) && n.IP != nil {
				e.Encap.Remote = ipAddr(n.IP).String()
			}
		}
		if e.Encap.Remote == "" {
			e.Encap.Problem = fmt.Sprintf("no FDB entry for %s on %s: the kernel does not know where to send the frame", mac, name)
		}
	case *netlink.Iptun:
		e.Encap = Encap{Kind: "ipip", NextHop: next.String(), Remote: next.String()}
		if l.Local != nil && !l.Local.IsUnspecified() {
			e.Encap.Local = ipAddr(l.Local).String()
		}
	default:
		e.Encap = Encap{Kind: "none", NextHop: next.String()}
	}
	return e, nil
}

func ipAddr(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

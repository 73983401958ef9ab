package felix

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/nftep/nftep/proto"
)

// Route is a RouteUpdate parsed: where a destination lives and what it is
// (cluster-networking spec §1.1).
type Route struct {
	// Dst is the destination, masked.
	Dst netip.Prefix
	// Types is the bit set of proto.RouteType values.
	Types proto.RouteType
	// PoolType is the encapsulation of the enclosing pool.
	PoolType proto.IPPoolType
	// NodeName owns Dst; NodeIP is its address of Dst's family (invalid
	// when unknown).
	NodeName string
	NodeIP   netip.Addr
	// SameSubnet, NATOutgoing, LocalWorkload and Borrowed are Felix's
	// flags of the same names.
	SameSubnet, NATOutgoing, LocalWorkload, Borrowed bool
	// TunnelIPIP, TunnelVXLAN and TunnelWireguard say which of NodeName's
	// tunnel addresses Dst is.
	TunnelIPIP, TunnelVXLAN, TunnelWireguard bool
}

// Has reports whether every bit of t is set in r.Types.
func (r Route) Has(t proto.RouteType) bool { return r.Types&t == t }

// allRouteTypes is every bit Felix defines.
const allRouteTypes = proto.RouteType_REMOTE_WORKLOAD | proto.RouteType_REMOTE_HOST | proto.RouteType_LOCAL_WORKLOAD |
	proto.RouteType_LOCAL_HOST | proto.RouteType_REMOTE_TUNNEL | proto.RouteType_LOCAL_TUNNEL

// ParseRoute checks and parses a RouteUpdate. Errors name the field.
func ParseRoute(m *proto.RouteUpdate) (Route, error) {
	dst, err := ParseNet(m.GetDst())
	if err != nil {
		return Route{}, fmt.Errorf("dst: %w", err)
	}
	r := Route{
		Dst:             dst,
		Types:           m.GetTypes(),
		PoolType:        m.GetIpPoolType(),
		NodeName:        m.GetDstNodeName(),
		SameSubnet:      m.GetSameSubnet(),
		NATOutgoing:     m.GetNatOutgoing(),
		LocalWorkload:   m.GetLocalWorkload(),
		Borrowed:        m.GetBorrowed(),
		TunnelIPIP:      m.GetTunnelType().GetIpip(),
		TunnelVXLAN:     m.GetTunnelType().GetVxlan(),
		TunnelWireguard: m.GetTunnelType().GetWireguard(),
	}
	if r.Types&^allRouteTypes != 0 || r.Types < 0 {
		return Route{}, fmt.Errorf("types: %d has bits Felix does not define", r.Types)
	}
	if _, ok := proto.IPPoolType_name[int32(r.PoolType)]; !ok {
		return Route{}, fmt.Errorf("ipPoolType: unknown pool type %d", r.PoolType)
	}
	if s := m.GetDstNodeIp(); s != "" {
		a, err := ParseAddr(s)
		if err != nil {
			return Route{}, fmt.Errorf("dstNodeIp: %w", err)
		}
		if FamilyOf(a) != FamilyOf(dst.Addr()) {
			return Route{}, fmt.Errorf("dstNodeIp: %s is not of dst's family (%s)", a, FamilyOf(dst.Addr()))
		}
		r.NodeIP = a
	}
	return r, nil
}

// VTEP is a VXLANTunnelEndpointUpdate parsed: one node's tunnel endpoint
// per family.
type VTEP struct {
	Node string
	// Families holds the IPv4 and IPv6 endpoints; one whose Addr is
	// invalid is absent.
	Families [2]VTEPFamily
}

// VTEPFamily is a node's VXLAN endpoint in one family.
type VTEPFamily struct {
	// Addr is the node's tunnel address (the device's address).
	Addr netip.Addr
	// MAC is the device's MAC.
	MAC net.HardwareAddr
	// Parent is the underlay address the tunnel runs over.
	Parent netip.Addr
}

// ParseVTEP checks and parses a VXLANTunnelEndpointUpdate. A family's
// triple may be empty (no endpoint in that family); a partial one is an
// error naming the field.
func ParseVTEP(m *proto.VXLANTunnelEndpointUpdate) (VTEP, error) {
	v := VTEP{Node: m.GetNode()}
	if v.Node == "" {
		return VTEP{}, fmt.Errorf("node: missing")
	}
	fields := [2][3]struct{ name, val string }{
		{{"ipv4Addr", m.GetIpv4Addr()}, {"mac", m.GetMac()}, {"parentDeviceIp", m.GetParentDeviceIp()}},
		{{"ipv6Addr", m.GetIpv6Addr()}, {"macV6", m.GetMacV6()}, {"parentDeviceIpv6", m.GetParentDeviceIpv6()}},
	}
	for fam, f := range fields {
		if f[0].val == "" && f[2].val == "" {
			continue
		}
		var vf VTEPFamily
		// Felix also accepts the tunnel address as a CIDR.
		p, err := ParseCIDR(f[0].val)
		if err != nil || FamilyOf(p.Addr()) != Family(fam) {
			return VTEP{}, fmt.Errorf("%s: %q is not an %s address", f[0].name, f[0].val, Family(fam))
		}
		vf.Addr = p.Addr()
		if vf.MAC, err = net.ParseMAC(f[1].val); err != nil || len(vf.MAC) != 6 {
			return VTEP{}, fmt.Errorf("%s: %q is not a MAC address", f[1].name, f[1].val)
		}
		a, err := ParseAddr(f[2].val)
		if err != nil || FamilyOf(a) != Family(fam) {
			return VTEP{}, fmt.Errorf("%s: %q is not an %s address", f[2].name, f[2].val, Family(fam))
		}
		vf.Parent = a
		v.Families[fam] = vf
	}
	return v, nil
}

// HostAddrs parses a HostMetadataUpdate's addresses (address with prefix
// length, or bare): per family, invalid when empty.
func HostAddrs(m *proto.HostMetadataUpdate) ([2]netip.Prefix, error) {
	var out [2]netip.Prefix
	for fam, f := range [2]struct{ name, val string }{{"ipv4Addr", m.GetIpv4Addr()}, {"ipv6Addr", m.GetIpv6Addr()}} {
		if f.val == "" {
			continue
		}
		p, err := ParseCIDR(f.val)
		if err != nil || FamilyOf(p.Addr()) != Family(fam) {
			return out, fmt.Errorf("%s: %q is not an %s address", f.name, f.val, Family(fam))
		}
		out[fam] = p
	}
	if m.GetHostname() == "" {
		return out, fmt.Errorf("hostname: missing")
	}
	return out, nil
}

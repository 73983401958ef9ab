package overlay

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// KernelReader is the part of *netlink.Handle that ReadKernel uses.
type KernelReader interface {
	LinkList() ([]netlink.Link, error)
	AddrList(link netlink.Link, family int) ([]netlink.Addr, error)
	NeighList(linkIndex, family int) ([]netlink.Neigh, error)
	RouteListFiltered(family int, filter *netlink.Route, filterMask uint64) ([]netlink.Route, error)
}

var _ KernelReader = (*netlink.Handle)(nil)

// Kernel is the cluster networking a namespace's kernel holds, as nftep's
// ownership rules see it: the tunnel devices, the VTEP neighbours and FDB
// entries on the VXLAN devices, and the cluster routes. It is what
// `nftep show` prints after the tables, read from the kernel, not from
// nftep's record.
type Kernel struct {
	Devices    []KernelDevice `json:"devices"`
	Neighbours []KernelNeigh  `json:"neighbours"`
	FDB        []KernelFDB    `json:"fdb"`
	Routes     []KernelRoute  `json:"routes"`
}

// KernelDevice is one tunnel device: vxlan.calico, vxlan-v6.calico, or
// tunl0 when it is up or has an address (the kernel's ipip module makes a
// bare tunl0 in every namespace).
type KernelDevice struct {
	Name string `json:"name"`
	// Kind is "vxlan" or "ipip".
	Kind      string   `json:"kind"`
	Up        bool     `json:"up"`
	MTU       int      `json:"mtu"`
	MAC       string   `json:"mac,omitempty"`
	Addresses []string `json:"addresses"`
	// VXLAN only: the VNI, UDP port, underlay address and parent device,
	// and whether the device learns (nftep's never do).
	VNI      int    `json:"vni,omitempty"`
	Port     int    `json:"port,omitempty"`
	Local    string `json:"local,omitempty"`
	Parent   string `json:"parent,omitempty"`
	Learning bool   `json:"learning,omitempty"`
}

// KernelNeigh is a permanent neighbour on a VXLAN device: a remote VTEP's
// tunnel address and its device's MAC.
type KernelNeigh struct {
	Device  string `json:"device"`
	Address string `json:"address"`
	MAC     string `json:"mac"`
}

// KernelFDB is a permanent FDB entry on a VXLAN device: where frames to a
// remote VTEP's MAC go (its node's underlay address).
type KernelFDB struct {
	Device string `json:"device"`
	MAC    string `json:"mac"`
	Dst    string `json:"dst"`
}

// KernelRoute is a cluster route.
type KernelRoute struct {
	Dst string `json:"dst"`
	// Type is "unicast" or "blackhole".
	Type     string `json:"type"`
	Via      string `json:"via,omitempty"`
	Device   string `json:"device,omitempty"`
	OnLink   bool   `json:"onlink,omitempty"`
	Protocol int    `json:"protocol"`
	Metric   int    `json:"metric,omitempty"`
	MTU      int    `json:"mtu,omitempty"`
}

// ReadKernel reads the cluster networking of nl's namespace. Cluster
// routes are those of the main table that Felix's ownership rules give
// nftep whatever its configuration: routes of protocol exclusive (80, or
// DeviceRouteProtocol when it is not 3), blackholes of that protocol
// included, and every route on a VXLAN device but the kernel's own.
func ReadKernel(nl KernelReader, exclusive netlink.RouteProtocol) (*Kernel, error) {
	k := &Kernel{Devices: []KernelDevice{}, Neighbours: []KernelNeigh{}, FDB: []KernelFDB{}, Routes: []KernelRoute{}}
	links, err := nl.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	vxlanIdx := map[int]bool{}
	for _, name := range DeviceNames {
		i := slices.IndexFunc(links, func(l netlink.Link) bool { return l.Attrs().Name == name })
		if i < 0 {
			continue
		}
		l := links[i]
		a := l.Attrs()
		d := KernelDevice{Name: name, Up: a.Flags&net.FlagUp != 0, MTU: a.MTU, Addresses: []string{}}
		addrs, err := nl.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", name, err)
		}
		for _, x := range addrs {
			if x.IP.IsLinkLocalUnicast() {
				continue
			}
			d.Addresses = append(d.Addresses, x.IPNet.String())
		}
		switch v := l.(type) {
		case *netlink.Vxlan:
			d.Kind, d.MAC, d.VNI, d.Port, d.Learning = "vxlan", a.HardwareAddr.String(), v.VxlanId, v.Port, v.Learning
			if v.SrcAddr != nil {
				d.Local = v.SrcAddr.String()
			}
			d.Parent = names[v.VtepDevIndex]
			vxlanIdx[a.Index] = true
		default:
			if name != IPIPDevice || (!d.Up && len(d.Addresses) == 0) {
				continue
			}
			d.Kind = "ipip"
		}
		k.Devices = append(k.Devices, d)
		if d.Kind != "vxlan" {
			continue
		}
		fam := netlink.FAMILY_V4
		if name == VXLANDeviceV6 {
			fam = netlink.FAMILY_V6
		}
		neighs, err := nl.NeighList(a.Index, fam)
		if err != nil {
			return nil, fmt.Errorf("neighbours of %s: %w", name, err)
		}
		for _, n := range neighs {
			if n.State&netlink.NUD_PERMANENT != 0 && n.HardwareAddr != nil && n.LinkIndex == a.Index {
				k.Neighbours = append(k.Neighbours, KernelNeigh{Device: name, Address: ipToAddr(n.IP).String(), MAC: n.HardwareAddr.String()})
			}
		}
		fdb, err := nl.NeighList(a.Index, unix.AF_BRIDGE)
		if err != nil {
			return nil, fmt.Errorf("fdb of %s: %w", name, err)
		}
		for _, n := range fdb {
			if n.State&netlink.NUD_PERMANENT != 0 && n.HardwareAddr != nil && n.IP != nil && n.LinkIndex == a.Index {
				k.FDB = append(k.FDB, KernelFDB{Device: name, MAC: n.HardwareAddr.String(), Dst: ipToAddr(n.IP).String()})
			}
		}
	}
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		rs, err := nl.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return nil, fmt.Errorf("list routes: %w", err)
		}
		for _, r := range rs {
			if r.Dst == nil {
				continue
			}
			ours := r.Protocol == exclusive || vxlanIdx[r.LinkIndex] && r.Protocol != unix.RTPROT_KERNEL
			if !ours {
				continue
			}
			kr := KernelRoute{Dst: r.Dst.String(), Type: "unicast", Protocol: int(r.Protocol), MTU: r.MTU}
			if r.Type == unix.RTN_BLACKHOLE {
				kr.Type = "blackhole"
			} else {
				kr.Device = names[r.LinkIndex]
			}
			if r.Gw != nil {
				kr.Via = ipToAddr(r.Gw).String()
			}
			kr.OnLink = r.Flags&int(netlink.FLAG_ONLINK) != 0
			if fam == netlink.FAMILY_V4 || r.Priority != routesDefaultMetricV6 {
				kr.Metric = r.Priority
			}
			k.Routes = append(k.Routes, kr)
		}
	}
	slices.SortFunc(k.Neighbours, func(a, b KernelNeigh) int { return strings.Compare(a.Device+" "+a.Address, b.Device+" "+b.Address) })
	slices.SortFunc(k.FDB, func(a, b KernelFDB) int { return strings.Compare(a.Device+" "+a.MAC, b.Device+" "+b.MAC) })
	slices.SortStableFunc(k.Routes, func(a, b KernelRoute) int {
		pa, pb := netip.MustParsePrefix(a.Dst), netip.MustParsePrefix(b.Dst)
		return pa.Addr().Compare(pb.Addr())
	})
	return k, nil
}

// routesDefaultMetricV6 is the metric the kernel gives an IPv6 route
// without one; `ip route add` needs no metric for it.
const routesDefaultMetricV6 = 1024

// Empty reports whether the kernel holds no cluster networking.
func (k *Kernel) Empty() bool {
	return k == nil || len(k.Devices) == 0 && len(k.Routes) == 0
}

// Commands returns k as the `ip` and `bridge` commands that make it:
//
//	ip link add vxlan.calico address 66:f9:37:c3:7e:94 mtu 1450 type vxlan id 4096 local 192.168.60.11 dev eth0 dstport 4789 nolearning
//	ip address add 10.65.1.0/32 dev vxlan.calico
//	ip link set vxlan.calico up
//	ip neigh add 10.65.2.0 lladdr 66:2d:bf:44:a6:8b dev vxlan.calico nud permanent
//	bridge fdb add 66:2d:bf:44:a6:8b dev vxlan.calico dst 192.168.60.12 self permanent
//	ip route add 10.65.2.0/26 via 10.65.2.0 dev vxlan.calico onlink mtu 1450
//	ip route add blackhole 10.65.1.0/26 proto 80
func (k *Kernel) Commands() []string {
	var out []string
	for _, d := range k.Devices {
		if d.Kind == "vxlan" {
			s := fmt.Sprintf("ip link add %s address %s mtu %d type vxlan id %d", d.Name, d.MAC, d.MTU, d.VNI)
			if d.Local != "" {
				s += " local " + d.Local
			}
			if d.Parent != "" {
				s += " dev " + d.Parent
			}
			s += " dstport " + strconv.Itoa(d.Port)
			if !d.Learning {
				s += " nolearning"
			}
			out = append(out, s)
		} else {
			out = append(out, fmt.Sprintf("ip link set %s mtu %d", d.Name, d.MTU))
		}
		for _, a := range d.Addresses {
			out = append(out, fmt.Sprintf("ip address add %s dev %s", a, d.Name))
		}
		if d.Up {
			out = append(out, fmt.Sprintf("ip link set %s up", d.Name))
		}
		for _, n := range k.Neighbours {
			if n.Device == d.Name {
				out = append(out, fmt.Sprintf("ip neigh add %s lladdr %s dev %s nud permanent", n.Address, n.MAC, n.Device))
			}
		}
		for _, f := range k.FDB {
			if f.Device == d.Name {
				out = append(out, fmt.Sprintf("bridge fdb add %s dev %s dst %s self permanent", f.MAC, f.Device, f.Dst))
			}
		}
	}
	for _, r := range k.Routes {
		out = append(out, "ip route add "+r.String())
	}
	return out
}

// String is the route in `ip route add` syntax.
func (r KernelRoute) String() string {
	var b strings.Builder
	if r.Type == "blackhole" {
		b.WriteString("blackhole ")
	}
	b.WriteString(r.Dst)
	if r.Via != "" {
		b.WriteString(" via " + r.Via)
	}
	if r.Device != "" {
		b.WriteString(" dev " + r.Device)
	}
	if r.Protocol != unix.RTPROT_BOOT {
		b.WriteString(" proto " + strconv.Itoa(r.Protocol))
	}
	if r.Metric != 0 {
		b.WriteString(" metric " + strconv.Itoa(r.Metric))
	}
	if r.OnLink {
		b.WriteString(" onlink")
	}
	if r.MTU != 0 {
		b.WriteString(" mtu " + strconv.Itoa(r.MTU))
	}
	return b.String()
}

// Format prints k after a ruleset in nft syntax: each command behind
// "# ", so that the whole stays input nft -f takes.
func (k *Kernel) Format() string {
	var b strings.Builder
	b.WriteString("# cluster networking in the kernel: tunnel devices, remote VTEPs (neighbours, FDB), cluster routes\n")
	for _, c := range k.Commands() {
		b.WriteString("# " + c + "\n")
	}
	return b.String()
}

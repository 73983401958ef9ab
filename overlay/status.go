package overlay

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/nftep/nftep/routes"
)

// Status is what `nftep status` and `nftep show` report of cluster
// networking: the encapsulation, the tunnel devices, the remote VTEPs, the
// cluster routes nftep wants, and the kernel features it found missing.
type Status struct {
	// Encapsulation lists the encapsulations in use ("vxlan",
	// "vxlan-v6", "ipip", "none"); empty before Felix said.
	Encapsulation []string `json:"encapsulation,omitempty"`
	// Devices are the tunnel devices and what nftep does with them.
	Devices []DeviceStatus `json:"devices,omitempty"`
	// RemoteVTEPs are the other nodes' VXLAN endpoints (a permanent
	// neighbour and an FDB entry each).
	RemoteVTEPs []VTEPStatus `json:"remoteVteps,omitempty"`
	// ClusterRoutes are the routes to other nodes' blocks and the
	// blackholes of this node's, in `ip route` syntax.
	ClusterRoutes []string `json:"clusterRoutes,omitempty"`
	// Missing names the kernel features an encapsulation in use needs and
	// the kernel lacks, with what failed.
	Missing map[string]string `json:"missing,omitempty"`
}

// DeviceStatus is one tunnel device.
type DeviceStatus struct {
	Name string `json:"name"`
	// Mode is want, remove, strip or leave.
	Mode    string `json:"mode"`
	MTU     int    `json:"mtu,omitempty"`
	Address string `json:"address,omitempty"`
	MAC     string `json:"mac,omitempty"`
	VNI     int    `json:"vni,omitempty"`
	Port    int    `json:"port,omitempty"`
	Parent  string `json:"parent,omitempty"`
}

// VTEPStatus is one remote VXLAN endpoint.
type VTEPStatus struct {
	Node     string `json:"node"`
	Device   string `json:"device"`
	Address  string `json:"address"`
	MAC      string `json:"mac"`
	Underlay string `json:"underlay"`
}

// Status reports the manager's view: nil before the first Encapsulation.
// missing comes from Devices.Problems.
func (m *Manager) Status(missing map[string]string) *Status {
	if m.encap == nil {
		return nil
	}
	s := &Status{Missing: missing}
	e := m.encap
	for _, c := range []struct {
		on   bool
		name string
	}{{e.GetVxlanEnabled(), "vxlan"}, {e.GetVxlanEnabledV6() && m.cfg.IPv6, "vxlan-v6"}, {e.GetIpipEnabled(), "ipip"}} {
		if c.on {
			s.Encapsulation = append(s.Encapsulation, c.name)
		}
	}
	if e.GetNoEncapEnabled() {
		s.Encapsulation = append(s.Encapsulation, "none")
	}
	st := m.last
	for fam, w := range st.VXLAN {
		d := DeviceStatus{Name: vxlanNames[fam], Mode: w.Mode.String()}
		if w.Mode == Want {
			d.MTU, d.VNI, d.Port, d.Parent = w.Device.MTU, w.Device.VNI, w.Device.Port, w.Device.Parent
			d.Address, d.MAC = w.Device.Addr.String(), w.Device.MAC.String()
		}
		s.Devices = append(s.Devices, d)
		for _, p := range sortedPeers(w.Peers) {
			s.RemoteVTEPs = append(s.RemoteVTEPs, VTEPStatus{Node: p.Node, Device: vxlanNames[fam], Address: p.Addr.String(), MAC: p.MAC.String(), Underlay: p.Underlay.String()})
		}
	}
	d := DeviceStatus{Name: IPIPDevice, Mode: st.IPIP.Mode.String()}
	if st.IPIP.Mode == Want {
		d.MTU, d.Address = st.IPIP.MTU, st.IPIP.Addr.String()
	}
	s.Devices = append(s.Devices, d)
	for _, iface := range slices.Sorted(maps.Keys(m.targets)) {
		for _, t := range m.targets[iface] {
			s.ClusterRoutes = append(s.ClusterRoutes, routeText(iface, t))
		}
	}
	return s
}

// routeText renders a target in `ip route` syntax.
func routeText(iface string, t routes.Target) string {
	var b strings.Builder
	if t.Blackhole {
		b.WriteString("blackhole ")
	}
	b.WriteString(t.CIDR.String())
	if t.Gateway.IsValid() {
		b.WriteString(" via " + t.Gateway.String())
	}
	if iface != routes.BlackholeIface {
		b.WriteString(" dev " + iface)
	}
	if t.OnLink {
		b.WriteString(" onlink")
	}
	if t.Protocol != 0 {
		b.WriteString(" proto " + itoa(int(t.Protocol)))
	}
	if t.MTU > 0 {
		b.WriteString(" mtu " + itoa(t.MTU))
	}
	return b.String()
}

func itoa(n int) string { return strconv.Itoa(n) }

package overlay

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

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
	type ifTarget struct {
		iface string
		t     routes.Target
	}
	var all []ifTarget
	for iface, ts := range m.targets {
		for _, t := range ts {
			all = append(all, ifTarget{iface, t})
		}
	}
	slices.SortFunc(all, func(a, b ifTarget) int { return a.t.CIDR.Compare(b.t.CIDR) })
	for _, x := range all {
		s.ClusterRoutes = append(s.ClusterRoutes, routeText(x.iface, x.t))
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

// InUse reports whether s has anything to show: a device nftep keeps, a
// cluster route, a missing kernel feature. A node without encapsulation
// and cluster routes prints no cluster networking section.
func (s *Status) InUse() bool {
	if s == nil {
		return false
	}
	for _, d := range s.Devices {
		if d.Mode == Want.String() {
			return true
		}
	}
	return len(s.ClusterRoutes) > 0 || len(s.Missing) > 0
}

// Format prints s for an operator:
//
//	cluster networking: vxlan, vxlan-v6
//	DEVICE           MODE    MTU   ADDRESS     MAC                VNI   PORT  PARENT
//	vxlan.calico     want    1450  10.65.1.0   66:f9:37:c3:7e:94  4096  4789  eth0
//	REMOTE VTEP  DEVICE        ADDRESS    MAC                UNDERLAY
//	node2        vxlan.calico  10.65.2.0  66:2d:bf:44:a6:8b  192.168.60.12
//	cluster routes:
//	  10.65.2.0/26 via 10.65.2.0 dev vxlan.calico onlink mtu 1450
func (s *Status) Format(w io.Writer) {
	enc := strings.Join(s.Encapsulation, ", ")
	if enc == "" {
		enc = "none in use"
	}
	fmt.Fprintf(w, "cluster networking: %s\n", enc)
	for _, f := range slices.Sorted(maps.Keys(s.Missing)) {
		fmt.Fprintf(w, "missing kernel feature %s: %s\n", f, s.Missing[f])
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tMODE\tMTU\tADDRESS\tMAC\tVNI\tPORT\tPARENT")
	dash := func(v any) any {
		if v == 0 || v == "" {
			return "-"
		}
		return v
	}
	for _, d := range s.Devices {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%v\t%v\t%v\t%v\t%v\n", d.Name, d.Mode, dash(d.MTU), dash(d.Address), dash(d.MAC), dash(d.VNI), dash(d.Port), dash(d.Parent))
	}
	tw.Flush()
	if len(s.RemoteVTEPs) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REMOTE VTEP\tDEVICE\tADDRESS\tMAC\tUNDERLAY")
		for _, v := range s.RemoteVTEPs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.Node, v.Device, v.Address, v.MAC, v.Underlay)
		}
		tw.Flush()
	}
	fmt.Fprintln(w, "cluster routes:")
	if len(s.ClusterRoutes) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, r := range s.ClusterRoutes {
		fmt.Fprintln(w, "  "+r)
	}
}

package overlay

import (
	"fmt"
	"net"
	"net/netip"
)

// Names of the devices nftep owns.
const (
	VXLANDevice   = "vxlan.calico"
	VXLANDeviceV6 = "vxlan-v6.calico"
	IPIPDevice    = "tunl0"
)

// DeviceNames lists every device nftep may own: the interface monitor
// reports every change of them (routes.MonitorConfig.WatchLinks).
var DeviceNames = []string{VXLANDevice, VXLANDeviceV6, IPIPDevice}

// vxlanNames are the VXLAN devices by family index.
var vxlanNames = [2]string{VXLANDevice, VXLANDeviceV6}

// Mode says what to do with a device.
type Mode int

const (
	// Leave the device as it is (its encapsulation is on but what it
	// needs is not known yet, or it is not ours to touch).
	Leave Mode = iota
	// Want the device as described, created or recreated if need be.
	Want
	// Remove the device (VXLAN whose family is off).
	Remove
	// Strip tunl0 of its IPv4 addresses, keeping the device (IPIP
	// implicitly off: the device belongs to the kernel's ipip module).
	Strip
)

func (m Mode) String() string {
	return [...]string{"leave", "want", "remove", "strip"}[m]
}

// State is the desired state of the devices, their neighbours and FDB
// entries, and the MTU file: what the Manager computes and Devices applies.
type State struct {
	// Known is false until the first Encapsulation message: until then
	// nothing is touched.
	Known bool
	// VXLAN holds the IPv4 and IPv6 VXLAN devices.
	VXLAN [2]VXLANWish
	// IPIP is tunl0.
	IPIP IPIPWish
	// PodMTU is what the MTU file gets (0: not written).
	PodMTU int
}

// VXLANWish is the desired state of one VXLAN device.
type VXLANWish struct {
	Mode Mode
	// Device is the device to have (Mode Want).
	Device VXLANLink
	// Peers are the remote VTEPs: a permanent neighbour and an FDB entry
	// each (Mode Want).
	Peers []Peer
}

// VXLANLink describes a VXLAN device (§4.3).
type VXLANLink struct {
	Name string
	VNI  int
	Port int
	// Parent is the underlay interface; Local its address the tunnel
	// runs from.
	Parent string
	Local  netip.Addr
	MAC    net.HardwareAddr
	MTU    int
	// Addr is the device's only address of its family (/32 or /128).
	Addr netip.Addr
}

// Peer is a remote VTEP.
type Peer struct {
	Node string
	// Addr is its tunnel address (the neighbour), MAC its device's MAC,
	// Underlay the address its packets go to (the FDB entry's dst).
	Addr     netip.Addr
	MAC      net.HardwareAddr
	Underlay netip.Addr
}

func (p Peer) String() string {
	return fmt.Sprintf("%s %s lladdr %s dst %s", p.Node, p.Addr, p.MAC, p.Underlay)
}

// IPIPWish is the desired state of tunl0 (§5.2).
type IPIPWish struct {
	Mode Mode
	MTU  int
	// Addr is its only IPv4 address (/32).
	Addr netip.Addr
}

package overlay

import (
	"net/netip"
	"regexp"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/nftep/nftep/felix"
)

// Felix configuration keys of cluster networking (matched
// case-insensitively; cluster-networking spec §2.1). DeviceRouteProtocol is
// the dataplane's (dataplane.KeyDeviceRouteProtocol), passed in.
const (
	KeyFelixHostname        = "FelixHostname"
	KeyVXLANVNI             = "VXLANVNI"
	KeyVXLANMTU             = "VXLANMTU"
	KeyVXLANMTUV6           = "VXLANMTUV6"
	KeyIPIPMTU              = "IpInIpMtu"
	KeyIPIPTunnelAddr       = "IpInIpTunnelAddr"
	KeyIPIPEnabled          = "IpInIpEnabled"
	KeyProgramClusterRoutes = "ProgramClusterRoutes"
	KeyRouteSource          = "RouteSource"
	KeyMTUIfacePattern      = "MTUIfacePattern"
)

// Values of ProgramClusterRoutes (§2.2).
const (
	ClusterRoutesEnabled          = "Enabled"
	ClusterRoutesDisabled         = "Disabled"
	ClusterRoutesIPIPOnly         = "EnabledIPIPOnly"
	ClusterRoutesNoEncapOnly      = "EnabledNoEncapOnly"
	DefaultProgramClusterRoutes   = ClusterRoutesIPIPOnly
	RouteSourceCalicoIPAM         = "CalicoIPAM"
	RouteSourceWorkloadIPs        = "WorkloadIPs"
	DefaultVNI                    = 4096
	DefaultPort                   = 4789
	DefaultMTUIfacePattern        = `^((en|wl|ww|sl|ib)[Pcopsvx].*|(eth|wlan|wwan).*)`
	DefaultHostMTU                = 1460 // when no interface matches MTUIfacePattern
	vxlanOverhead, vxlan6Overhead = 50, 70
	ipipOverhead                  = 20
)

// Config is the cluster-networking part of Felix's configuration. Every
// field is comparable, so that dataplane.Config stays comparable.
type Config struct {
	// Hostname names this node in Felix's messages (FelixHostname).
	Hostname string
	// IPv6 is Ipv6Support: without it, no IPv6 device or route.
	IPv6 bool
	// VNI and Port of both VXLAN devices.
	VNI, Port int
	// VXLANMTU, VXLANMTUV6 and IPIPMTU are the devices' MTUs (and their
	// routes'); 0 means the host MTU less the encapsulation's overhead.
	VXLANMTU, VXLANMTUV6, IPIPMTU int
	// IPIPTunnelAddr is tunl0's address (IpInIpTunnelAddr).
	IPIPTunnelAddr netip.Addr
	// IPIPEnabled is IpInIpEnabled: "" unset, "true" or "false". Unset
	// and IPIP off means tunl0's addresses are removed; false leaves tunl0
	// alone (§5.1).
	IPIPEnabled string
	// ProgramClusterRoutes is one of the ClusterRoutes* values.
	ProgramClusterRoutes string
	// RouteSource is CalicoIPAM or WorkloadIPs (no blackholes then).
	RouteSource string
	// DeviceRouteProtocol is the protocol of tunnel routes; blackholes,
	// same-subnet and IPIP routes get ExclusiveProtocol.
	DeviceRouteProtocol netlink.RouteProtocol
	// MTUIfacePattern selects the interfaces whose smallest MTU is the
	// host MTU.
	MTUIfacePattern string
}

// ProgramIPIPRoutes reports whether nftep, not BIRD, programs IPIP routes.
func (c Config) ProgramIPIPRoutes() bool {
	return c.ProgramClusterRoutes == ClusterRoutesEnabled || c.ProgramClusterRoutes == ClusterRoutesIPIPOnly
}

// ProgramNoEncapRoutes reports whether nftep, not BIRD, programs routes of
// pools without encapsulation.
func (c Config) ProgramNoEncapRoutes() bool {
	return c.ProgramClusterRoutes == ClusterRoutesEnabled || c.ProgramClusterRoutes == ClusterRoutesNoEncapOnly
}

// ExclusiveProtocol is the protocol that marks Felix's routes (§1.4, §6.3):
// 80 when DeviceRouteProtocol is boot (3), else DeviceRouteProtocol.
func (c Config) ExclusiveProtocol() netlink.RouteProtocol {
	if c.DeviceRouteProtocol == 3 || c.DeviceRouteProtocol == 0 {
		return 80
	}
	return c.DeviceRouteProtocol
}

// ParseFelixConfig reads the cluster-networking keys from c, applying
// Felix's defaults; errors are recorded in c, naming the key.
// DeviceRouteProtocol, Ipv6Support and VXLANPort (which the rules use too)
// are parsed elsewhere and passed in.
func ParseFelixConfig(c *felix.Config, deviceRouteProtocol netlink.RouteProtocol, ipv6 bool, port int) Config {
	cfg := Config{
		Hostname:            c.String(KeyFelixHostname, ""),
		IPv6:                ipv6,
		VNI:                 c.Int(KeyVXLANVNI, DefaultVNI, 1, 1<<24-1),
		Port:                port,
		VXLANMTU:            c.Int(KeyVXLANMTU, 0, 0, 65535),
		VXLANMTUV6:          c.Int(KeyVXLANMTUV6, 0, 0, 65535),
		IPIPMTU:             c.Int(KeyIPIPMTU, 0, 0, 65535),
		DeviceRouteProtocol: deviceRouteProtocol,
		MTUIfacePattern:     c.String(KeyMTUIfacePattern, DefaultMTUIfacePattern),
	}
	if s, ok := c.Get(KeyIPIPTunnelAddr); ok {
		// Felix takes the address of a CIDR here too.
		p, err := felix.ParseCIDR(s)
		if err != nil || !p.Addr().Is4() {
			c.Fail(KeyIPIPTunnelAddr, s, "not an IPv4 address")
		} else {
			cfg.IPIPTunnelAddr = p.Addr()
		}
	}
	if _, ok := c.Get(KeyIPIPEnabled); ok {
		if c.Bool(KeyIPIPEnabled, false) {
			cfg.IPIPEnabled = "true"
		} else {
			cfg.IPIPEnabled = "false"
		}
	}
	cfg.ProgramClusterRoutes = oneOfFold(c, KeyProgramClusterRoutes, DefaultProgramClusterRoutes,
		ClusterRoutesEnabled, ClusterRoutesDisabled, ClusterRoutesIPIPOnly, ClusterRoutesNoEncapOnly)
	cfg.RouteSource = oneOfFold(c, KeyRouteSource, RouteSourceCalicoIPAM, RouteSourceCalicoIPAM, RouteSourceWorkloadIPs)
	if _, err := regexp.Compile(cfg.MTUIfacePattern); err != nil {
		c.Fail(KeyMTUIfacePattern, cfg.MTUIfacePattern, "not a regular expression: "+err.Error())
		cfg.MTUIfacePattern = DefaultMTUIfacePattern
	}
	return cfg
}

// oneOfFold returns key's value spelled as in allowed (matched
// case-insensitively), or def.
func oneOfFold(c *felix.Config, key, def string, allowed ...string) string {
	v, ok := c.Get(key)
	if !ok {
		return def
	}
	for _, a := range allowed {
		if strings.EqualFold(v, a) {
			return a
		}
	}
	c.Fail(key, v, "want one of "+strings.Join(allowed, ", "))
	return def
}

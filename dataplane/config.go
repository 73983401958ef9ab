package dataplane

import (
	"cmp"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/nftep/nftep/endpoints"
	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/overlay"
	"github.com/nftep/nftep/render"
)

// Felix configuration keys the dataplane itself honours (matched
// case-insensitively); the keys that shape rules are render's
// (render.ParseConfig), Ipv6Support among them: it shapes rules and also
// decides IPv6 routes and sysctls (Endpoints.IPv6 is a copy of
// Render.IPv6). Defaults are Felix's (felix/config/config_params.go).
const (
	KeyFloatingIPs             = "FloatingIPs"
	KeyDeviceRouteProtocol     = "DeviceRouteProtocol"
	KeyRemoveExternalRoutes    = "RemoveExternalRoutes"
	KeyRouteRefreshInterval    = "RouteRefreshInterval"
	KeyNftablesRefreshInterval = "NftablesRefreshInterval"
)

// Defaults of the keys above.
const (
	DefaultRouteRefreshInterval    = 90 * time.Second
	DefaultNftablesRefreshInterval = 180 * time.Second
	DefaultDeviceRouteProtocol     = 3 // RTPROT_BOOT
)

// Config is a node's configuration, parsed from Felix's key/value map (the
// state file's `config:` or the driver's ConfigUpdate). Two Configs that are
// Equal program the same thing; a change needs a new engine (Felix restarts
// for one).
type Config struct {
	// Render shapes the rules (and names the tables).
	Render render.Config
	// Endpoints holds the endpoint manager's own settings.
	Endpoints endpoints.Config
	// RouteProtocol marks nftep's routes (DeviceRouteProtocol).
	RouteProtocol netlink.RouteProtocol
	// RemoveExternalRoutes removes unknown routes on workload interfaces.
	RemoveExternalRoutes bool
	// RouteRefresh is the period of full route resyncs; 0 disables them.
	RouteRefresh time.Duration
	// NftablesRefresh is the period of full nftables resyncs; 0 disables
	// them.
	NftablesRefresh time.Duration
	// RemoveCalicoLeftovers removes what Calico's own dataplane left
	// (KeyRemoveCalicoLeftovers, default true).
	RemoveCalicoLeftovers bool

	// Overlay holds cluster networking's settings (tunnel devices and
	// cluster routes: package overlay).
	Overlay overlay.Config
}

// Equal reports whether c and o program the same thing.
func (c Config) Equal(o Config) bool { return reflect.DeepEqual(c, o) }

// sysctlVerifyPeriod is how often a slice of the interface sysctls is read
// back (loop.verifySysctls): with each nftables refresh, whose wakeup it
// shares (sysctlsOnRefresh), or every RouteRefresh when that refresh is
// off; 0: never.
func (c Config) sysctlVerifyPeriod() time.Duration {
	return cmp.Or(c.NftablesRefresh, c.RouteRefresh)
}

// sysctlsOnRefresh reports whether the nftables refresh's ticker does the
// sysctl read-backs (rather than the route timer).
func (c Config) sysctlsOnRefresh() bool { return c.NftablesRefresh > 0 }

// ParseConfig reads kv, applying Felix's defaults to absent keys. A non-empty
// table overrides the table name (`nftep --table`). Errors name the key and
// are joined, so one message lists every bad setting.
func ParseConfig(kv map[string]string, table string) (Config, error) {
	if table != "" {
		kv = maps.Clone(kv)
		if kv == nil {
			kv = map[string]string{}
		}
		for k := range kv {
			if strings.EqualFold(k, render.KeyTableName) {
				delete(kv, k)
			}
		}
		kv[render.KeyTableName] = table
	}
	// One reading of the settings: render's keys and the dataplane's come
	// from the same felix.Config, which collects every error.
	c := felix.NewConfig(kv)
	rc := render.ParseFelixConfig(c)
	get := func(key string) string { return c.String(key, "") }
	boolKey := c.Bool
	interval := c.Seconds

	cfg := Config{
		Render:               rc,
		Endpoints:            endpoints.DefaultConfig(),
		RouteProtocol:        DefaultDeviceRouteProtocol,
		RemoveExternalRoutes: boolKey(KeyRemoveExternalRoutes, true),
		RouteRefresh:         interval(KeyRouteRefreshInterval, DefaultRouteRefreshInterval),
		NftablesRefresh:      interval(KeyNftablesRefreshInterval, DefaultNftablesRefreshInterval),

		RemoveCalicoLeftovers: boolKey(KeyRemoveCalicoLeftovers, true),
	}
	// One setting, parsed once: rules (render) and routes and sysctls
	// (the endpoint manager, the route table) agree on it.
	cfg.Endpoints.IPv6 = rc.IPv6
	switch s := get(KeyFloatingIPs); strings.ToLower(s) {
	case "", "disabled":
	case "enabled":
		cfg.Endpoints.FloatingIPs = true
	default:
		c.Fail(KeyFloatingIPs, s, "want Enabled or Disabled")
	}
	if s := get(KeyDeviceRouteProtocol); s != "" {
		p, err := strconv.ParseUint(s, 10, 8)
		if err != nil || p == 0 {
			c.Fail(KeyDeviceRouteProtocol, s, "not a route protocol number (1-255)")
		} else {
			cfg.RouteProtocol = netlink.RouteProtocol(p)
		}
	}
	// Cluster networking (VXLAN, IPIP, cluster routes): its keys are
	// overlay's, read from the same felix.Config.
	cfg.Overlay = overlay.ParseFelixConfig(c, cfg.RouteProtocol, rc.IPv6, int(rc.VXLANPort))
	return cfg, c.Err()
}

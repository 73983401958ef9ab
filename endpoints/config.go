package endpoints

import (
	"log/slog"
	"strings"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/render"
)

// Config holds the Felix settings the manager itself honours (defaults from
// Felix's felix/config/config_params.go); settings that only change rule
// content are in Deps.Render. Start from DefaultConfig: the zero value is not
// Felix's default.
type Config struct {
	// IPv6 programs IPv6 routes too (Felix Ipv6Support). Off, workloads'
	// ipv6_nets and ipv6_nat are not read at all, as by Felix's IPv4
	// endpoint manager (felix/dataplane/linux/endpoint_mgr.go). Expected
	// IPv6 addresses still select host endpoint interfaces, as in Felix,
	// whose IPv4 manager matches both families. Keep it equal to
	// Deps.Render.IPv6, which decides the IPv6 rules (the dataplane sets
	// both from one setting).
	IPv6 bool
	// FloatingIPs gives NAT external IPs of workloads a route too (Felix
	// FloatingIPs=Enabled). Workloads of orchestrator "openstack" get them
	// regardless.
	FloatingIPs bool
	// RoutePriority is the metric of workload routes (Felix's normal route
	// priority). Zero means 1024.
	RoutePriority int
}

// DefaultConfig returns Felix's defaults.
func DefaultConfig() Config {
	return Config{IPv6: true, RoutePriority: 1024}
}

func (c *Config) routePriority() int {
	if c.RoutePriority == 0 {
		return 1024
	}
	return c.RoutePriority
}

// Deps are the manager's collaborators.
type Deps struct {
	// Render configures rule content; its InterfacePrefixes also name the
	// workload interfaces for the manager. Use render.ParseConfig or
	// render.DefaultConfig.
	Render render.Config
	// Table is the desired state of nftep's inet table. Required.
	Table *nft.Model
	// ARP is the desired state of the ARP-family table used for ARP reply
	// suppression (proxy-ARP replies claiming a workload's own address are
	// dropped), or nil when that is disabled (which also turns
	// Render.ARPSuppression off).
	ARP *nft.Model
	// Routes is the route table of both families; nil skips routes.
	Routes Routes
	// Sysctls configures workload interfaces; nil skips that.
	Sysctls Sysctls
	// Policies is told which policy and profile chains the endpoint and
	// policy-group chains jump to (policy.Manager implements it), so that
	// exactly those are written; nil for none.
	Policies Policies
	// Callbacks observe the manager's decisions; nil means none.
	Callbacks Callbacks
	// Status receives endpoint status reports; nil discards them.
	Status StatusSink
	// Logger logs; nil discards.
	Logger *slog.Logger
}

// isWorkloadIface reports whether name starts with a workload prefix. Felix
// built an unescaped regexp from the prefixes (quirk 13.9 in
// docs/felix-differences.md); a plain prefix test means a prefix like "tap."
// matches literally.
func isWorkloadIface(prefixes []string, name string) bool {
	for _, p := range prefixes {
		if p != "" && strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

package felix

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/nftep/nftep/proto"
)

// Pool is an IPAMPoolUpdate parsed (cluster-networking spec §1.1, §3).
type Pool struct {
	// ID is Felix's pool id, the CIDR with '/' replaced by '-'.
	ID string
	// CIDR is the pool's network.
	CIDR netip.Prefix
	// Masquerade is the pool's natOutgoing.
	Masquerade bool
	// LoadBalancerOnly is allowed_uses == ["LoadBalancer"] exactly: such a
	// pool is not a pod network, so natOutgoing traffic to it is
	// masqueraded.
	LoadBalancerOnly bool
	// IPIPMode and VXLANMode are the v1 model strings, lower case: "" (never),
	// "always" or "cross-subnet".
	IPIPMode, VXLANMode string
}

// The encapsulation modes of a pool as Felix sends them (IPPoolV3ToV1); the
// API spellings are accepted too.
var poolModes = map[string]string{
	"": "", "never": "", "always": "always", "cross-subnet": "cross-subnet", "crosssubnet": "cross-subnet",
}

// The allowed uses of a pool.
var poolUses = map[string]bool{"Workload": true, "Tunnel": true, "LoadBalancer": true}

// ParsePool checks and parses an IPAMPoolUpdate. Errors name the pool and
// the field: a CIDR that does not parse or has host bits set, an id of the
// other family than the CIDR, an unknown encapsulation mode or use.
func ParsePool(m *proto.IPAMPoolUpdate) (Pool, error) {
	p := Pool{ID: m.GetId()}
	fail := func(field, format string, args ...any) (Pool, error) {
		return Pool{}, &PoolError{ID: p.ID, Field: field, Err: fmt.Errorf(format, args...)}
	}
	if p.ID == "" {
		return fail("id", "missing")
	}
	pool := m.GetPool()
	if pool == nil {
		return fail("pool", "missing")
	}
	cidr, err := netip.ParsePrefix(pool.GetCidr())
	if err != nil {
		return fail("pool.cidr", "%q is not a CIDR", pool.GetCidr())
	}
	if cidr.Addr().Zone() != "" || cidr.Addr().Is4In6() {
		return fail("pool.cidr", "%q is not a plain IPv4 or IPv6 network", pool.GetCidr())
	}
	if cidr != cidr.Masked() {
		return fail("pool.cidr", "%q has host bits set (the network is %s)", pool.GetCidr(), cidr.Masked())
	}
	p.CIDR = cidr
	// Felix's id is the CIDR with '/' as '-': a different family there
	// means the message is not what it says.
	if i := strings.LastIndexAny(p.ID, "-/"); i > 0 {
		if a, err := ParseAddr(p.ID[:i]); err == nil && FamilyOf(a) != FamilyOf(cidr.Addr()) {
			return fail("pool.cidr", "%s is %s but the pool id names an %s network", cidr, FamilyOf(cidr.Addr()), FamilyOf(a))
		}
	}
	p.Masquerade = pool.GetMasquerade()
	for _, f := range []struct {
		name, val string
		dst       *string
	}{{"pool.ipipMode", pool.GetIpipMode(), &p.IPIPMode}, {"pool.vxlanMode", pool.GetVxlanMode(), &p.VXLANMode}} {
		mode, ok := poolModes[strings.ToLower(f.val)]
		if !ok {
			return fail(f.name, "unknown encapsulation mode %q (want \"\", \"always\" or \"cross-subnet\")", f.val)
		}
		*f.dst = mode
	}
	uses := pool.GetAllowedUses()
	for i, u := range uses {
		if !poolUses[u] {
			return fail(fmt.Sprintf("pool.allowedUses[%d]", i), "unknown use %q (want Workload, Tunnel or LoadBalancer)", u)
		}
	}
	p.LoadBalancerOnly = len(uses) == 1 && uses[0] == "LoadBalancer"
	return p, nil
}

// PoolError is what is wrong with an IPAMPoolUpdate: the pool, the field
// and the problem.
type PoolError struct {
	ID, Field string
	Err       error
}

func (e *PoolError) Error() string {
	return fmt.Sprintf("IP pool %q: %s: %v", e.ID, e.Field, e.Err)
}

func (e *PoolError) Unwrap() error { return e.Err }

// Family returns the pool's family.
func (p Pool) Family() Family { return FamilyOf(p.CIDR.Addr()) }

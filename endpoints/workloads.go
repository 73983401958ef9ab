package endpoints

import (
	"net/netip"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

// parseWorkload checks everything the manager and the renderer rely on
// (felix.ParseWorkload), so that a bad endpoint is rejected as a whole, with
// a reason, before anything is written. Felix panicked on an unparsable net
// (felix/dataplane/linux/endpoint_mgr.go). Without ipv6, ipv6Nets and
// ipv6Nat are not read at all.
func parseWorkload(ep *proto.WorkloadEndpoint, ipv6 bool) (*felix.Workload, error) {
	w, err := felix.ParseWorkload(ep, ipv6)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// resolveWorkloadEndpoints processes the pending workload updates and then
// configures the sysctls of the interfaces that need it (Felix's
// resolveWorkloadEndpoints and configureInterface).
//
// Pending updates are processed in ascending ID order, pass after pass,
// because a removal or rename can queue the promotion of a shadowed endpoint.
// The order makes the outcome independent of map iteration, and lets
// the lowest ID claim a contested interface name first.
func (m *Manager) resolveWorkloadEndpoints() {
	if m.rcfg.SharedEndpointChains && len(m.pendingWl) > 1 {
		// One batch: the selectors do not change until it is done.
		m.bodies = render.NewBodyCache()
		defer func() { m.bodies = nil }()
	}
	for len(m.pendingWl) > 0 {
		for _, id := range sortedWlIDs(m.pendingWl) {
			ep, ok := m.pendingWl[id]
			if !ok {
				continue
			}
			delete(m.pendingWl, id)
			if ep == nil {
				m.removeWorkload(id)
			} else {
				m.updateWorkload(id, ep)
			}
		}
	}
	m.configureInterfaces()
}

// updateWorkload activates or updates id, resolving interface-name shadowing
// first.
func (m *Manager) updateWorkload(id wlID, ep *proto.WorkloadEndpoint) {
	m.markWlStatus(id)
	// Any update supersedes a shadowed copy: Felix kept it and could later
	// promote stale data (quirk 13.3 in docs/felix-differences.md).
	m.dropShadow(id)
	delete(m.invalid, id)
	m.unlist(id)

	parsed, err := parseWorkload(ep, m.cfg.IPv6)
	if err != nil {
		m.rejectWorkload(id, ep, err)
		return
	}
	name := ep.GetName()
	owner, owned := m.ifaceToWl[name]
	if owned && owner != id && compareWlIDs(owner, id) < 0 {
		// A lower ID owns the name: id waits in the shadows. If it was
		// active under another name it has left that name, so deactivate
		// it (Felix left it programmed there).
		m.deactivateWorkload(id, true)
		m.addShadow(id, ep)
		m.log.Info("workload endpoint shadowed: its interface belongs to an endpoint with a lower ID",
			"endpoint", id, "iface", name, "owner", owner)
		return
	}

	if owned && owner != id {
		// id sorts first: the owner is displaced. Tear it down completely
		// before id is set up on the same name, and report it (Felix did
		// not: quirk 13.4 in docs/felix-differences.md).
		m.log.Info("workload endpoint displaced by an endpoint with a lower ID",
			"endpoint", owner, "iface", name, "winner", id)
		displaced := m.active[owner].ep
		m.deactivateWorkload(owner, false)
		m.addShadow(owner, displaced)
		m.markWlStatus(owner)
	}

	adminUp := ep.GetState() == "active"
	objs := objectsOf(m.r.workload(render.WorkloadInput{
		ID: id.proto(), Endpoint: ep, Parsed: parsed, Selectors: m.selectors, Mark: m.endpointMark(name),
		Bodies: m.bodies,
	}))
	old := m.active[id]
	var oldObjs *objects
	var oldEp *proto.WorkloadEndpoint
	if old != nil {
		oldObjs, oldEp = old.objs, old.ep
	}
	m.tables.replace(oldObjs, objs)
	if old != nil && old.ep.GetName() != name {
		// Rename: the old name's chains, map and spoof elements and ARP
		// chain went with oldObjs above; routes and sysctl state follow.
		m.releaseIface(old.ep.GetName())
		m.promoteShadowed(old.ep.GetName())
	}

	m.active[id] = &workload{ep: ep, parsed: parsed, adminUp: adminUp, objs: objs}
	m.list(id)
	m.ifaceToWl[name] = id
	m.setWorkloadRoutes(id, name, parsed, adminUp)
	if m.deps.Sysctls != nil {
		// Admin-down endpoints are configured too (as in Felix): the state
		// changes the chains and routes, not the interface.
		m.deps.Sysctls.SetInterface(name, hasV4SpoofExemption(parsed))
	}
	m.cb.UpdateWorkload(oldEp, ep)
}

// removeWorkload handles a removal of id.
func (m *Manager) removeWorkload(id wlID) {
	m.markWlStatus(id)
	m.dropShadow(id)
	delete(m.invalid, id)
	m.deactivateWorkload(id, true)
	m.unlist(id)
}

// rejectWorkload takes id out of service because ep cannot be programmed.
// Its interface drops out of the dispatch maps, so its traffic hits the
// unknown-interface drop: a bad update fails closed.
func (m *Manager) rejectWorkload(id wlID, ep *proto.WorkloadEndpoint, err error) {
	m.log.Error("workload endpoint rejected", "endpoint", id, "iface", ep.GetName(), "err", err)
	m.deactivateWorkload(id, true)
	m.invalid[id] = invalidEndpoint{ep: ep, reason: err.Error()}
	m.list(id)
}

// deactivateWorkload tears down whatever is active for id (Felix's
// removeActiveWorkload). When promote is set, the best shadowed endpoint on
// the freed name is queued.
func (m *Manager) deactivateWorkload(id wlID, promote bool) {
	w := m.active[id]
	if w == nil {
		return
	}
	m.cb.RemoveWorkload(w.ep)
	m.tables.replace(w.objs, nil)
	name := w.ep.GetName()
	m.releaseIface(name)
	delete(m.active, id)
	m.unlist(id)
	if promote {
		m.promoteShadowed(name)
	}
}

// releaseIface forgets what the manager holds for a workload interface name
// that its endpoint has left.
func (m *Manager) releaseIface(name string) {
	if m.deps.Routes != nil {
		m.deps.Routes.SetRoutes(name, nil)
	}
	if m.deps.Sysctls != nil {
		m.deps.Sysctls.RemoveInterface(name)
	}
	delete(m.sysctlsFailed, name)
	delete(m.ifaceToWl, name)
	m.releaseMark(name)
}

func (m *Manager) addShadow(id wlID, ep *proto.WorkloadEndpoint) {
	m.shadowed[id] = ep
	m.list(id)
	name := ep.GetName()
	if m.shadowedNames[name] == nil {
		m.shadowedNames[name] = map[wlID]bool{}
	}
	m.shadowedNames[name][id] = true
}

func (m *Manager) dropShadow(id wlID) {
	ep, ok := m.shadowed[id]
	if !ok {
		return
	}
	delete(m.shadowed, id)
	m.unlist(id)
	name := ep.GetName()
	delete(m.shadowedNames[name], id)
	if len(m.shadowedNames[name]) == 0 {
		delete(m.shadowedNames, name)
	}
}

// promoteShadowed queues the lowest shadowed endpoint on the freed name.
// Felix promoted only on removal; a rename or a rejection frees the name
// too, and without promotion the shadowed endpoint would wait forever.
// An endpoint that has its own pending update is skipped: that newer update
// decides where it goes, and the next one in line is promoted instead.
func (m *Manager) promoteShadowed(name string) {
	for _, id := range sortedWlIDs(m.shadowedNames[name]) {
		if _, pending := m.pendingWl[id]; pending {
			continue
		}
		m.pendingWl[id] = m.shadowed[id]
		m.dropShadow(id)
		m.log.Info("shadowed workload endpoint promoted", "endpoint", id, "iface", name)
		return
	}
}

// setWorkloadRoutes asks for the endpoint's routes of both families (IPv6
// only when enabled), or none when it is admin down (as Felix removes the
// routes of an endpoint whose state is not "active").
func (m *Manager) setWorkloadRoutes(id wlID, name string, p *felix.Workload, adminUp bool) {
	if m.deps.Routes == nil {
		return
	}
	var targets []RouteTarget
	if adminUp {
		targets = m.routeTargets(felix.IPv4, id, p)
		if m.cfg.IPv6 {
			targets = append(targets, m.routeTargets(felix.IPv6, id, p)...)
		}
	}
	m.deps.Routes.SetRoutes(name, targets)
}

// routeTargets computes one family's routes, as Felix's endpoint manager
// does: one per net,
// masked (10.0.240.2/24 routes 10.0.240.0/24), plus a host route per NAT
// external IP when floating IPs are on or the orchestrator is OpenStack;
// all with the endpoint's MAC, so the route table adds a permanent
// neighbour entry (IPv4 only; it ignores the MAC for IPv6).
func (m *Manager) routeTargets(fam felix.Family, id wlID, p *felix.Workload) []RouteTarget {
	prio := m.cfg.routePriority()
	var targets []RouteTarget
	seen := map[netip.Prefix]bool{}
	add := func(pfx netip.Prefix) {
		if seen[pfx] {
			return
		}
		seen[pfx] = true
		targets = append(targets, RouteTarget{CIDR: pfx, DestMAC: p.MAC, Priority: prio})
	}
	for _, n := range p.Nets[fam] {
		add(n.Masked())
	}
	if m.cfg.FloatingIPs || id.orchestrator == "openstack" {
		for _, a := range p.NAT[fam] {
			add(netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return targets
}

// invalidEndpoint is a workload endpoint the manager refused to program.
type invalidEndpoint struct {
	ep     *proto.WorkloadEndpoint
	reason string
}

package endpoints

import (
	"log/slog"
	"net/netip"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

// Manager is the endpoint manager. It is not safe for concurrent use: the
// dataplane drives it from one goroutine, in the order OnUpdate* →
// ResolveUpdateBatch → CompleteDeferredWork.
type Manager struct {
	cfg    Config
	rcfg   render.Config
	deps   Deps
	cb     Callbacks
	log    *slog.Logger
	r      renderer
	tables *tables
	marks  *render.MarkMapper // nil unless rcfg.EndpointMarks
	// bodies shares rendered shared endpoint chains between the
	// workloads of one resolveWorkloadEndpoints (nil otherwise).
	bodies *render.BodyCache

	// started is false until the first CompleteDeferredWork has written the
	// static objects (base chains, dispatch maps and their defaults).
	started bool

	// Inputs recorded by OnUpdate.
	pendingWl       map[wlID]*proto.WorkloadEndpoint // nil value: removal
	pendingIfaces   map[string]IfaceState
	hostIfaceAddrs  map[string]map[netip.Addr]bool
	rawHostEps      map[string]*proto.HostEndpoint
	hostEpsDirty    bool
	policySelectors map[policyKey]string
	dirtyPolicies   map[policyKey]bool

	// upIfaces holds the interfaces that are operationally up.
	upIfaces map[string]bool

	// Workload endpoints.
	active        map[wlID]*workload
	ifaceToWl     map[string]wlID
	shadowed      map[wlID]*proto.WorkloadEndpoint
	shadowedNames map[string]map[wlID]bool // interface name → shadowed IDs
	invalid       map[wlID]invalidEndpoint // rejected endpoints
	// listed are the IDs Statuses lists (in active, shadowed or invalid),
	// sorted, with their strings: built at the first Statuses, then kept
	// in step by list and unlist, so that a status file of 10,000
	// endpoints does not sort them again for each change.
	listed      []listedID
	listedBuilt bool
	// sysctlsFailed holds the interfaces whose last sysctl attempt failed, so
	// that a later success re-reports the status (quirk 13.5 in
	// docs/felix-differences.md).
	sysctlsFailed map[string]bool

	// Host endpoints.
	resolvedIfaceToHostEp map[string]string // result of the last resolution
	resolvedThisBatch     bool
	activeIfaceToHostEp   map[string]string // what is programmed
	hostEpIfaces          map[string][]string
	// resolvedUnnamable and hostEpUnnamable hold, per host endpoint ID,
	// the interfaces it won that nftables cannot name, so it has no
	// chains there: as of the last resolution, and as programmed.
	resolvedUnnamable map[string][]string
	hostEpUnnamable   map[string][]string
	hostIfaceObjs     map[string]*objects

	// Status reporting.
	dirtyWlStatus   map[wlID]bool
	dirtyHostStatus map[string]bool
	reportedWl      map[wlID]reportedStatus
	reportedHost    map[string]string
}

// workload is an active workload endpoint.
type workload struct {
	ep      *proto.WorkloadEndpoint
	parsed  *felix.Workload
	adminUp bool
	objs    *objects
}

// New returns a manager writing into deps.Table (and deps.ARP). Nothing is
// written until the first CompleteDeferredWork, which programs the static
// chains and empty dispatch maps even when there are no endpoints (as Felix's
// first CompleteDeferredWork does), so that unknown workload interfaces are
// dropped from the start.
func New(cfg Config, deps Deps) *Manager {
	if deps.Callbacks == nil {
		deps.Callbacks = NoopCallbacks{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	rcfg := deps.Render
	if deps.ARP == nil {
		rcfg.ARPSuppression = false
	}
	m := &Manager{
		cfg:                   cfg,
		rcfg:                  rcfg,
		deps:                  deps,
		cb:                    deps.Callbacks,
		log:                   deps.Logger,
		r:                     pureRenderer{rcfg},
		tables:                newTables(deps.Table, deps.ARP, deps.Policies),
		pendingWl:             map[wlID]*proto.WorkloadEndpoint{},
		pendingIfaces:         map[string]IfaceState{},
		hostIfaceAddrs:        map[string]map[netip.Addr]bool{},
		rawHostEps:            map[string]*proto.HostEndpoint{},
		hostEpsDirty:          true,
		policySelectors:       map[policyKey]string{},
		dirtyPolicies:         map[policyKey]bool{},
		upIfaces:              map[string]bool{},
		active:                map[wlID]*workload{},
		ifaceToWl:             map[string]wlID{},
		shadowed:              map[wlID]*proto.WorkloadEndpoint{},
		shadowedNames:         map[string]map[wlID]bool{},
		invalid:               map[wlID]invalidEndpoint{},
		sysctlsFailed:         map[string]bool{},
		resolvedIfaceToHostEp: map[string]string{},
		activeIfaceToHostEp:   map[string]string{},
		hostEpIfaces:          map[string][]string{},
		resolvedUnnamable:     map[string][]string{},
		hostEpUnnamable:       map[string][]string{},
		hostIfaceObjs:         map[string]*objects{},
		dirtyWlStatus:         map[wlID]bool{},
		dirtyHostStatus:       map[string]bool{},
		reportedWl:            map[wlID]reportedStatus{},
		reportedHost:          map[string]string{},
	}
	if rcfg.EndpointMarks {
		m.marks = render.NewMarkMapper(rcfg.Marks.Endpoint, rcfg.Marks.NonCali)
	}
	return m
}

// OnUpdate records one message and renders nothing (as Felix's OnUpdate). It
// accepts the proto messages *WorkloadEndpointUpdate,
// *WorkloadEndpointRemove, *HostEndpointUpdate, *HostEndpointRemove,
// *ActivePolicyUpdate and *ActivePolicyRemove, and this package's
// InterfaceStateUpdate and InterfaceAddrsUpdate (by value or pointer).
// Anything else is ignored, so the dataplane can hand every message to every
// manager.
func (m *Manager) OnUpdate(msg any) {
	switch msg := msg.(type) {
	case *proto.WorkloadEndpointUpdate:
		if msg.GetId() == nil || msg.GetEndpoint() == nil {
			m.log.Warn("ignoring workload endpoint update without id or endpoint", "msg", msg)
			return
		}
		m.pendingWl[wlIDOf(msg.GetId())] = msg.GetEndpoint()
	case *proto.WorkloadEndpointRemove:
		if msg.GetId() == nil {
			return
		}
		m.pendingWl[wlIDOf(msg.GetId())] = nil
	case *proto.HostEndpointUpdate:
		if msg.GetId() == nil || msg.GetEndpoint() == nil {
			m.log.Warn("ignoring host endpoint update without id or endpoint", "msg", msg)
			return
		}
		id := msg.GetId().GetEndpointId()
		m.cb.UpdateHostEndpoint(msg.GetId())
		m.rawHostEps[id] = msg.GetEndpoint()
		m.hostEpsDirty = true
		m.dirtyHostStatus[id] = true
	case *proto.HostEndpointRemove:
		if msg.GetId() == nil {
			return
		}
		id := msg.GetId().GetEndpointId()
		m.cb.RemoveHostEndpoint(msg.GetId())
		delete(m.rawHostEps, id)
		m.hostEpsDirty = true
		m.dirtyHostStatus[id] = true
	case InterfaceStateUpdate:
		m.pendingIfaces[msg.Name] = msg.State
	case *InterfaceStateUpdate:
		m.pendingIfaces[msg.Name] = msg.State
	case InterfaceAddrsUpdate:
		m.onIfaceAddrs(msg)
	case *InterfaceAddrsUpdate:
		m.onIfaceAddrs(*msg)
	case *proto.ActivePolicyUpdate:
		if msg.GetId() == nil {
			return
		}
		key := policyKeyOf(msg.GetId())
		sel := msg.GetPolicy().GetOriginalSelector()
		old, known := m.policySelectors[key]
		m.policySelectors[key] = sel
		// A new policy is followed by the endpoint updates that use it (the
		// calculation graph promises that), so only a changed selector
		// needs the endpoints re-rendered: it regroups them.
		if known && old != sel {
			m.dirtyPolicies[key] = true
		}
	case *proto.ActivePolicyRemove:
		if msg.GetId() == nil {
			return
		}
		key := policyKeyOf(msg.GetId())
		delete(m.policySelectors, key)
		delete(m.dirtyPolicies, key)
	}
}

func (m *Manager) onIfaceAddrs(u InterfaceAddrsUpdate) {
	// Workload interfaces never host a host endpoint.
	if isWorkloadIface(m.rcfg.InterfacePrefixes, u.Name) {
		return
	}
	if u.Addrs == nil {
		delete(m.hostIfaceAddrs, u.Name)
	} else {
		if _, known := m.hostIfaceAddrs[u.Name]; !known {
			if err := nft.ValidateIfName(u.Name); err != nil {
				m.log.Warn("interface name cannot be written in nftables: no host endpoint can be programmed on it",
					"iface", u.Name, "err", err)
			}
		}
		set := make(map[netip.Addr]bool, len(u.Addrs))
		for _, a := range u.Addrs {
			set[a.Unmap()] = true
		}
		m.hostIfaceAddrs[u.Name] = set
	}
	m.hostEpsDirty = true
}

// ResolveUpdateBatch applies the recorded interface states and resolves host
// endpoints to interfaces (as Felix's ResolveUpdateBatch). It runs for every
// manager before any CompleteDeferredWork.
func (m *Manager) ResolveUpdateBatch() error {
	for _, name := range sortedKeys(m.pendingIfaces) {
		up := m.pendingIfaces[name] == IfaceUp
		if up {
			m.upIfaces[name] = true
		} else {
			delete(m.upIfaces, name)
		}
		// Sysctls are written only while an interface is up, and again each
		// time it comes up: a recreated interface has the kernel defaults.
		if m.deps.Sysctls != nil {
			m.configureUnowned(name, m.pendingIfaces[name])
			m.deps.Sysctls.OnIfaceStateChanged(name, up)
		}
		if id, ok := m.ifaceToWl[name]; ok {
			m.markWlStatus(id)
		} else if hep, ok := m.activeIfaceToHostEp[name]; ok {
			m.dirtyHostStatus[hep] = true
		}
	}
	clear(m.pendingIfaces)

	if m.hostEpsDirty {
		m.resolvedIfaceToHostEp = m.resolveHostEndpoints()
		m.resolvedThisBatch = true
	}
	return nil
}

// configureUnowned gives a workload-prefixed interface that no endpoint
// owns the workload interface settings as soon as it comes up, as Felix
// does (its ResolveUpdateBatch queues every workload interface that comes
// up for configureInterface, owned or not): accept_ra=0 above all, so that
// a pod cannot steer the host with router advertisements before its
// endpoint exists. rp_filter gets the default: spoofing allowances come
// with an endpoint, which then declares the interface itself. A gone
// interface is forgotten.
func (m *Manager) configureUnowned(name string, state IfaceState) {
	if !isWorkloadIface(m.rcfg.InterfacePrefixes, name) {
		return
	}
	if _, owned := m.ifaceToWl[name]; owned {
		return
	}
	switch state {
	case IfaceUp:
		m.deps.Sysctls.SetInterface(name, false)
	case IfaceGone:
		m.deps.Sysctls.RemoveInterface(name)
	}
}

// CompleteDeferredWork renders everything that changed since the last call
// into the desired-state tables, updates routes and sysctls, and reports the
// statuses that changed, in the order of Felix's CompleteDeferredWork:
// endpoints of changed policies, workloads, host endpoints, RPF skip,
// endpoint marks, statuses. A problem with one endpoint is logged and
// reported as that endpoint's status; it never stops the others, so the error
// is always nil today. It is kept for failures of the whole manager.
func (m *Manager) CompleteDeferredWork() error {
	if !m.started {
		m.writeStatic()
		m.started = true
	}
	m.markEndpointsWithDirtyPolicies()
	m.resolveWorkloadEndpoints()
	if m.hostEpsDirty {
		// Re-resolve when the dirtiness came from a policy change after
		// ResolveUpdateBatch: Felix reused a stale map that lacked the `*`
		// endpoint and so dropped its chains (quirk 13.6 in
		// docs/felix-differences.md).
		if !m.resolvedThisBatch {
			m.resolvedIfaceToHostEp = m.resolveHostEndpoints()
		}
		m.updateHostEndpoints()
		m.hostEpsDirty = false
	}
	m.resolvedThisBatch = false
	m.reportStatuses()
	return nil
}

// markEndpointsWithDirtyPolicies re-queues the endpoints that use a policy
// whose selector changed, because the selector decides the policy groups
// their chains jump to (Felix's markEPsWithDirtyPolicies).
func (m *Manager) markEndpointsWithDirtyPolicies() {
	if len(m.dirtyPolicies) == 0 {
		return
	}
	for id, w := range m.active {
		if _, pending := m.pendingWl[id]; pending {
			continue
		}
		if tiersUse(w.ep.GetTiers(), m.dirtyPolicies) {
			m.pendingWl[id] = w.ep
		}
	}
	if !m.hostEpsDirty {
		for _, hep := range m.rawHostEps {
			if tiersUse(hep.GetTiers(), m.dirtyPolicies) ||
				tiersUse(hep.GetPreDnatTiers(), m.dirtyPolicies) ||
				tiersUse(hep.GetUntrackedTiers(), m.dirtyPolicies) ||
				tiersUse(hep.GetForwardTiers(), m.dirtyPolicies) {
				m.hostEpsDirty = true
				break
			}
		}
	}
	clear(m.dirtyPolicies)
}

func tiersUse(tiers []*proto.TierInfo, policies map[policyKey]bool) bool {
	for _, t := range tiers {
		for _, p := range t.GetIngressPolicies() {
			if policies[policyKeyOf(p)] {
				return true
			}
		}
		for _, p := range t.GetEgressPolicies() {
			if policies[policyKeyOf(p)] {
				return true
			}
		}
	}
	return false
}

package overlay

import (
	"log/slog"
	"maps"
	"net/netip"
	"slices"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/routes"
)

// Routes is where the manager puts the cluster routes it wants, per
// interface (routes.Table; routes.BlackholeIface for blackholes).
type Routes interface {
	SetRoutes(iface string, targets []routes.Target)
}

// DeviceTable is where the manager puts the devices, neighbours and FDB
// entries it wants (*Devices).
type DeviceTable interface {
	SetDesired(State)
	// HostMTU is the host MTU (the smallest MTU of the up interfaces that
	// match MTUIfacePattern), as last read from the kernel.
	HostMTU() int
	// Check asks the next Apply to read the device back (an address or
	// state change the interface monitor saw).
	Check(name string)
}

// Route classes: of two targets for one destination, the lowest class
// wins (Felix's routetable classes; workload routes are class 0).
const (
	classVXLANSameSubnet = 3 + iota
	classVXLANTunnel
	classIPIPSameSubnet
	classIPIPTunnel
	classNoEncap
	classBlackholeVXLAN
	classBlackholeIPIP
	classBlackholeNoEncap
)

// Manager is the overlay manager: Felix's VXLAN, IPIP and no-encap managers
// in one (felix/dataplane/linux/{vxlan,ipip,noencap,route}_mgr.go). OnUpdate
// only records; CompleteDeferredWork computes the cluster routes (into
// Routes) and the devices, neighbours and FDB entries (into DeviceTable)
// from the whole batch, so a route that arrives before the host address
// its next hop needs is programmed once the address is known. It never
// talks to the kernel. Not safe for concurrent use.
type Manager struct {
	cfg     Config
	routes  Routes
	devices DeviceTable
	log     *slog.Logger

	// encap is the first Encapsulation message: it decides the mode for
	// the life of the process (Felix restarts for another).
	encap *proto.Encapsulation

	clusterRoutes map[netip.Prefix]felix.Route
	vteps         map[string]felix.VTEP
	hosts         map[string][2]netip.Prefix
	// ifaceAddrs holds each interface's addresses, for finding the parent
	// interfaces.
	ifaceAddrs map[string][]netip.Addr

	dirty bool
	// set lists the interfaces the last computation set routes on.
	set map[string]bool
	// last is the last State computed, targets the last routes.
	last    State
	targets map[string][]routes.Target
	// warned holds the problems already logged.
	warned map[string]bool
}

// Deps are the manager's outputs; a nil one is not written.
type Deps struct {
	Routes  Routes
	Devices DeviceTable
	Logger  *slog.Logger
}

// NewManager returns a manager for cfg.
func NewManager(cfg Config, deps Deps) *Manager {
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{
		cfg:           cfg,
		routes:        deps.Routes,
		devices:       deps.Devices,
		log:           log,
		clusterRoutes: map[netip.Prefix]felix.Route{},
		vteps:         map[string]felix.VTEP{},
		hosts:         map[string][2]netip.Prefix{},
		ifaceAddrs:    map[string][]netip.Addr{},
		set:           map[string]bool{},
		warned:        map[string]bool{},
	}
}

// OnUpdate records one message: RouteUpdate, RouteRemove,
// VXLANTunnelEndpointUpdate/Remove, HostMetadataUpdate/Remove,
// Encapsulation, and the interface monitor's updates.
func (m *Manager) OnUpdate(msg any) {
	switch msg := msg.(type) {
	case HostMTUChange:
		// The MTUs that follow the host's are computed again.
		m.dirty = true
	case *proto.RouteUpdate:
		r, err := felix.ParseRoute(msg)
		if err != nil {
			m.log.Warn("ignoring a RouteUpdate nftep cannot read", "dst", msg.GetDst(), "error", err)
			return
		}
		// An update replaces what was said of its dst (by its text: a
		// dst with host bits names another entry than its network).
		m.clusterRoutes[r.Dst] = r
	case *proto.RouteRemove:
		if p, err := felix.ParseNet(msg.GetDst()); err == nil {
			delete(m.clusterRoutes, p)
		}
	case *proto.VXLANTunnelEndpointUpdate:
		v, err := felix.ParseVTEP(msg)
		if err != nil {
			m.log.Warn("ignoring a VXLAN tunnel endpoint nftep cannot read", "node", msg.GetNode(), "error", err)
			return
		}
		m.vteps[v.Node] = v
	case *proto.VXLANTunnelEndpointRemove:
		delete(m.vteps, msg.GetNode())
	case *proto.HostMetadataUpdate:
		addrs, err := felix.HostAddrs(msg)
		if err != nil {
			m.log.Warn("ignoring host metadata nftep cannot read", "host", msg.GetHostname(), "error", err)
			return
		}
		m.hosts[msg.GetHostname()] = addrs
	case *proto.HostMetadataRemove:
		delete(m.hosts, msg.GetHostname())
	case *proto.Encapsulation:
		if m.encap == nil {
			m.encap = msg
		} else if !sameEncap(m.encap, msg) {
			// Felix restarts itself (and us) instead of sending this.
			m.log.Warn("the encapsulation changed; it takes effect when nftep restarts (Felix restarts it)",
				"running", m.encap.String(), "new", msg.String())
		}
	case routes.InterfaceAddrsUpdate:
		m.onAddrs(msg.Name, msg.Addrs)
		return
	case *routes.InterfaceAddrsUpdate:
		m.onAddrs(msg.Name, msg.Addrs)
		return
	case routes.InterfaceStateUpdate:
		m.onState(msg)
		return
	case *routes.InterfaceStateUpdate:
		m.onState(*msg)
		return
	default:
		return
	}
	m.dirty = true
}

func sameEncap(a, b *proto.Encapsulation) bool {
	return a.GetIpipEnabled() == b.GetIpipEnabled() && a.GetVxlanEnabled() == b.GetVxlanEnabled() &&
		a.GetVxlanEnabledV6() == b.GetVxlanEnabledV6() && a.GetNoEncapEnabled() == b.GetNoEncapEnabled()
}

func (m *Manager) onAddrs(name string, addrs []netip.Addr) {
	if slices.Contains(DeviceNames, name) {
		if m.devices != nil {
			m.devices.Check(name)
		}
		m.dirty = true
	}
	if addrs == nil {
		if _, ok := m.ifaceAddrs[name]; ok {
			delete(m.ifaceAddrs, name)
			m.dirty = true
		}
		return
	}
	if !slices.Equal(m.ifaceAddrs[name], addrs) {
		m.ifaceAddrs[name] = slices.Clone(addrs)
		m.dirty = true
	}
}

func (m *Manager) onState(u routes.InterfaceStateUpdate) {
	if slices.Contains(DeviceNames, u.Name) && m.devices != nil {
		m.devices.Check(u.Name)
		m.dirty = true
	}
}

// ResolveUpdateBatch is part of dataplane.Manager; it has nothing to do.
func (m *Manager) ResolveUpdateBatch() error { return nil }

// HostMTUChange tells the manager that the host MTU changed (Devices saw it
// at a resync): tunnel MTUs left at 0 in the configuration, the MTU of
// their routes and the pod MTU follow it.
type HostMTUChange struct{}

// CompleteDeferredWork computes the routes and devices from everything
// recorded, and hands them on if anything changed.
func (m *Manager) CompleteDeferredWork() error {
	if !m.dirty {
		return nil
	}
	m.dirty = false
	if m.encap == nil {
		// Nothing is known of the mode: touch nothing (a state file
		// without an Encapsulation message leaves the node's tunnels alone).
		return nil
	}
	st, targets := m.compute()
	m.last, m.targets = st, targets
	if m.devices != nil {
		m.devices.SetDesired(st)
	}
	if m.routes != nil {
		for _, name := range slices.Sorted(maps.Keys(targets)) {
			m.routes.SetRoutes(name, targets[name])
		}
		for name := range m.set {
			if _, ok := targets[name]; !ok {
				m.routes.SetRoutes(name, nil)
			}
		}
	}
	m.set = map[string]bool{}
	for name := range targets {
		m.set[name] = true
	}
	return nil
}

// State returns the last state computed (for status and tests).
func (m *Manager) State() State { return m.last }

// Encapsulation returns the mode in force, nil before the first message.
func (m *Manager) Encapsulation() *proto.Encapsulation { return m.encap }

// mtus returns the MTUs of VXLAN v4, VXLAN v6 and IPIP (§9).
func (m *Manager) mtus() (vx [2]int, ipip int) {
	host := DefaultHostMTU
	if m.devices != nil {
		if h := m.devices.HostMTU(); h > 0 {
			host = h
		}
	}
	vx = [2]int{m.cfg.VXLANMTU, m.cfg.VXLANMTUV6}
	if vx[0] == 0 {
		vx[0] = host - vxlanOverhead
	}
	if vx[1] == 0 {
		vx[1] = host - vxlan6Overhead
	}
	ipip = m.cfg.IPIPMTU
	if ipip == 0 {
		ipip = host - ipipOverhead
	}
	return vx, ipip
}

// parentOf returns the interface that has address a (the mask ignored), or
// "". Tunnel devices are never parents.
func (m *Manager) parentOf(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	for _, name := range slices.Sorted(maps.Keys(m.ifaceAddrs)) {
		if slices.Contains(DeviceNames, name) {
			continue
		}
		if slices.Contains(m.ifaceAddrs[name], a) {
			return name
		}
	}
	return ""
}

func (m *Manager) warnOnce(msg string, args ...any) {
	if m.warned[msg] {
		return
	}
	m.warned[msg] = true
	m.log.Warn(msg, args...)
}

// compute is §1.4, §4, §5, §6 and §9: the devices and their peers, and the
// cluster routes per interface.
func (m *Manager) compute() (State, map[string][]routes.Target) {
	e, cfg := m.encap, m.cfg
	vxOn := [2]bool{e.GetVxlanEnabled(), e.GetVxlanEnabledV6() && cfg.IPv6}
	ipipOn := e.GetIpipEnabled()
	noEncapOn := e.GetNoEncapEnabled() && cfg.ProgramNoEncapRoutes()
	vxMTU, ipipMTU := m.mtus()
	excl := cfg.ExclusiveProtocol()
	local := m.vteps[cfg.Hostname]
	localHost := m.hosts[cfg.Hostname]

	st := State{Known: true}
	var vxParent, hostParent [2]string
	for fam := range 2 {
		hostParent[fam] = m.parentOf(localHost[fam].Addr())
		w := &st.VXLAN[fam]
		if !vxOn[fam] {
			w.Mode = Remove
			continue
		}
		lf := local.Families[fam]
		vxParent[fam] = m.parentOf(lf.Parent)
		switch {
		case cfg.Hostname == "":
			m.warnOnce("FelixHostname is not set: no VXLAN device without the local node's tunnel endpoint")
			continue
		case !lf.Addr.IsValid():
			continue // no local VTEP of this family yet
		case vxParent[fam] == "":
			m.warnOnce("no interface has the local VXLAN tunnel endpoint's parent address yet", "family", felix.Family(fam).String(), "address", lf.Parent)
			continue
		}
		w.Mode = Want
		w.Device = VXLANLink{
			Name: vxlanNames[fam], VNI: cfg.VNI, Port: cfg.Port,
			Parent: vxParent[fam], Local: lf.Parent, MAC: lf.MAC, MTU: vxMTU[fam], Addr: lf.Addr,
		}
		for _, node := range slices.Sorted(maps.Keys(m.vteps)) {
			pf := m.vteps[node].Families[fam]
			if node == cfg.Hostname || !pf.Addr.IsValid() {
				continue
			}
			w.Peers = append(w.Peers, Peer{Node: node, Addr: pf.Addr, MAC: pf.MAC, Underlay: pf.Parent})
		}
	}
	switch {
	case ipipOn && cfg.IPIPTunnelAddr.IsValid():
		st.IPIP = IPIPWish{Mode: Want, MTU: ipipMTU, Addr: cfg.IPIPTunnelAddr}
	case ipipOn:
		m.warnOnce("IPIP is on but IpInIpTunnelAddr is not set: tunl0 is left as it is")
	case cfg.IPIPEnabled == "":
		st.IPIP = IPIPWish{Mode: Strip}
	}
	// §9: the pod MTU is the smallest of the encapsulations in use.
	for _, c := range []struct {
		on  bool
		mtu int
	}{{ipipOn, ipipMTU}, {vxOn[0], vxMTU[0]}, {vxOn[1], vxMTU[1]}} {
		if c.on && (st.PodMTU == 0 || c.mtu < st.PodMTU) {
			st.PodMTU = c.mtu
		}
	}
	if st.PodMTU == 0 {
		st.PodMTU = DefaultHostMTU
		if m.devices != nil && m.devices.HostMTU() > 0 {
			st.PodMTU = m.devices.HostMTU()
		}
	}

	targets := map[string][]routes.Target{}
	add := func(iface string, t routes.Target) { targets[iface] = append(targets[iface], t) }
	for _, dst := range slices.SortedFunc(maps.Keys(m.clusterRoutes), netip.Prefix.Compare) {
		r := m.clusterRoutes[dst]
		fam := int(felix.FamilyOf(dst.Addr()))
		if fam == 1 && !cfg.IPv6 {
			continue
		}
		var sameClass, blackClass int
		switch r.PoolType {
		case proto.IPPoolType_VXLAN:
			if !vxOn[fam] {
				continue
			}
			sameClass, blackClass = classVXLANSameSubnet, classBlackholeVXLAN
		case proto.IPPoolType_IPIP:
			if fam == 1 || !ipipOn || !cfg.ProgramIPIPRoutes() {
				continue
			}
			sameClass, blackClass = classIPIPSameSubnet, classBlackholeIPIP
		case proto.IPPoolType_NO_ENCAP:
			if !noEncapOn {
				continue
			}
			sameClass, blackClass = classNoEncap, classBlackholeNoEncap
		default:
			continue
		}
		// Felix's IPv4 routes have metric 0 (IPv6's get the kernel's
		// 1024); a host route takes the workload routes' metric so that a
		// local workload's route to the same address, of class 0, wins.
		metric := 0
		if fam == 0 && !dst.IsSingleIP() {
			metric = routes.MetricZero
		}
		if r.Has(proto.RouteType_LOCAL_WORKLOAD) && !r.LocalWorkload && !dst.IsSingleIP() {
			if cfg.RouteSource != RouteSourceWorkloadIPs {
				add(routes.BlackholeIface, routes.Target{CIDR: dst, Blackhole: true, Protocol: excl, Class: blackClass, Priority: metric})
			}
			continue
		}
		tunnelIP := r.Has(proto.RouteType_REMOTE_TUNNEL) && (r.Has(proto.RouteType_REMOTE_WORKLOAD) || r.Borrowed)
		if !r.Has(proto.RouteType_REMOTE_WORKLOAD) && !tunnelIP {
			continue
		}
		parent := hostParent[fam]
		if r.PoolType == proto.IPPoolType_VXLAN {
			parent = vxParent[fam]
		}
		if parent != "" && r.NodeIP.IsValid() && (r.PoolType == proto.IPPoolType_NO_ENCAP || r.SameSubnet) {
			add(parent, routes.Target{CIDR: dst, Gateway: r.NodeIP, OnLink: true, Protocol: excl, Class: sameClass, Priority: metric})
			continue
		}
		switch r.PoolType {
		case proto.IPPoolType_VXLAN:
			dev := vxlanNames[fam]
			if tunnelIP {
				// The remote VTEP is this address: its permanent
				// neighbour resolves it.
				add(dev, routes.Target{CIDR: dst, MTU: vxMTU[fam], Class: classVXLANTunnel, Priority: metric})
				continue
			}
			peer := m.vteps[r.NodeName].Families[fam]
			if r.NodeName == cfg.Hostname || !peer.Addr.IsValid() {
				continue // no VTEP yet
			}
			add(dev, routes.Target{CIDR: dst, Gateway: peer.Addr, OnLink: true, MTU: vxMTU[fam], Class: classVXLANTunnel, Priority: metric})
		case proto.IPPoolType_IPIP:
			host := m.hosts[r.NodeName][0]
			if !host.IsValid() {
				continue // no host address yet
			}
			add(IPIPDevice, routes.Target{CIDR: dst, Gateway: host.Addr(), OnLink: true, Protocol: excl, MTU: ipipMTU, Class: classIPIPTunnel, Priority: metric})
		}
	}
	return st, targets
}

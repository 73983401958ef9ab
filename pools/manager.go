// Package pools is the pools manager: IP pools, Calico hosts and remote
// VTEPs into the cluster sets of the inet table, the natOutgoing chain
// (Felix's masquerade manager, felix/dataplane/linux/masq_mgr.go) and the
// rules that depend on the encapsulation (felix/rules/static.go): IPIP and
// VXLAN accepted only from Calico hosts, VXLAN untracked, host traffic into
// a tunnel masqueraded to the tunnel address.
//
// Like every manager it only records in OnUpdate and writes the model in
// CompleteDeferredWork. A pool, host or VTEP change is a change of set
// elements; the natOutgoing chain is rewritten only when a family gains its
// first natOutgoing pool or loses its last.
package pools

import (
	"log/slog"
	"net/netip"
	"slices"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

// Config is what the manager needs besides render's configuration.
type Config struct {
	// Hostname is this node (FelixHostname): its own VTEP is not a source
	// of VXLAN to accept.
	Hostname string
}

// Manager keeps the cluster sets, the natOutgoing chain and the tunnel
// rules. It is not safe for concurrent use.
type Manager struct {
	rcfg  render.Config
	cfg   Config
	table *nft.Model
	log   *slog.Logger

	pools map[string]felix.Pool
	// hosts holds each node's last non-empty address per family (Felix
	// keeps a node whose address became empty: see OnUpdate).
	hosts map[string][2]netip.Addr
	// vteps holds each node's VTEP parent address per family.
	vteps map[string][2]netip.Addr
	// encap is the first Encapsulation of this process; nil before it.
	encap *render.Encap

	dirty, encapDirty, started bool
	// active is, per family, whether the natOutgoing chain has its rules.
	active [2]bool
	// written is what the manager last wrote into each cluster set.
	written map[string]map[string]nft.Element
}

// New returns a manager writing into table.
func New(rcfg render.Config, cfg Config, table *nft.Model, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Manager{
		rcfg: rcfg, cfg: cfg, table: table, log: log,
		pools: map[string]felix.Pool{}, hosts: map[string][2]netip.Addr{}, vteps: map[string][2]netip.Addr{},
		written: map[string]map[string]nft.Element{},
	}
}

// OnUpdate records a Felix message. Messages that do not parse are logged
// and dropped (the state file checks them before they get here; Felix never
// sends them).
func (m *Manager) OnUpdate(msg any) {
	switch msg := msg.(type) {
	case *proto.IPAMPoolUpdate:
		// Felix first removes what it knew of the pool id, then adds it:
		// a pool whose CIDR or natOutgoing changed is replaced whole.
		delete(m.pools, msg.GetId())
		p, err := felix.ParsePool(msg)
		if err != nil {
			m.log.Error("ignoring IP pool", "err", err)
		} else {
			m.pools[p.ID] = p
		}
		m.dirty = true
	case *proto.IPAMPoolRemove:
		delete(m.pools, msg.GetId())
		m.dirty = true
	case *proto.HostMetadataUpdate:
		addrs, err := felix.HostAddrs(msg)
		if err != nil {
			m.log.Error("ignoring host metadata", "host", msg.GetHostname(), "err", err)
			return
		}
		// Felix's all-hosts set skips a family whose address is empty:
		// the node keeps its old address there until it is removed.
		h := m.hosts[msg.GetHostname()]
		for f, p := range addrs {
			if p.IsValid() {
				h[f] = p.Addr()
			}
		}
		m.hosts[msg.GetHostname()] = h
		m.dirty = true
	case *proto.HostMetadataRemove:
		delete(m.hosts, msg.GetHostname())
		m.dirty = true
	case *proto.VXLANTunnelEndpointUpdate:
		v, err := felix.ParseVTEP(msg)
		if err != nil {
			m.log.Error("ignoring VTEP", "node", msg.GetNode(), "err", err)
			return
		}
		m.vteps[v.Node] = [2]netip.Addr{v.Families[0].Parent, v.Families[1].Parent}
		m.dirty = true
	case *proto.VXLANTunnelEndpointRemove:
		delete(m.vteps, msg.GetNode())
		m.dirty = true
	case *proto.Encapsulation:
		e := render.Encap{IPIP: msg.GetIpipEnabled(), VXLAN: msg.GetVxlanEnabled(), VXLANV6: msg.GetVxlanEnabledV6()}
		switch {
		case m.encap == nil:
			m.encap = &e
			m.encapDirty = true
		case *m.encap != e:
			// Felix exits and starts the driver again when the
			// encapsulation changes; until then the first one stays.
			m.log.Warn("encapsulation changed; keeping the first one until Felix restarts the driver",
				"first", *m.encap, "now", e)
		}
	}
}

// ResolveUpdateBatch is part of the manager interface; there is nothing to
// resolve across the batch.
func (m *Manager) ResolveUpdateBatch() error { return nil }

// CompleteDeferredWork writes what changed: the cluster sets' elements,
// the natOutgoing chain when a family's activity changed, the tunnel rules
// once the encapsulation is known.
func (m *Manager) CompleteDeferredWork() error {
	if !m.started {
		for _, s := range render.ClusterSets(m.rcfg) {
			m.table.SetSet(s)
			m.written[s.Name] = map[string]nft.Element{}
		}
		m.table.SetChain(render.NATOutgoing(m.rcfg, m.active))
		m.started = true
		m.dirty = true
	}
	if m.encapDirty {
		for _, c := range render.Tunnel(m.rcfg, *m.encap) {
			m.table.SetChain(c)
		}
		m.encapDirty = false
	}
	if !m.dirty {
		return nil
	}
	m.dirty = false
	want := m.desiredSets()
	for name, els := range want {
		m.writeSet(name, els)
	}
	var active [2]bool
	for _, p := range m.pools {
		if p.Masquerade {
			active[p.Family()] = true
		}
	}
	if active != m.active {
		m.active = active
		m.table.SetChain(render.NATOutgoing(m.rcfg, active))
	}
	return nil
}

// desiredSets returns the elements each cluster set should hold.
func (m *Manager) desiredSets() map[string]map[string]nft.Element {
	var all, masq, hosts, vx [2][]netip.Prefix
	for _, p := range m.pools {
		f := p.Family()
		if !p.LoadBalancerOnly {
			all[f] = append(all[f], p.CIDR)
		}
		if p.Masquerade {
			masq[f] = append(masq[f], p.CIDR)
		}
	}
	for _, h := range m.hosts {
		for f, a := range h {
			if a.IsValid() {
				hosts[f] = append(hosts[f], netip.PrefixFrom(a, a.BitLen()))
			}
		}
	}
	for node, v := range m.vteps {
		if node == m.cfg.Hostname {
			continue
		}
		for f, a := range v {
			if a.IsValid() {
				vx[f] = append(vx[f], netip.PrefixFrom(a, a.BitLen()))
			}
		}
	}
	for _, p := range m.rcfg.ExternalNodes {
		f := felix.FamilyOf(p.Addr())
		// Felix adds ExternalNodesCIDRList to the IPv4 all-hosts set
		// only, and to both VXLAN allow-lists unfiltered; nftep filters
		// by family (an IPv4 CIDR in an IPv6 set would refuse the whole
		// transaction).
		if f == felix.IPv4 {
			hosts[f] = append(hosts[f], p)
		}
		vx[f] = append(vx[f], p)
	}
	out := map[string]map[string]nft.Element{}
	for _, f := range m.rcfg.Families() {
		i := 0
		if f == nft.IPv6 {
			i = 1
		}
		out[render.FamilySet(render.SetAllPools, f)] = render.PrefixElements(all[i])
		out[render.FamilySet(render.SetMasqPools, f)] = render.PrefixElements(masq[i])
		out[render.FamilySet(render.SetAllHosts, f)] = render.PrefixElements(hosts[i])
		out[render.FamilySet(render.SetVXLANSources, f)] = render.PrefixElements(vx[i])
	}
	return out
}

// writeSet makes set hold els, touching only the elements that changed.
func (m *Manager) writeSet(name string, els map[string]nft.Element) {
	old := m.written[name]
	for k := range old {
		if _, ok := els[k]; !ok {
			m.table.DeleteElement(name, k)
		}
	}
	for k, e := range els {
		if _, ok := old[k]; !ok {
			m.table.SetElement(name, e)
		}
	}
	m.written[name] = els
}

// Counts reports the pools the manager holds: all of them, and those with
// natOutgoing.
func (m *Manager) Counts() (pools, natOutgoing int) {
	for _, p := range m.pools {
		pools++
		if p.Masquerade {
			natOutgoing++
		}
	}
	return pools, natOutgoing
}

// Encap returns the encapsulation the tunnel rules follow, and false before
// Felix's first Encapsulation.
func (m *Manager) Encap() (render.Encap, bool) {
	if m.encap == nil {
		return render.Encap{}, false
	}
	return *m.encap, true
}

// Pools returns the pools, sorted by CIDR.
func (m *Manager) Pools() []felix.Pool {
	out := make([]felix.Pool, 0, len(m.pools))
	for _, p := range m.pools {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b felix.Pool) int { return a.CIDR.Addr().Compare(b.CIDR.Addr()) })
	return out
}

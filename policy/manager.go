package policy

import (
	"log/slog"
	"maps"
	"slices"

	"github.com/nftep/nftep/felix"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
)

// ownerKey identifies a policy (by its PolicyID) or a profile (by name).
type ownerKey struct {
	profile               bool
	name, namespace, kind string
}

func policyKey(id *proto.PolicyID) ownerKey {
	return ownerKey{name: id.GetName(), namespace: id.GetNamespace(), kind: id.GetKind()}
}

func profileKey(name string) ownerKey { return ownerKey{profile: true, name: name} }

// owner is a policy or profile Felix has sent.
type owner struct {
	key      ownerKey
	id       *proto.PolicyID // policies only
	tier     string          // policies only
	inbound  []*proto.Rule
	outbound []*proto.Rule
	// setIDs are the IP sets the rules name; a set appearing or going
	// changes whether the rules can be rendered.
	setIDs []string
}

// indexEntry is what reindex recorded for an owner: its chain names (one
// per layer and direction) and the IP sets its rules name.
type indexEntry struct {
	names, setIDs []string
}

// chainSource says what a policy or profile chain name stands for.
type chainSource struct {
	owner ownerKey
	layer render.Layer
	dir   render.Dir
}

// Manager turns Felix's active policies, profiles and IP sets into chains
// and sets of the inet table's model. It is not safe for concurrent use:
// the dataplane drives it from its one goroutine, like the endpoint
// manager.
//
// What it writes:
//
//   - for every IP set, two sets "ipset-<id>-v4" and "-v6" (see IPSetName
//     and setDef), or the "-v4" one alone when IPv6 is off, from the
//     IPSetUpdate until the IPSetRemove;
//   - for every policy or profile chain that some chain of the model jumps
//     to, that chain, rendered for its layer; and for a jump target that is
//     no policy or profile Felix has sent, a chain that drops everything
//     (fail closed, comment "unknown policy or profile"). Chains nothing
//     jumps to are not written (Felix's nftables table layer,
//     felix/nftables/table.go, programs only chains reachable from a base
//     chain): a policy that applies only to workloads gets filter chains,
//     not raw and mangle copies.
//
// The references are explicit: whoever writes a chain that jumps to a
// policy or profile chain calls UseChain for it, and ReleaseChain when the
// jump goes (the endpoint manager does, for its endpoint and policy-group
// chains). A chain is written at its first use and deleted at its last, at
// once, so the model never jumps to a missing chain and the managers may
// complete their work in any order; a policy that changes rewrites only the
// chains in use.
type Manager struct {
	cfg   render.Config
	model *nft.Model
	log   *slog.Logger

	// Felix's view, as recorded by OnUpdate.
	sets   map[string]*ipSet
	owners map[ownerKey]*owner

	// Pending work.
	dirtySets   map[string]bool // elements or existence changed
	dirtyOwners map[ownerKey]bool

	// byName maps every chain name of every known owner to its source.
	byName map[string]chainSource
	// cache holds rendered chains by name, until their owner changes or an
	// IP set they depend on appears or goes.
	cache map[string]rendered
	// setUsers maps an IP set to the owners whose rules name it.
	setUsers map[string]map[ownerKey]bool
	// indexed is what byName and setUsers hold for each owner.
	indexed map[ownerKey]indexEntry
	// writtenSets are the Felix IP sets whose nft sets are in the model,
	// with the type they were written for.
	writtenSets map[string]proto.IPSetUpdate_IPSetType

	// refs counts the uses of each policy and profile chain name
	// (UseChain, ReleaseChain); helpers names the helper chains written
	// with each.
	refs    map[string]int
	helpers map[string][]string
	// fresh are the names first used since the last CompleteDeferredWork:
	// one still unknown then is worth a warning.
	fresh map[string]bool
}

// New returns a manager writing into table. Nothing is written until
// CompleteDeferredWork. A nil logger discards.
func New(cfg render.Config, table *nft.Model, logger *slog.Logger) *Manager {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{
		cfg:         cfg,
		model:       table,
		log:         logger,
		sets:        map[string]*ipSet{},
		owners:      map[ownerKey]*owner{},
		dirtySets:   map[string]bool{},
		dirtyOwners: map[ownerKey]bool{},
		byName:      map[string]chainSource{},
		cache:       map[string]rendered{},
		setUsers:    map[string]map[ownerKey]bool{},
		indexed:     map[ownerKey]indexEntry{},
		writtenSets: map[string]proto.IPSetUpdate_IPSetType{},
		refs:        map[string]int{},
		helpers:     map[string][]string{},
		fresh:       map[string]bool{},
	}
}

// UseChain records one more jump to the policy or profile chain name
// (render.PolicyChainName, render.ProfileChainName). At the first, the
// chain is written: rendered from the policy or profile, or, for one Felix
// has not sent (yet), a chain that drops everything.
func (m *Manager) UseChain(name string) {
	m.refs[name]++
	if m.refs[name] == 1 {
		m.fresh[name] = true
		m.write(name)
	}
}

// AddUses records n jumps to the policy or profile chain name that are not
// in the model this manager writes into: the chains of endpoints a
// one-shot apply did not render, which the kernel holds (see the record of
// the last apply in package dataplane). The chain is written, and kept
// until the model's own uses are released as well. Names of policies and
// profiles the manager does not know are ignored.
func (m *Manager) AddUses(name string, n int) {
	if _, known := m.byName[name]; !known || n <= 0 {
		return
	}
	m.UseChain(name) // writes it at its first use
	m.refs[name] += n - 1
}

// ReleaseChain records that one jump to name went. At the last, the chain
// and its helpers are deleted.
func (m *Manager) ReleaseChain(name string) {
	if m.refs[name] == 0 {
		return
	}
	if m.refs[name]--; m.refs[name] > 0 {
		return
	}
	delete(m.refs, name)
	delete(m.fresh, name)
	delete(m.cache, name)
	m.model.DeleteChain(name)
	for _, h := range m.helpers[name] {
		m.model.DeleteChain(h)
	}
	delete(m.helpers, name)
}

// write puts the chain name (in use) and its helpers into the model as
// they render now, removing helpers it no longer has.
func (m *Manager) write(name string) {
	r := m.chainFor(name)
	if m.model.Chain(name) != r.chain {
		m.model.SetChain(r.chain)
	}
	var names []string
	for _, h := range r.helpers {
		if m.model.Chain(h.Name) != h {
			m.model.SetChain(h)
		}
		names = append(names, h.Name)
	}
	for _, old := range m.helpers[name] {
		if !slices.Contains(names, old) {
			m.model.DeleteChain(old)
		}
	}
	if len(names) == 0 {
		delete(m.helpers, name)
	} else {
		m.helpers[name] = names
	}
}

// OnUpdate records one message. It accepts *proto.IPSetUpdate,
// *proto.IPSetDeltaUpdate, *proto.IPSetRemove, *proto.ActivePolicyUpdate,
// *proto.ActivePolicyRemove, *proto.ActiveProfileUpdate and
// *proto.ActiveProfileRemove, and ignores anything else, so the dataplane
// can hand every message to every manager. A remove of something never
// sent is ignored: Felix may send a remove for something the driver never
// saw (its felix/proto/doc.go says so).
func (m *Manager) OnUpdate(msg any) {
	switch msg := msg.(type) {
	case *proto.IPSetUpdate:
		m.onIPSetUpdate(msg)
	case *proto.IPSetDeltaUpdate:
		m.onIPSetDelta(msg)
	case *proto.IPSetRemove:
		if _, ok := m.sets[msg.GetId()]; ok {
			delete(m.sets, msg.GetId())
			m.dirtySets[msg.GetId()] = true
		}
	case *proto.ActivePolicyUpdate:
		if msg.GetId() == nil {
			m.log.Warn("ignoring active policy update without id")
			return
		}
		pol := msg.GetPolicy()
		if pol == nil {
			// Felix always sends the policy; without one there are no
			// rules, which is what an empty policy means.
			m.log.Warn("active policy update without policy: treating it as empty", "policy", msg.GetId().GetName())
		}
		tier := pol.GetTier()
		if tier == "" {
			tier = "default"
		}
		m.setOwner(&owner{
			key: policyKey(msg.GetId()), id: msg.GetId(), tier: tier,
			inbound: pol.GetInboundRules(), outbound: pol.GetOutboundRules(),
		})
	case *proto.ActivePolicyRemove:
		if msg.GetId() != nil {
			m.removeOwner(policyKey(msg.GetId()))
		}
	case *proto.ActiveProfileUpdate:
		if msg.GetId() == nil {
			m.log.Warn("ignoring active profile update without id")
			return
		}
		prof := msg.GetProfile()
		m.setOwner(&owner{
			key:     profileKey(msg.GetId().GetName()),
			inbound: prof.GetInboundRules(), outbound: prof.GetOutboundRules(),
		})
	case *proto.ActiveProfileRemove:
		if msg.GetId() != nil {
			m.removeOwner(profileKey(msg.GetId().GetName()))
		}
	}
}

func (m *Manager) onIPSetUpdate(msg *proto.IPSetUpdate) {
	id := msg.GetId()
	if id == "" {
		m.log.Warn("ignoring IP set update without id")
		return
	}
	s := &ipSet{id: id, typ: msg.GetType(), members: map[felix.Member]bool{}, whole: true}
	switch s.typ {
	case proto.IPSetUpdate_IP, proto.IPSetUpdate_IP_AND_PORT, proto.IPSetUpdate_NET:
	default:
		// An unknown type has no nft shape; forgetting the set makes
		// every policy that names it fail closed.
		m.log.Error("ignoring IP set of unknown type: policies using it fail closed", "set", id, "type", msg.GetType())
		if _, ok := m.sets[id]; ok {
			delete(m.sets, id)
			m.dirtySets[id] = true
		}
		return
	}
	m.addMembers(s, msg.GetMembers())
	m.sets[id] = s
	m.dirtySets[id] = true
}

func (m *Manager) onIPSetDelta(msg *proto.IPSetDeltaUpdate) {
	s := m.sets[msg.GetId()]
	if s == nil {
		m.log.Warn("ignoring delta for unknown IP set", "set", msg.GetId())
		return
	}
	for _, str := range msg.GetRemovedMembers() {
		mem, err := felix.ParseMember(s.typ, str)
		if err != nil || !s.members[mem] {
			continue // it was never added either
		}
		delete(s.members, mem)
		s.noteChanged(mem)
	}
	m.addMembers(s, msg.GetAddedMembers())
	m.dirtySets[s.id] = true
}

// addMembers adds members to s. A member that does not parse is logged and
// left out: one bad address must not cost the set its other members. With
// IPv6 off, IPv6 members are dropped silently: there is no IPv6 set to put
// them in (Felix, IPv4 only, ignores them too).
func (m *Manager) addMembers(s *ipSet, members []string) {
	for _, str := range members {
		mem, err := felix.ParseMember(s.typ, str)
		if err != nil {
			m.log.Warn("ignoring bad IP set member", "set", s.id, "member", str, "err", err)
			continue
		}
		if !m.cfg.IPv6 && familyOf(mem.Prefix) == nft.IPv6 || s.members[mem] {
			continue
		}
		s.members[mem] = true
		s.noteChanged(mem)
	}
}

func (m *Manager) setOwner(o *owner) {
	o.setIDs = setIDs(append(slices.Clip(o.inbound), o.outbound...))
	m.removeOwner(o.key)
	m.owners[o.key] = o
	m.dirtyOwners[o.key] = true
}

func (m *Manager) removeOwner(k ownerKey) {
	if _, ok := m.owners[k]; ok {
		delete(m.owners, k)
		m.dirtyOwners[k] = true
	}
}

// ResolveUpdateBatch is part of the engine's manager shape: nothing of the
// policy manager's depends on the whole batch (interface state, say), so
// it does nothing.
func (m *Manager) ResolveUpdateBatch() error { return nil }

// CompleteDeferredWork writes what changed since the last call into the
// model, in an order that keeps every reference resolvable: IP sets are
// created and filled first, then policy and profile chains are written or
// deleted, and sets Felix removed are deleted last. The daemon calls it
// after the endpoint manager's (see Manager).
//
// A policy that cannot be rendered is logged and written fail closed; it
// never stops the others, so the error is always nil today. It is kept for
// failures of the whole manager.
func (m *Manager) CompleteDeferredWork() error {
	// 1. IP sets. A set that appears or goes changes whether the rules
	//    that name it can be rendered: re-render their owners.
	var removedSets []string
	for _, id := range slices.Sorted(maps.Keys(m.dirtySets)) {
		s, known := m.sets[id]
		prevType, written := m.writtenSets[id]
		if known {
			writeSet(m.model, s, m.cfg.Families())
			m.writtenSets[id] = s.typ
		} else if written {
			removedSets = append(removedSets, id)
		}
		// A set that appears, goes or changes type changes how (or
		// whether) the rules naming it render; a membership change does
		// not touch any chain.
		if known != written || (known && prevType != s.typ) {
			for k := range m.setUsers[id] {
				m.dirtyOwners[k] = true
			}
		}
	}
	clear(m.dirtySets)

	// 2. Owners: re-index their chain names and forget cached renders;
	//    rewrite the chains of theirs that are in use (their old names and
	//    their new ones: a policy that moves tier renames its chains).
	touched := map[string]bool{}
	for _, k := range slices.SortedFunc(maps.Keys(m.dirtyOwners), compareOwners) {
		for _, name := range m.reindex(k) {
			touched[name] = true
		}
	}
	clear(m.dirtyOwners)
	for _, name := range slices.Sorted(maps.Keys(touched)) {
		if m.refs[name] > 0 {
			m.write(name)
		}
	}

	// 3. Chains used for the first time that still stand for nothing
	//    Felix sent: said once, here, so that a policy arriving in the same
	//    batch as its first user is not reported missing.
	for _, name := range slices.Sorted(maps.Keys(m.fresh)) {
		if _, known := m.byName[name]; !known && m.refs[name] > 0 {
			m.log.Warn("chain jumps to a policy or profile Felix has not sent: dropping its traffic", "chain", name)
		}
	}
	clear(m.fresh)

	// 4. Sets Felix removed, now that no chain of ours names them.
	for _, id := range removedSets {
		deleteSet(m.model, id, m.cfg.Families())
		delete(m.writtenSets, id)
	}
	return nil
}

func compareOwners(a, b ownerKey) int {
	for _, c := range [][2]string{{a.name, b.name}, {a.namespace, b.namespace}, {a.kind, b.kind}} {
		if c[0] != c[1] {
			if c[0] < c[1] {
				return -1
			}
			return 1
		}
	}
	switch {
	case a.profile == b.profile:
		return 0
	case a.profile:
		return 1
	}
	return -1
}

// reindex brings byName, setUsers and the cache in line with the owner's
// current version (or its removal).
//
// It returns the owner's chain names before and after.
func (m *Manager) reindex(k ownerKey) (names []string) {
	old := m.indexed[k]
	names = append(names, old.names...)
	for _, name := range old.names {
		if m.byName[name].owner == k {
			delete(m.byName, name)
		}
		delete(m.cache, name)
	}
	for _, id := range old.setIDs {
		delete(m.setUsers[id], k)
		if len(m.setUsers[id]) == 0 {
			delete(m.setUsers, id)
		}
	}
	delete(m.indexed, k)
	o := m.owners[k]
	if o == nil {
		return names
	}
	var e indexEntry
	for _, l := range layers {
		for _, d := range []render.Dir{render.Ingress, render.Egress} {
			var name string
			if k.profile {
				name = render.ProfileChainName(l, d, k.name)
			} else {
				name = render.PolicyChainName(l, d, o.tier, o.id)
			}
			if prev, clash := m.byName[name]; clash && prev.owner != k {
				m.log.Error("two policies or profiles map to one chain name; the later one wins",
					"chain", name, "owner", k.name, "other", prev.owner.name)
			}
			m.byName[name] = chainSource{owner: k, layer: l, dir: d}
			delete(m.cache, name)
			e.names = append(e.names, name)
		}
	}
	for _, id := range o.setIDs {
		if m.setUsers[id] == nil {
			m.setUsers[id] = map[ownerKey]bool{}
		}
		m.setUsers[id][k] = true
	}
	e.setIDs = o.setIDs
	m.indexed[k] = e
	return append(names, e.names...)
}

// chainFor returns the chain to write under name: the rendered policy or
// profile chain, or the fail-closed placeholder when no policy or profile
// Felix sent has that name.
func (m *Manager) chainFor(name string) rendered {
	if r, ok := m.cache[name]; ok {
		return r
	}
	src, ok := m.byName[name]
	if ok && m.owners[src.owner] == nil {
		// Removed in this batch and not re-indexed yet (the endpoint
		// manager may use the chain before this manager completes its
		// batch): unknown, until CompleteDeferredWork rewrites it.
		ok = false
	}
	var r rendered
	if !ok {
		r = rendered{chain: failClosed(name, "unknown policy or profile: fail closed")}
	} else {
		o := m.owners[src.owner]
		rules, dirWord := o.inbound, "inbound"
		if src.dir == render.Egress {
			rules, dirWord = o.outbound, "outbound"
		}
		who := "profile " + o.key.name + " " + dirWord
		if !o.key.profile {
			who = "policy " + policyDisplayName(o.tier, o.id) + " " + dirWord
		}
		var err error
		r, err = renderChain(m.cfg, src.layer, name, who, rules, m.setType)
		if err != nil {
			m.log.Error("cannot render rule: the policy fails closed", "chain", name, "err", err)
		}
	}
	m.cache[name] = r
	return r
}

func (m *Manager) setType(id string) (proto.IPSetUpdate_IPSetType, bool) {
	s, ok := m.sets[id]
	if !ok {
		return 0, false
	}
	return s.typ, true
}

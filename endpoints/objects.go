package endpoints

import (
	"slices"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/render"
)

// objects is everything one owner (a workload endpoint, a host endpoint's
// interface, the `*` defaults) has put into the tables. The manager keeps
// the last objects of each owner, so removing or re-rendering an owner
// removes exactly what it wrote and nothing else: that is what makes a rename
// clean up the old name's chains, spoof elements and ARP elements (quirks 13.1
// and 13.2 in docs/felix-differences.md) without any per-name bookkeeping.
type objects struct {
	chains   []*nft.Chain        // inet table, owned by this owner alone
	shared   []*nft.Chain        // inet table, refcounted across owners
	elems    []render.SetElement // inet table
	arpElems []render.SetElement // arp table
}

// tables writes owners' objects into the desired-state models.
//
// Shared chains (policy groups and content-addressed endpoint
// chains) are reference-counted by name and written only when the count
// goes 0→1: render names them by content, so an equal name means an equal
// chain, and leaving the first copy in place means re-rendering one endpoint
// never touches chains the others use. Owned chains are written every time:
// their content is what changed. Elements are owned by exactly one owner:
// every element key names the owner's interface (or its mark), and an
// interface has one owner.
//
// Every chain of the inet table goes through setChain and deleteChain, which
// tell the policy manager which policy and profile chains are jumped to
// (Deps.Policies): no one has to scan the model for references.
type tables struct {
	main, arp *nft.Model
	refs      map[string]int // shared chain → number of owners
	pol       Policies       // nil: nobody to tell
	// jumps holds, per chain of ours in the inet table, the policy and
	// profile chains it jumps to.
	jumps map[string][]string
}

func newTables(main, arp *nft.Model, pol Policies) *tables {
	return &tables{main: main, arp: arp, refs: map[string]int{}, pol: pol, jumps: map[string][]string{}}
}

// setChain writes c into the inet table: its new jumps to policy and
// profile chains are used before those of the chain it replaces are
// released, so a target both jump to stays.
func (t *tables) setChain(c *nft.Chain) {
	t.main.SetChain(c)
	if t.pol == nil {
		return
	}
	old := t.jumps[c.Name]
	cur := policyJumps(c)
	for _, name := range cur {
		t.pol.UseChain(name)
	}
	for _, name := range old {
		t.pol.ReleaseChain(name)
	}
	if len(cur) == 0 {
		delete(t.jumps, c.Name)
	} else {
		t.jumps[c.Name] = cur
	}
}

// deleteChain deletes the chain name from the inet table and releases its
// jumps.
func (t *tables) deleteChain(name string) {
	t.main.DeleteChain(name)
	if t.pol == nil {
		return
	}
	for _, target := range t.jumps[name] {
		t.pol.ReleaseChain(target)
	}
	delete(t.jumps, name)
}

// policyJumps returns the policy and profile chains c jumps or goes to,
// each once.
func policyJumps(c *nft.Chain) []string {
	var out []string
	for _, r := range c.Rules {
		v, ok := r.Action.(nft.Verdict)
		if !ok || (v.Kind != nft.Jump && v.Kind != nft.Goto) || !render.IsPolicyChainName(v.Chain) {
			continue
		}
		if !slices.Contains(out, v.Chain) {
			out = append(out, v.Chain)
		}
	}
	return out
}

// replace swaps old for new. It writes new first and then removes what only
// old had, so a chain both use is increfed before it is decrefed and never
// disappears in between.
func (t *tables) replace(old, new *objects) {
	if new != nil {
		t.addShared(new.shared)
		for _, c := range new.chains {
			t.setChain(c)
		}
		addElems(t.main, new.elems)
		if t.arp != nil {
			addElems(t.arp, new.arpElems)
		}
	}
	if old == nil {
		return
	}
	var keep *objects
	if new != nil {
		keep = new
	} else {
		keep = &objects{}
	}
	// Elements go before chains, so that a verdict map never points at a
	// deleted chain, even in the model (the kernel refuses to delete a chain
	// that a map element still points at: EBUSY).
	dropElems(t.main, old.elems, keep.elems)
	for _, c := range old.chains {
		if !slices.ContainsFunc(keep.chains, func(n *nft.Chain) bool { return n.Name == c.Name }) {
			t.deleteChain(c.Name)
		}
	}
	t.dropShared(old.shared)
	if t.arp != nil {
		dropElems(t.arp, old.arpElems, keep.arpElems)
	}
}

// addShared increfs cs, writing those new to the model. A chain the model
// has already replaces the owner's copy in cs (the same content, by its
// name): the copy becomes garbage at once, instead of every endpoint of a
// node with shared chains keeping its own copy of the chains they share.
func (t *tables) addShared(cs []*nft.Chain) {
	for i, c := range cs {
		t.refs[c.Name]++
		if t.refs[c.Name] == 1 {
			t.setChain(c)
		} else if have := t.main.Chain(c.Name); have != nil {
			cs[i] = have
		}
	}
}

// dropShared decrefs cs and deletes those no owner uses any more.
func (t *tables) dropShared(cs []*nft.Chain) {
	for _, c := range cs {
		t.refs[c.Name]--
		if t.refs[c.Name] <= 0 {
			delete(t.refs, c.Name)
			t.deleteChain(c.Name)
		}
	}
}

func addElems(m *nft.Model, es []render.SetElement) {
	for _, e := range es {
		m.SetElement(e.Set, e.Elem)
	}
}

// dropElems deletes the elements of old whose key new does not set again.
func dropElems(m *nft.Model, old, new []render.SetElement) {
	if len(old) == 0 {
		return
	}
	type key struct{ set, key string }
	kept := make(map[key]bool, len(new))
	for _, e := range new {
		kept[key{e.Set, e.Elem.Key}] = true
	}
	for _, e := range old {
		if !kept[key{e.Set, e.Elem.Key}] {
			m.DeleteElement(e.Set, e.Elem.Key)
		}
	}
}

// AddExternalUses records that n references to the shared chain name come
// from outside the model (the kernel's chains and elements of endpoints a
// one-shot apply did not render: see the record of the last apply in
// package dataplane), so that the chain stays while the model's own owners
// come and go. A chain no owner in the model uses is not in the model, and
// is left alone.
func (m *Manager) AddExternalUses(name string, n int) {
	if n > 0 && m.tables.refs[name] > 0 {
		m.tables.refs[name] += n
	}
}

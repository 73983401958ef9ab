package endpoints

import (
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/render"
)

// objects is everything one owner (a workload endpoint, a host endpoint's
// interface, the `*` defaults) has put into the tables. The manager keeps
// the last objects of each owner, so removing or re-rendering an owner
// removes exactly what it wrote and nothing else: that is what makes a rename
// clean up the old name's chains, spoof elements and ARP chain (quirks
// §13.1, §13.2) without any per-name bookkeeping.
type objects struct {
	chains    []*nft.Chain        // inet table
	elems     []render.SetElement // inet table
	arpChains []*nft.Chain
	arpElems  []render.SetElement
}

// tables writes owners' objects into the desired-state models.
//
// Chains are reference-counted by name, so a chain several owners render
// (a policy-group chain shared by endpoints, spec §3.7) stays while any
// owner uses it. Elements are owned by exactly one owner: every element key
// contains the owner's interface name, and an interface has one owner.
type tables struct {
	main, arp *nft.Model
	refs      map[chainRef]int
}

type chainRef struct {
	arp  bool
	name string
}

func newTables(main, arp *nft.Model) *tables {
	return &tables{main: main, arp: arp, refs: map[chainRef]int{}}
}

// replace swaps old for new. It writes new first and then removes what only
// old had, so a chain both use is increfed before it is decrefed and never
// disappears in between (spec §11.3).
func (t *tables) replace(old, new *objects) {
	if new != nil {
		t.addChains(t.main, false, new.chains)
		t.addElems(t.main, new.elems)
		if t.arp != nil {
			t.addChains(t.arp, true, new.arpChains)
			t.addElems(t.arp, new.arpElems)
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
	t.dropElems(t.main, old.elems, keep.elems)
	t.dropChains(t.main, false, old.chains)
	if t.arp != nil {
		t.dropElems(t.arp, old.arpElems, keep.arpElems)
		t.dropChains(t.arp, true, old.arpChains)
	}
}

func (t *tables) addChains(m *nft.Model, arp bool, cs []*nft.Chain) {
	for _, c := range cs {
		t.refs[chainRef{arp, c.Name}]++
		m.SetChain(c)
	}
}

// dropChains decrefs cs and deletes those no owner uses any more.
// Elements are dropped before chains so that a verdict map never points at
// a deleted chain, even in the model (spec §11.4).
func (t *tables) dropChains(m *nft.Model, arp bool, cs []*nft.Chain) {
	for _, c := range cs {
		r := chainRef{arp, c.Name}
		t.refs[r]--
		if t.refs[r] <= 0 {
			delete(t.refs, r)
			m.DeleteChain(c.Name)
		}
	}
}

func (t *tables) addElems(m *nft.Model, es []render.SetElement) {
	for _, e := range es {
		m.SetElement(e.Set, e.Elem)
	}
}

// dropElems deletes the elements of old whose key new does not set again.
func (t *tables) dropElems(m *nft.Model, old, new []render.SetElement) {
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

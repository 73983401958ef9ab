package nft

import (
	"iter"
	"sort"
)

// Model is the desired content of one table. The zero value is not usable:
// call NewModel. A Model is not safe for concurrent use; nftep changes it
// from its one event-loop goroutine.
type Model struct {
	Family Family
	Name   string

	chains map[string]*Chain
	sets   map[string]*Set
	// logs are the change logs of the model's readers (see track).
	logs []*changeLog
	// version counts the changes: a plan made from one version is stale
	// once it moves (Table.Plan).
	version uint64
}

// NewModel returns an empty model of the table family/name.
func NewModel(family Family, name string) *Model {
	return &Model{
		Family: family,
		Name:   name,
		chains: map[string]*Chain{},
		sets:   map[string]*Set{},
	}
}

// SetChain adds c, or replaces the chain of the same name. c must not be
// changed afterwards.
func (m *Model) SetChain(c *Chain) {
	m.chains[c.Name] = c
	m.chainChanged(c.Name)
}

// DeleteChain removes the chain called name, if there is one.
func (m *Model) DeleteChain(name string) {
	if _, ok := m.chains[name]; ok {
		delete(m.chains, name)
		m.chainChanged(name)
	}
}

// Chain returns the chain called name, or nil.
func (m *Model) Chain(name string) *Chain { return m.chains[name] }

// ChainNames returns the names of all chains, sorted.
func (m *Model) ChainNames() []string { return sortedKeys(m.chains) }

// Chains yields every chain in no particular order. It costs nothing per
// call beyond the walk, unlike ChainNames, which sorts: use it on hot paths
// that visit all chains but do not need an order.
func (m *Model) Chains() iter.Seq2[string, *Chain] {
	return func(yield func(string, *Chain) bool) {
		for name, c := range m.chains {
			if !yield(name, c) {
				return
			}
		}
	}
}

// NumChains returns the number of chains.
func (m *Model) NumChains() int { return len(m.chains) }

// SetSet adds s, or replaces the definition of the set of the same name,
// keeping its elements when s.Elements is nil. A definition change (key,
// data type or flags) makes Apply delete and recreate the set.
func (m *Model) SetSet(s *Set) {
	if old, ok := m.sets[s.Name]; ok && s.Elements == nil {
		s.Elements = old.Elements
	}
	if s.Elements == nil {
		s.Elements = map[string]Element{}
	}
	m.sets[s.Name] = s
	m.setChanged(s.Name)
}

// DeleteSet removes the set called name, if there is one.
func (m *Model) DeleteSet(name string) {
	if _, ok := m.sets[name]; ok {
		delete(m.sets, name)
		m.setChanged(name)
	}
}

// Set returns the set called name, or nil.
func (m *Model) Set(name string) *Set { return m.sets[name] }

// SetNames returns the names of all sets and maps, sorted.
func (m *Model) SetNames() []string { return sortedKeys(m.sets) }

// SetElement adds e to the set called set, replacing any element with the
// same key. It panics if the set does not exist: that is a programming error
// in the caller, not bad input.
func (m *Model) SetElement(set string, e Element) {
	s := m.mustSet(set)
	s.Elements[e.Key] = e
	m.elementChanged(set, e.Key)
}

// DeleteElement removes the element with key from the set called set.
func (m *Model) DeleteElement(set, key string) {
	if s := m.sets[set]; s != nil {
		if _, ok := s.Elements[key]; ok {
			delete(s.Elements, key)
			m.elementChanged(set, key)
		}
	}
}

func (m *Model) mustSet(name string) *Set {
	s := m.sets[name]
	if s == nil {
		panic("nft: no set " + name + " in the model")
	}
	return s
}

// Clone returns a copy of m that shares the (immutable) chains but has its
// own sets and element maps.
func (m *Model) Clone() *Model {
	c := NewModel(m.Family, m.Name)
	for k, v := range m.chains {
		c.chains[k] = v
	}
	for k, v := range m.sets {
		s := *v
		s.Elements = make(map[string]Element, len(v.Elements))
		for ek, ev := range v.Elements {
			s.Elements[ek] = ev
		}
		c.sets[k] = &s
	}
	return c
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

package nft

// What nftep believes the kernel holds for its table, and how a
// committed plan updates it.

// state is what nftep believes the kernel holds for its table.
type state struct {
	// table is true when the table exists.
	table  bool
	chains map[string]*chainState
	sets   map[string]*setState
	// chainRefs and setRefs count the references to each chain (jump/goto
	// from rules and map elements) and set (from rules) held by the known
	// parts of the state. Planning checks that a deleted object loses all of
	// them in the same transaction, so a deletion that the kernel would
	// refuse with EBUSY is reported by name before anything is sent.
	chainRefs map[string]int
	setRefs   map[string]int
}

// chainState is one chain of the kernel's table.
type chainState struct {
	// chain is the model chain whose rules the kernel holds; nil when they
	// are unknown (drift found by a resync, or a chain we did not create).
	chain *Chain
	// base is the chain's hook as the kernel has it; nil for a regular chain.
	base *BaseChain
	// digest is the digest of the rules' hashes (see chainDigest); zero
	// when not computed yet.
	digest digest
	// empty is true when a resync found the chain without rules: its
	// content is known to refer to nothing even when chain is nil.
	empty bool
}

// setState is one set or map of the kernel's table.
type setState struct {
	// def is the definition (no elements) the kernel holds; nil when it is
	// not one of ours.
	def *Set
	// elements are the elements the kernel holds, keyed like Set.Elements.
	elements elementSet
	// parsed caches the parsed keys of elements (of an interval set of
	// several fields, for the overlap check of additions), so that adding
	// one element to a large set does not parse all the others every time.
	parsed map[string][]keyField
	// intervals indexes the elements of a one-field interval set for the
	// same check, built on its first use (intervalsTried) and kept up to
	// date by commit; nil when the set has none (see held.index).
	intervals      *intervalIndex
	intervalsTried bool
}

// held is hs as the overlap check of additions to s sees it (s is the
// desired set; its definition is the one hs holds, or the set would be
// created anew and checked whole); dels are the elements the transaction
// deletes from it.
func (hs *setState) held(s *Set, dels []Element) heldElements {
	h := heldSet{hs: hs, s: s}
	if len(dels) > 0 {
		h.dels = make(map[string]bool, len(dels))
		for _, e := range dels {
			h.dels[e.Key] = true
		}
	}
	return h
}

type heldSet struct {
	hs   *setState
	s    *Set
	dels map[string]bool
}

func (h heldSet) fields(key string) ([]keyField, error) { return h.hs.keyFields(h.s, key) }

func (h heldSet) deleted(key string) bool { return h.dels[key] }

func (h heldSet) index() *intervalIndex {
	hs := h.hs
	if len(h.s.Key) != 1 || !h.s.Interval || hs.def == nil {
		return nil
	}
	if !hs.intervalsTried {
		hs.intervalsTried = true
		hs.intervals = newIntervalIndex(hs.def, func(yield func(string) bool) {
			for k := range hs.elements.all() {
				if !yield(k) {
					return
				}
			}
		})
	}
	return hs.intervals
}

// indexDelete and indexAdd keep hs.intervals up to date with the
// elements the kernel holds; an element that does not parse or does not
// fit drops the index for good (the check compares with every element).
func (hs *setState) indexDelete(key string) {
	if x := hs.intervals; x != nil {
		f, err := parseKey(hs.def, key)
		if err != nil {
			hs.intervals = nil
			return
		}
		x.remove(key, f[0])
	}
}

func (hs *setState) indexAdd(key string) {
	if x := hs.intervals; x != nil {
		f, err := parseKey(hs.def, key)
		if err != nil || !x.insert(key, f[0]) {
			hs.intervals = nil
		}
	}
}

// keyFields returns the parsed key of the element key of hs, whose
// definition is s's.
func (hs *setState) keyFields(s *Set, key string) ([]keyField, error) {
	if f, ok := hs.parsed[key]; ok {
		return f, nil
	}
	f, err := parseKey(s, key)
	if err != nil {
		return nil, err
	}
	if hs.parsed == nil {
		hs.parsed = map[string][]keyField{}
	}
	hs.parsed[key] = f
	return f, nil
}

func newState() *state {
	return &state{
		chains:    map[string]*chainState{},
		sets:      map[string]*setState{},
		chainRefs: map[string]int{},
		setRefs:   map[string]int{},
	}
}

// commit records in st what pl's transaction did, once the kernel has
// committed it.
func (st *state) commit(pl *planned, want *Model) {
	st.table = true
	for _, name := range pl.gone {
		st.dropChain(name)
		delete(st.chains, name)
	}
	for _, c := range pl.chains {
		st.dropChain(c.Name)
		cs := &chainState{chain: c, base: c.Base}
		if d, ok := pl.digests[c.Name]; ok {
			cs.digest = d
		}
		st.chains[c.Name] = cs
		chainRefsOf(c, func(t string) { st.chainRefs[t]++ }, func(s string) { st.setRefs[s]++ })
	}
	for _, c := range pl.same {
		// Same rules, new object: the references are the same too.
		cs := st.chains[c.Name]
		cs.chain = c
	}
	for _, name := range pl.goneSets {
		st.dropSetElements(name)
		delete(st.sets, name)
	}
	for _, s := range pl.sets {
		st.dropSetElements(s.Name)
		es := make(map[string]Element, len(s.Elements))
		for k, e := range s.Elements {
			es[k] = e
			if c := elementChain(&e); c != "" {
				st.chainRefs[c]++
			}
		}
		st.sets[s.Name] = &setState{def: setDef(s), elements: elementsOf(es)}
	}
	for i := range pl.tx.Ops {
		op := &pl.tx.Ops[i]
		switch op.Kind {
		case OpDeleteElements:
			hs := st.sets[op.Name]
			for j := range op.Elements {
				e := &op.Elements[j]
				if c := elementChain(e); c != "" {
					st.unref(c)
				}
				hs.elements.del(e.Key)
				delete(hs.parsed, e.Key)
				hs.indexDelete(e.Key)
			}
		case OpAddElements:
			hs := st.sets[op.Name]
			for _, e := range op.Elements {
				if c := elementChain(&e); c != "" {
					st.chainRefs[c]++
				}
				hs.elements.put(e)
				hs.indexAdd(e.Key)
			}
		}
	}
}

// countRefs recounts chainRefs and setRefs from the known chains and
// elements.
func (st *state) countRefs() {
	st.chainRefs, st.setRefs = map[string]int{}, map[string]int{}
	for _, cs := range st.chains {
		if cs.chain != nil {
			chainRefsOf(cs.chain, func(c string) { st.chainRefs[c]++ }, func(s string) { st.setRefs[s]++ })
		}
	}
	for _, ss := range st.sets {
		for _, e := range ss.elements.all() {
			if c := elementChain(&e); c != "" {
				st.chainRefs[c]++
			}
		}
	}
}

// dropChain forgets the references the known rules of chain name make.
func (st *state) dropChain(name string) {
	hs := st.chains[name]
	if hs == nil || hs.chain == nil {
		return
	}
	chainRefsOf(hs.chain, st.unref, func(s string) {
		if st.setRefs[s]--; st.setRefs[s] <= 0 {
			delete(st.setRefs, s)
		}
	})
}

func (st *state) unref(chain string) {
	if st.chainRefs[chain]--; st.chainRefs[chain] <= 0 {
		delete(st.chainRefs, chain)
	}
}

// dropSetElements forgets the references the elements of set name make.
func (st *state) dropSetElements(name string) {
	hs := st.sets[name]
	if hs == nil {
		return
	}
	for _, e := range hs.elements.all() {
		if c := elementChain(&e); c != "" {
			st.unref(c)
		}
	}
}

// model returns the state as a Model (chains whose content is unknown appear
// with their hook and no rules).
func (st *state) model(family Family, name string) *Model {
	m := NewModel(family, name)
	for n, cs := range st.chains {
		if cs.chain != nil {
			m.chains[n] = cs.chain
		} else {
			m.chains[n] = &Chain{Name: n, Base: cs.base}
		}
	}
	for n, ss := range st.sets {
		var s *Set
		if ss.def != nil {
			s = setDef(ss.def)
		} else {
			s = &Set{Name: n}
		}
		s.Elements = make(map[string]Element, ss.elements.len())
		for k, e := range ss.elements.all() {
			s.Elements[k] = e
		}
		m.sets[n] = s
	}
	return m
}

func baseEqual(a, b *BaseChain) bool {
	if a == nil || b == nil {
		return a == b
	}
	return hookEqual(a, b) && basePolicy(a) == basePolicy(b)
}

// hookEqual says whether a chain can stay as it is in the kernel: a regular
// chain stays regular, and a base chain keeps type, hook and priority. A
// policy change alone is made in place (re-adding the chain updates it); any
// other change needs delete + recreate, because re-adding a base chain with a
// new priority fails with EOPNOTSUPP (nf_tables_updchain in the kernel's
// nf_tables_api.c; seen on 6.18 with `nft add chain`).
func hookEqual(a, b *BaseChain) bool {
	if a == nil || b == nil {
		return a == b
	}
	return chainType(a) == chainType(b) && a.Hook == b.Hook && a.Priority == b.Priority
}

// chainType returns b's type, filter when unset.
func chainType(b *BaseChain) ChainType {
	if b.Type == "" {
		return ChainTypeFilter
	}
	return b.Type
}

func setDefEqual(a, b *Set) bool {
	if a.Name != b.Name || a.Data != b.Data || a.Interval != b.Interval || a.Comment != b.Comment || len(a.Key) != len(b.Key) {
		return false
	}
	for i := range a.Key {
		if a.Key[i] != b.Key[i] {
			return false
		}
	}
	return true
}

// setDef returns a copy of s's definition, without elements.
func setDef(s *Set) *Set {
	d := *s
	d.Key = append([]KeyType(nil), s.Key...)
	d.Elements = nil
	return &d
}

func elementEqual(a, b *Element) bool {
	if a.Key != b.Key || a.Mark != b.Mark || a.Comment != b.Comment {
		return false
	}
	if a.Verdict == nil || b.Verdict == nil {
		return a.Verdict == b.Verdict
	}
	return *a.Verdict == *b.Verdict
}

package nft

import (
	"maps"
	"slices"
	"syscall"
)

// The Fake's tables and the kernel's checks on each operation.

// clone copies t deeply enough that apply can change the copy: chains and
// sets are copied, rules and elements shared (they are never changed in
// place). A nil table clones to nil.
func (t *fakeTable) clone() *fakeTable {
	if t == nil {
		return nil
	}
	c := &fakeTable{
		chains:   make(map[string]*fakeChain, len(t.chains)),
		order:    slices.Clone(t.order),
		sets:     make(map[string]*fakeSet, len(t.sets)),
		setOrder: slices.Clone(t.setOrder),
	}
	for n, ch := range t.chains {
		cc := *ch
		cc.rules = slices.Clip(ch.rules)
		c.chains[n] = &cc
	}
	for n, s := range t.sets {
		es := make(map[string]Element, len(s.elements))
		for k, e := range s.elements {
			es[k] = e
		}
		c.sets[n] = &fakeSet{def: s.def, elements: es}
	}
	if t.refs != nil {
		c.refs = &fakeRefs{chains: maps.Clone(t.refs.chains), sets: maps.Clone(t.refs.sets), lookers: make(map[string]map[string]int, len(t.refs.lookers))}
		for set, by := range t.refs.lookers {
			c.refs.lookers[set] = maps.Clone(by)
		}
	}
	return c
}

// fakeRefs are a table's reference counts (fakeTable.refs). Its methods do
// nothing on a nil *fakeRefs: counts not built yet are built from the
// table when first needed.
type fakeRefs struct {
	chains, sets map[string]int
	// lookers are, by set, the chains whose rules look it up (with how
	// many rules): where the edges of a new verdict map element start,
	// for loops.
	lookers map[string]map[string]int
}

// counts returns t's reference counts, counting them the first time.
func (t *fakeTable) counts() *fakeRefs {
	if t.refs == nil {
		t.refs = &fakeRefs{chains: map[string]int{}, sets: map[string]int{}, lookers: map[string]map[string]int{}}
		for name, c := range t.chains {
			for _, r := range c.rules {
				t.refs.rule(name, r.r, 1)
			}
		}
		for _, s := range t.sets {
			t.refs.elements(s.elements, 1)
		}
	}
	return t.refs
}

// rule adds d to the counts of what r, a rule of chain, refers to.
func (rf *fakeRefs) rule(chain string, r *Rule, d int) {
	if rf == nil {
		return
	}
	ruleRefs(r, func(to string) { rf.chains[to] += d }, func(set string) {
		rf.sets[set] += d
		by := rf.lookers[set]
		if by == nil {
			by = map[string]int{}
			rf.lookers[set] = by
		}
		if by[chain] += d; by[chain] <= 0 {
			delete(by, chain)
		}
	})
}

// element adds d to the count of the chain e's verdict names.
func (rf *fakeRefs) element(e Element, d int) {
	if rf == nil || e.Verdict == nil || e.Verdict.Chain == "" {
		return
	}
	rf.chains[e.Verdict.Chain] += d
}

func (rf *fakeRefs) elements(es map[string]Element, d int) {
	for _, e := range es {
		rf.element(e, d)
	}
}

// apply applies op to t (nil: no table) with the kernel's checks and
// returns the new table, or the index of the rule or element refused.
func (t *fakeTable) apply(op *Op) (*fakeTable, int, error) {
	if op.Kind == OpAddTable {
		if t == nil {
			t = &fakeTable{chains: map[string]*fakeChain{}, sets: map[string]*fakeSet{}}
		}
		return t, 0, nil
	}
	if t == nil {
		return nil, 0, syscall.ENOENT
	}
	switch op.Kind {
	case OpDeleteTable:
		return nil, 0, nil
	case OpAddChain:
		b := op.Chain.Base
		if c := t.chains[op.Name]; c != nil {
			if (c.base == nil) != (b == nil) || b != nil && !hookEqual(c.base, b) {
				return t, 0, syscall.EEXIST
			}
			if b != nil {
				nb := *c.base
				nb.Policy = b.Policy
				c.base = &nb
			}
			return t, 0, nil
		}
		c := &fakeChain{}
		if b != nil {
			nb := *b
			c.base = &nb
		}
		t.chains[op.Name] = c
		t.order = append(t.order, op.Name)
	case OpFlushChain:
		c := t.chains[op.Name]
		if c == nil {
			return t, 0, syscall.ENOENT
		}
		for _, r := range c.rules {
			t.refs.rule(op.Name, r.r, -1)
		}
		c.rules = nil
	case OpDeleteChain:
		c := t.chains[op.Name]
		if c == nil {
			return t, 0, syscall.ENOENT
		}
		if t.chainUsed(op.Name) {
			return t, 0, syscall.EBUSY
		}
		for _, r := range c.rules {
			t.refs.rule(op.Name, r.r, -1)
		}
		delete(t.chains, op.Name)
		t.order = slices.DeleteFunc(t.order, func(n string) bool { return n == op.Name })
	case OpAddRules:
		c := t.chains[op.Name]
		if c == nil {
			return t, 0, syscall.ENOENT
		}
		for i, r := range op.Chain.Rules {
			if err := t.checkRefs(r); err != nil {
				return t, i, err
			}
			c.rules = append(c.rules, fakeRule{r: r})
			t.refs.rule(op.Name, r, 1)
		}
	case OpAddSet:
		def := setDef(op.Set)
		if s := t.sets[op.Name]; s != nil {
			if !setDefEqual(s.def, def) {
				return t, 0, syscall.EEXIST
			}
		} else {
			t.sets[op.Name] = &fakeSet{def: def, elements: map[string]Element{}}
			t.setOrder = append(t.setOrder, op.Name)
		}
		if i, err := t.addElements(op.Name, op.Elements); err != nil {
			return t, i, err
		}
	case OpDeleteSet:
		if t.sets[op.Name] == nil {
			return t, 0, syscall.ENOENT
		}
		if t.setUsed(op.Name) {
			return t, 0, syscall.EBUSY
		}
		t.refs.elements(t.sets[op.Name].elements, -1)
		delete(t.sets, op.Name)
		t.setOrder = slices.DeleteFunc(t.setOrder, func(n string) bool { return n == op.Name })
	case OpAddElements:
		if i, err := t.addElements(op.Name, op.Elements); err != nil {
			return t, i, err
		}
	case OpDeleteElements:
		s := t.sets[op.Name]
		if s == nil {
			return t, 0, syscall.ENOENT
		}
		for i, e := range op.Elements {
			if _, ok := s.elements[e.Key]; !ok {
				return t, i, syscall.ENOENT
			}
			t.refs.element(s.elements[e.Key], -1)
			delete(s.elements, e.Key)
		}
	default:
		return t, 0, syscall.EOPNOTSUPP
	}
	return t, 0, nil
}

func (t *fakeTable) addElements(set string, es []Element) (int, error) {
	s := t.sets[set]
	if s == nil {
		return 0, syscall.ENOENT
	}
	for i, e := range es {
		if v := e.Verdict; v != nil && (v.Kind == Jump || v.Kind == Goto) {
			if err := t.checkTarget(v.Chain); err != nil {
				return i, err
			}
		}
		if old, ok := s.elements[e.Key]; ok {
			if !elementEqual(&old, &e) {
				return i, syscall.EEXIST
			}
			continue
		}
		s.elements[e.Key] = e
		t.refs.element(e, 1)
	}
	if s.def.Interval {
		if err := checkOverlaps(t.setWithElements(set)); err != nil {
			return 0, syscall.EEXIST
		}
	}
	return 0, nil
}

func (t *fakeTable) setWithElements(name string) *Set {
	s := t.sets[name]
	out := *s.def
	out.Elements = s.elements
	return &out
}

// checkTarget checks a jump or goto target: it must be a regular chain of
// the table.
func (t *fakeTable) checkTarget(name string) error {
	c := t.chains[name]
	if c == nil {
		return syscall.ENOENT
	}
	if c.base != nil {
		return syscall.EOPNOTSUPP
	}
	return nil
}

// checkRefs checks the chains and sets r refers to.
func (t *fakeTable) checkRefs(r *Rule) error {
	var err error
	ruleRefs(r, func(chain string) {
		if err == nil {
			err = t.checkTarget(chain)
		}
	}, func(set string) {
		if err == nil && t.sets[set] == nil {
			err = syscall.ENOENT
		}
	})
	return err
}

// chainUsed reports whether a rule or a verdict-map element refers to the
// chain name (its own rules included, as the kernel counts them).
func (t *fakeTable) chainUsed(name string) bool { return t.counts().chains[name] > 0 }

// setUsed reports whether a rule refers to the set name.
func (t *fakeTable) setUsed(name string) bool { return t.counts().sets[name] > 0 }

// loops returns ELOOP when jumps and gotos, from rules and through the
// verdict maps rules look up, make a cycle. Only ops can have made one: t
// had none before them, so any cycle now runs through an edge they added,
// from a chain u to a chain v, and then v reaches u. The search follows
// edges from the targets of the new edges only, computing each chain's
// edges when it is first reached, so that adding an endpoint to a table of
// 10,000 costs what the endpoint's chains reach, not the whole table.
func (t *fakeTable) loops(ops []Op) error {
	if t == nil {
		return nil
	}
	type edge struct{ from, to string }
	var added []edge
	// lookersOf are the chains whose rules look a set up, for new
	// elements (kept with the reference counts: no pass over the table).
	lookersOf := func(set string) []string {
		return slices.Sorted(maps.Keys(t.counts().lookers[set]))
	}
	for i := range ops {
		op := &ops[i]
		switch op.Kind {
		case OpAddRules:
			for _, r := range op.Chain.Rules {
				ruleRefs(r, func(to string) { added = append(added, edge{op.Name, to}) }, func(set string) {
					if s := t.sets[set]; s != nil {
						for _, e := range s.elements {
							if e.Verdict != nil && e.Verdict.Chain != "" {
								added = append(added, edge{op.Name, e.Verdict.Chain})
							}
						}
					}
				})
			}
		case OpAddElements, OpAddSet:
			for _, e := range op.Elements {
				if e.Verdict == nil || e.Verdict.Chain == "" {
					continue
				}
				set := op.Name
				if set == "" && op.Set != nil {
					set = op.Set.Name
				}
				for _, from := range lookersOf(set) {
					added = append(added, edge{from, e.Verdict.Chain})
				}
			}
		}
	}
	if len(added) == 0 {
		return nil
	}
	edges := map[string][]string{}
	edgesOf := func(name string) []string {
		if es, ok := edges[name]; ok {
			return es
		}
		var es []string
		if c := t.chains[name]; c != nil {
			for _, r := range c.rules {
				ruleRefs(r.r, func(to string) { es = append(es, to) }, func(set string) {
					if s := t.sets[set]; s != nil {
						for _, e := range s.elements {
							if e.Verdict != nil && e.Verdict.Chain != "" {
								es = append(es, e.Verdict.Chain)
							}
						}
					}
				})
			}
		}
		edges[name] = es
		return es
	}
	// reaches reports whether target is reachable from start; seen is
	// shared by the searches for one target.
	reaches := func(start, target string, seen map[string]bool) bool {
		stack := []string{start}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if n == target {
				return true
			}
			if seen[n] {
				continue
			}
			seen[n] = true
			stack = append(stack, edgesOf(n)...)
		}
		return false
	}
	seenFor := map[string]map[string]bool{}
	for _, e := range added {
		seen := seenFor[e.from]
		if seen == nil {
			seen = map[string]bool{}
			seenFor[e.from] = seen
		}
		if reaches(e.to, e.from, seen) {
			return syscall.ELOOP
		}
	}
	return nil
}

// model returns the table as a Model (for Dump).
func (t *fakeTable) model(key fakeKey) *Model {
	m := NewModel(key.family, key.name)
	for name, c := range t.chains {
		mc := &Chain{Name: name, Base: c.base}
		for _, r := range c.rules {
			mc.Rules = append(mc.Rules, r.r)
		}
		m.SetChain(mc)
	}
	for _, s := range t.sets {
		ms := *s.def
		ms.Elements = make(map[string]Element, len(s.elements))
		for k, e := range s.elements {
			ms.Elements[k] = e
		}
		m.SetSet(&ms)
	}
	return m
}

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
	return c
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
		c.rules = nil
	case OpDeleteChain:
		if t.chains[op.Name] == nil {
			return t, 0, syscall.ENOENT
		}
		if t.chainUsed(op.Name) {
			return t, 0, syscall.EBUSY
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
func (t *fakeTable) chainUsed(name string) bool {
	used := false
	for _, c := range t.chains {
		for _, r := range c.rules {
			ruleRefs(r.r, func(chain string) { used = used || chain == name }, func(string) {})
		}
	}
	for _, s := range t.sets {
		for _, e := range s.elements {
			if e.Verdict != nil && e.Verdict.Chain == name {
				used = true
			}
		}
	}
	return used
}

// setUsed reports whether a rule refers to the set name.
func (t *fakeTable) setUsed(name string) bool {
	used := false
	for _, c := range t.chains {
		for _, r := range c.rules {
			ruleRefs(r.r, func(string) {}, func(set string) { used = used || set == name })
		}
	}
	return used
}

// loops returns ELOOP when jumps and gotos, from rules and through the
// verdict maps rules look up, make a cycle.
func (t *fakeTable) loops() error {
	if t == nil {
		return nil
	}
	edges := map[string][]string{}
	for name, c := range t.chains {
		for _, r := range c.rules {
			ruleRefs(r.r, func(chain string) { edges[name] = append(edges[name], chain) }, func(set string) {
				if s := t.sets[set]; s != nil {
					for _, e := range s.elements {
						if e.Verdict != nil && e.Verdict.Chain != "" {
							edges[name] = append(edges[name], e.Verdict.Chain)
						}
					}
				}
			})
		}
	}
	const (
		unseen = iota
		onPath
		done
	)
	mark := map[string]int{}
	var visit func(string) bool
	visit = func(n string) bool {
		switch mark[n] {
		case onPath:
			return true
		case done:
			return false
		}
		mark[n] = onPath
		for _, m := range edges[n] {
			if visit(m) {
				return true
			}
		}
		mark[n] = done
		return false
	}
	for _, n := range slices.Sorted(maps.Keys(t.chains)) {
		if visit(n) {
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

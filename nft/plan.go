package nft

// Planning: the pure step that turns (what the kernel holds, what we want)
// into the ordered operations of one transaction. No I/O happens here, so the
// order and the size of every transaction is unit-testable without a kernel.

import (
	"fmt"
	"sort"
)

// validator checks the objects a transaction adds; the vocabulary provides
// the checks. Tests replace it to push invalid objects at the kernel.
type validator interface {
	chain(m *Model, c *Chain) error
	set(m *Model, s *Set) error
	element(m *Model, s *Set, e *Element) error
	// additions checks the elements added to an existing interval set
	// against its others (checkAddedOverlaps).
	additions(s *Set, adds []Element, held heldElements) error
}

// vocabularyValidator is the validator of the vocabulary (validate.go).
type vocabularyValidator struct{}

func (vocabularyValidator) chain(m *Model, c *Chain) error { return validateChain(m, c) }
func (vocabularyValidator) set(m *Model, s *Set) error     { return validateSet(m, s) }
func (vocabularyValidator) element(m *Model, s *Set, e *Element) error {
	return validateElement(m, s, *e)
}
func (vocabularyValidator) additions(s *Set, adds []Element, held heldElements) error {
	if err := checkAddedOverlaps(s, adds, held); err != nil {
		return fmt.Errorf("set %q: %w", s.Name, err)
	}
	return nil
}

// planner compares the state the kernel holds with the desired model.
type planner struct {
	have *state
	want *Model
	v    validator
	// changed, when set and not all, lists what changed in want since
	// have was last committed: everything else is unchanged, and only
	// that is compared.
	changed *changeLog
	// partial: want holds only part of the table (Table.Trust). A chain
	// or set it drops is deleted only if nothing the kernel keeps refers
	// to it after the transaction; otherwise an object outside the model
	// still uses it, and it stays (keepReferenced).
	partial bool
}

// chainChange is how one chain changes.
type chainChange uint8

const (
	chainSame chainChange = iota
	chainNew
	chainRewrite  // flush and re-add its rules
	chainRecreate // delete and add again (hook change)
	chainPolicy   // re-add to change the policy; rules unchanged
	chainGone     // delete
)

// planned is a plan: the transaction and what to record once it commits.
type planned struct {
	tx *Transaction
	// chains are the desired chains the transaction (re)writes: recorded as
	// programmed on commit. Deleted chains are in gone.
	chains []*Chain
	// same are desired chains that are new objects with the rules the
	// kernel already holds: recorded so the next plan compares pointers.
	same []*Chain
	gone []string
	// digests computed while planning, by chain name.
	digests map[string]digest
	// sets are the desired sets the transaction creates with all their
	// elements; goneSets are deleted.
	sets     []*Set
	goneSets []string
	// fresh names the regular chains ("chain NAME"), base chains ("base
	// NAME") and sets ("set NAME") that are new, and replaces is true when
	// the plan deletes and recreates an existing chain or set: see stages.
	fresh    map[string]bool
	replaces bool
}

// setChange is what a plan does to one set: recreate it, delete it, or
// add and delete elements.
type setChange struct {
	recreate bool
	gone     bool
	adds     []Element
	dels     []Element
}

// keepReferenced, for a partial model, takes out of the plan the deletions
// of chains and sets that something the plan does not touch still refers
// to: the model does not hold the whole table, and the objects it does not
// hold use them (an endpoint chain outside the model jumping to a policy
// chain an endpoint in the model released, say). It repeats until nothing
// changes, since a kept chain keeps what its own rules refer to.
func (p *planner) keepReferenced(changes map[string]chainChange, setChanges map[string]*setChange, delta func(*setChange) ([]Element, bool)) {
	have := p.have
	for {
		dropChain := map[string]int{}
		dropSet := map[string]int{}
		for name, ch := range changes {
			if ch == chainSame || ch == chainPolicy || ch == chainNew {
				continue
			}
			if hs := have.chains[name]; hs != nil && hs.chain != nil {
				chainRefsOf(hs.chain, func(c string) { dropChain[c]++ }, func(s string) { dropSet[s]++ })
			}
		}
		for name, sc := range setChanges {
			hs := have.sets[name]
			if hs == nil {
				continue
			}
			dels, gone := delta(sc)
			if gone || sc.recreate {
				for _, e := range hs.elements.all() {
					if c := elementChain(&e); c != "" {
						dropChain[c]++
					}
				}
				continue
			}
			for i := range dels {
				if c := elementChain(&dels[i]); c != "" {
					dropChain[c]++
				}
			}
		}
		kept := false
		for name, ch := range changes {
			if ch == chainGone && have.chainRefs[name] > dropChain[name] {
				delete(changes, name)
				kept = true
			}
		}
		for name, sc := range setChanges {
			if sc.gone && have.setRefs[name] > dropSet[name] {
				delete(setChanges, name)
				kept = true
			}
		}
		if !kept {
			return
		}
	}
}

// plan computes the transaction that turns p.have into p.want. The first
// invalid object stops it with an error naming the object; then nothing may
// be sent.
func (p *planner) plan() (*planned, error) {
	have, want := p.have, p.want
	out := &planned{
		tx:      &Transaction{Family: want.Family, Table: want.Name},
		digests: map[string]digest{},
		fresh:   map[string]bool{},
	}

	// Chains: classify every desired and every programmed chain, or with
	// a change log only those that changed since the last commit (the
	// others are the objects the kernel holds).
	changes := map[string]chainChange{}
	classify := func(name string, wc *Chain) {
		hs := have.chains[name]
		switch {
		case wc == nil:
			if hs != nil {
				changes[name] = chainGone
			}
		case hs == nil:
			changes[name] = chainNew
		case !hookEqual(hs.base, wc.Base):
			changes[name] = chainRecreate
		case hs.chain == wc && baseEqual(hs.base, wc.Base):
			// unchanged: the same immutable object
		case hs.chain != nil && p.sameRules(hs, wc, out):
			if !baseEqual(hs.base, wc.Base) {
				changes[name] = chainPolicy
			} else if hs.chain != wc {
				out.same = append(out.same, wc)
			}
		case hs.chain == nil && hs.digest != (digest{}) && baseEqual(hs.base, wc.Base) && chainDigest(wc) == hs.digest:
			// Known by its digest only (a record, see Table.Trust):
			// the kernel holds these rules already.
			out.same = append(out.same, wc)
		default:
			changes[name] = chainRewrite
		}
	}
	if log := p.changed; log != nil && !log.all {
		for name := range log.chains {
			classify(name, want.chains[name])
		}
	} else {
		kept := 0 // desired chains that the kernel has
		for name, wc := range want.chains {
			if have.chains[name] != nil {
				kept++
			}
			classify(name, wc)
		}
		// Only if the kernel has chains we do not want: at 20,000 chains
		// the scan costs a millisecond an Apply.
		if kept < len(have.chains) {
			for name := range have.chains {
				if want.chains[name] == nil {
					changes[name] = chainGone
				}
			}
		}
	}

	// Sets: new, recreated (definition changed or unknown), deleted, or an
	// element delta.
	setChanges := map[string]*setChange{}
	// compareSet records what set name needs; keys, when not nil, are the
	// only element keys that may differ from the kernel's.
	compareSet := func(name string, keys map[string]struct{}) {
		ws, hs := want.sets[name], have.sets[name]
		switch {
		case ws == nil:
			if hs != nil {
				setChanges[name] = &setChange{gone: true}
			}
		case hs == nil, hs.def == nil || !setDefEqual(hs.def, ws):
			setChanges[name] = &setChange{recreate: true}
		case keys != nil:
			var sc setChange
			for k := range keys {
				we, wok := ws.Elements[k]
				he, hok := hs.elements.get(k)
				switch {
				case wok && hok && elementEqual(&he, &we):
				case wok:
					if hok {
						sc.dels = append(sc.dels, he) // delete + add, as below
					}
					sc.adds = append(sc.adds, we)
				case hok:
					sc.dels = append(sc.dels, he)
				}
			}
			if len(sc.adds)+len(sc.dels) > 0 {
				setChanges[name] = &sc
			}
		default:
			var sc setChange
			found := 0
			for k, we := range ws.Elements {
				he, ok := hs.elements.get(k)
				if ok {
					found++
				}
				if ok && elementEqual(&he, &we) {
					continue
				}
				if ok {
					// A changed value is delete + add: re-adding a key with
					// another verdict is EEXIST (nft_add_set_elem in the
					// kernel's nf_tables_api.c).
					sc.dels = append(sc.dels, he)
				}
				sc.adds = append(sc.adds, we)
			}
			if found < hs.elements.len() {
				for k, he := range hs.elements.all() {
					if _, ok := ws.Elements[k]; !ok {
						sc.dels = append(sc.dels, he)
					}
				}
			}
			if len(sc.adds)+len(sc.dels) > 0 {
				setChanges[name] = &sc
			}
		}
	}
	if log := p.changed; log != nil && !log.all {
		for name := range log.sets {
			compareSet(name, nil)
		}
		for name, keys := range log.elements {
			if _, whole := log.sets[name]; !whole {
				compareSet(name, keys)
			}
		}
	} else {
		for name := range want.sets {
			compareSet(name, nil)
		}
		for name := range have.sets {
			if want.sets[name] == nil {
				compareSet(name, nil)
			}
		}
	}

	if p.partial {
		p.keepReferenced(changes, setChanges, func(sc *setChange) ([]Element, bool) { return sc.dels, sc.gone })
	}

	// A set that is deleted (for good or to be recreated) takes the rules
	// that use it along: those rules must be gone from the kernel before the
	// set goes, so chains that still use it are rewritten even when their
	// rules did not change.
	var recreatedUsed []string
	for name, sc := range setChanges {
		// Only for recreated sets: users of a set that goes for good must
		// change anyway, or validation and checkDeletions report them.
		if sc.recreate && have.sets[name] != nil && have.setRefs[name] > 0 {
			recreatedUsed = append(recreatedUsed, name)
		}
	}
	if len(recreatedUsed) > 0 {
		used := map[string]bool{}
		for _, n := range recreatedUsed {
			used[n] = true
		}
		for name, hs := range have.chains {
			if hs.chain == nil || changes[name] != chainSame && changes[name] != chainPolicy {
				continue
			}
			hit := false
			chainRefsOf(hs.chain, func(string) {}, func(s string) {
				if used[s] {
					hit = true
				}
			})
			if hit {
				changes[name] = chainRewrite
			}
		}
	}

	// Validate what is added or changed, and check that what is deleted
	// loses every reference in this transaction.
	if err := p.validate(changes, sortedKeys(setChanges), func(name string) (adds, dels []Element, recreate bool) {
		sc := setChanges[name]
		if sc == nil {
			return nil, nil, false
		}
		return sc.adds, sc.dels, sc.recreate
	}); err != nil {
		return nil, err
	}
	if err := p.checkDeletions(changes, func(name string) (dels []Element, gone bool) {
		sc := setChanges[name]
		if sc == nil {
			return nil, false
		}
		return sc.dels, sc.gone || sc.recreate
	}); err != nil {
		return nil, err
	}

	chainNames := sortedKeys(changes)
	setNames := sortedKeys(setChanges)
	ops := &out.tx.Ops
	add := func(op Op) { *ops = append(*ops, op) }

	// 0. The table.
	if !have.table {
		add(Op{Kind: OpAddTable})
	}
	// 1. Flush every chain whose rules go: rewritten, and deleted ones that
	// may hold references (their rules would otherwise keep the chains and
	// sets they use busy until the chain itself is deleted at the end).
	for _, name := range chainNames {
		switch changes[name] {
		case chainRewrite:
			add(Op{Kind: OpFlushChain, Name: name})
		case chainGone:
			if hs := have.chains[name]; hs.chain == nil || len(hs.chain.Rules) > 0 {
				add(Op{Kind: OpFlushChain, Name: name})
			}
		}
	}
	// 2. Element deletes: before the chains they point at are deleted, and
	// before the adds of a changed key.
	for _, name := range setNames {
		if sc := setChanges[name]; len(sc.dels) > 0 && !sc.recreate && !sc.gone {
			sortElementsByKey(sc.dels)
			add(Op{Kind: OpDeleteElements, Name: name, Set: want.sets[name], Elements: sc.dels})
		}
	}
	// 3. Deletes that make room: chains whose hook changes (a base chain
	// cannot be jumped to, so nothing refers to it), then sets that go or
	// change definition (their users were flushed in 1).
	for _, name := range chainNames {
		if changes[name] == chainRecreate {
			add(Op{Kind: OpDeleteChain, Name: name})
		}
	}
	for _, name := range setNames {
		sc := setChanges[name]
		if have.sets[name] != nil && (sc.gone || sc.recreate) {
			s := have.sets[name].def
			if s == nil {
				s = want.sets[name]
			}
			add(Op{Kind: OpDeleteSet, Name: name, Set: s})
			if sc.gone {
				out.goneSets = append(out.goneSets, name)
			}
		}
	}
	// 4. New chains, empty, so that rules and elements can refer to them
	// whatever the order; policy updates. Base chains first: the kernel
	// lists chains in creation order, and Model.PrintOrder puts base chains
	// first, so a cold start lists as Model.String prints.
	for _, base := range []bool{true, false} {
		for _, name := range chainNames {
			wc := want.chains[name]
			if wc == nil || (wc.Base != nil) != base {
				continue
			}
			switch changes[name] {
			case chainNew, chainRecreate:
				add(Op{Kind: OpAddChain, Name: name, Chain: wc})
			case chainPolicy:
				add(Op{Kind: OpAddChain, Name: name, Chain: wc, Policy: true})
			case chainRewrite:
				if hs := have.chains[name]; !baseEqual(hs.base, wc.Base) {
					add(Op{Kind: OpAddChain, Name: name, Chain: wc, Policy: true})
				}
			}
		}
	}
	// 5. New and recreated sets, with all their elements (which may jump to
	// the chains of 4).
	for _, name := range setNames {
		if sc := setChanges[name]; sc.recreate {
			ws := want.sets[name]
			es := make([]Element, 0, len(ws.Elements))
			for _, e := range ws.Elements {
				es = append(es, e)
			}
			sortElementsByKey(es)
			add(Op{Kind: OpAddSet, Name: name, Set: ws, Elements: es})
			out.sets = append(out.sets, ws)
			if have.sets[name] == nil {
				out.fresh["set "+name] = true
			} else {
				out.replaces = true
			}
		}
	}
	// 6. Rules of new and changed chains: they may use the sets of 5 and
	// jump to the chains of 4.
	for _, name := range chainNames {
		switch changes[name] {
		case chainNew, chainRecreate, chainRewrite:
			wc := want.chains[name]
			if len(wc.Rules) > 0 {
				add(Op{Kind: OpAddRules, Name: name, Chain: wc})
			}
		}
		switch changes[name] {
		case chainNew, chainRecreate, chainRewrite, chainPolicy:
			out.chains = append(out.chains, want.chains[name])
		}
		switch changes[name] {
		case chainNew:
			if want.chains[name].Base == nil {
				out.fresh["chain "+name] = true
			} else {
				out.fresh["base "+name] = true
			}
		case chainRecreate:
			out.replaces = true
		}
	}
	// 7. Element adds.
	for _, name := range setNames {
		if sc := setChanges[name]; len(sc.adds) > 0 && !sc.recreate {
			sortElementsByKey(sc.adds)
			add(Op{Kind: OpAddElements, Name: name, Set: want.sets[name], Elements: sc.adds})
		}
	}
	// 8. Chains nothing refers to any more.
	for _, name := range chainNames {
		if changes[name] == chainGone {
			add(Op{Kind: OpDeleteChain, Name: name})
			out.gone = append(out.gone, name)
		}
	}
	return out, nil
}

// sameRules says whether the kernel's chain hs holds exactly wc's rules,
// comparing digests when the objects differ (a manager may re-render an
// unchanged chain as a new object).
func (p *planner) sameRules(hs *chainState, wc *Chain, out *planned) bool {
	if hs.chain == wc {
		return true
	}
	if len(hs.chain.Rules) != len(wc.Rules) {
		return false
	}
	if hs.digest == (digest{}) {
		hs.digest = chainDigest(hs.chain)
	}
	d := chainDigest(wc)
	out.digests[wc.Name] = d
	return d == hs.digest
}

// validate checks every chain, set and element the transaction adds.
func (p *planner) validate(changes map[string]chainChange, setNames []string, setDelta func(string) (adds, dels []Element, recreate bool)) error {
	want := p.want
	if p.v == nil {
		return nil
	}
	for _, name := range sortedKeys(changes) {
		switch changes[name] {
		case chainNew, chainRewrite, chainRecreate, chainPolicy:
			if err := p.v.chain(want, want.chains[name]); err != nil {
				return err
			}
		}
	}
	for _, name := range setNames {
		s := want.sets[name]
		if s == nil {
			continue // deleted: checkDeletions
		}
		adds, dels, recreate := setDelta(name)
		if recreate {
			// The definition and every element.
			if err := p.v.set(want, s); err != nil {
				return err
			}
			continue
		}
		sortElementsByKey(adds)
		for i := range adds {
			e := &adds[i]
			if err := p.v.element(want, s, e); err != nil {
				return err
			}
		}
		if s.Interval && len(adds) > 0 {
			hs := p.have.sets[name]
			if err := p.v.additions(s, adds, hs.held(s, dels)); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkDeletions makes sure that every chain and set the transaction deletes
// loses all its references within the transaction: the references the state
// counts minus those that go (rules of flushed or deleted chains, deleted
// elements, elements of deleted sets) must be zero. Otherwise an unchanged
// chain or element still uses it, and the kernel would refuse the whole
// batch with EBUSY; we name the user instead.
func (p *planner) checkDeletions(changes map[string]chainChange, setDelta func(string) ([]Element, bool)) error {
	have, want := p.have, p.want
	goneChains := map[string]bool{}
	for name, ch := range changes {
		if ch == chainGone || ch == chainRecreate {
			goneChains[name] = true
		}
	}
	goneSets := map[string]bool{}
	for name := range have.sets {
		if _, gone := setDelta(name); gone {
			goneSets[name] = true
		}
	}
	if len(goneChains) == 0 && len(goneSets) == 0 {
		return nil
	}
	dropChain := map[string]int{}
	dropSet := map[string]int{}
	for name, ch := range changes {
		if ch == chainSame || ch == chainPolicy || ch == chainNew {
			continue
		}
		if hs := have.chains[name]; hs.chain != nil {
			chainRefsOf(hs.chain, func(c string) { dropChain[c]++ }, func(s string) { dropSet[s]++ })
		}
	}
	for name, hs := range have.sets {
		dels, gone := setDelta(name)
		if gone {
			for _, e := range hs.elements.all() {
				if c := elementChain(&e); c != "" {
					dropChain[c]++
				}
			}
			continue
		}
		for i := range dels {
			if c := elementChain(&dels[i]); c != "" {
				dropChain[c]++
			}
		}
	}
	for _, name := range sortedKeys(goneChains) {
		if have.chainRefs[name] > dropChain[name] {
			return fmt.Errorf("chain %q: %s but %s still jumps to it", name, deletionWord(changes[name]), p.chainUser(name, changes, setDelta))
		}
	}
	for _, name := range sortedKeys(goneSets) {
		if have.setRefs[name] > dropSet[name] {
			return fmt.Errorf("%s %q: deleted but %s still uses it", setNoun(have.sets[name].def), name, p.setUser(name, changes))
		}
	}
	_ = want
	return nil
}

func deletionWord(c chainChange) string {
	if c == chainRecreate {
		return "becomes a base chain or changes hook"
	}
	return "deleted"
}

// chainUser names a kept chain or element that still refers to chain target
// (error path only: it scans the table).
func (p *planner) chainUser(target string, changes map[string]chainChange, setDelta func(string) ([]Element, bool)) string {
	for _, name := range sortedKeys(p.have.chains) {
		hs := p.have.chains[name]
		if hs.chain == nil {
			continue
		}
		if ch := changes[name]; ch != chainSame && ch != chainPolicy {
			continue
		}
		hit := false
		chainRefsOf(hs.chain, func(c string) {
			if c == target {
				hit = true
			}
		}, func(string) {})
		if hit {
			return fmt.Sprintf("chain %q", name)
		}
	}
	for _, name := range sortedKeys(p.have.sets) {
		hs := p.have.sets[name]
		if _, gone := setDelta(name); gone {
			continue
		}
		for _, k := range hs.elements.sortedKeys() {
			e, _ := hs.elements.get(k)
			if elementChain(&e) == target {
				if ws := p.want.sets[name]; ws != nil {
					if we, ok := ws.Elements[k]; ok && elementEqual(&we, &e) {
						return fmt.Sprintf("%s %q element %q", setNoun(ws), name, k)
					}
				}
			}
		}
	}
	return "something"
}

func (p *planner) setUser(target string, changes map[string]chainChange) string {
	for _, name := range sortedKeys(p.have.chains) {
		hs := p.have.chains[name]
		if hs.chain == nil {
			continue
		}
		if ch := changes[name]; ch != chainSame && ch != chainPolicy {
			continue
		}
		hit := false
		chainRefsOf(hs.chain, func(string) {}, func(s string) {
			if s == target {
				hit = true
			}
		})
		if hit {
			return fmt.Sprintf("chain %q", name)
		}
	}
	return "something"
}

func sortElementsByKey(es []Element) {
	sort.Slice(es, func(i, j int) bool { return es[i].Key < es[j].Key })
}

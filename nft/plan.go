package nft

// Planning: the pure step that turns (what the kernel holds, what we want)
// into the ordered operations of one transaction. No I/O happens here, so the
// order and the size of every transaction is unit-testable without a kernel.

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"sort"
	"strings"
)

// OpKind is the kind of one operation of a transaction.
type OpKind uint8

// The operations a transaction is made of, in the nft command they mirror.
const (
	// OpAddTable is `add table`: idempotent, and with flags 0 it also wakes a
	// table someone made dormant.
	OpAddTable OpKind = iota + 1
	// OpFlushChain is `flush chain`: removes a chain's rules, and with them
	// their references to other chains and sets.
	OpFlushChain
	// OpDeleteElements is `delete element`.
	OpDeleteElements
	// OpDeleteChain is `delete chain`. The kernel refuses (EBUSY) while a
	// rule or map element still refers to the chain, so references are
	// removed earlier in the same transaction.
	OpDeleteChain
	// OpDeleteSet is `delete set` / `delete map` (EBUSY while a rule refers
	// to it).
	OpDeleteSet
	// OpAddChain is `add chain`; on an existing base chain it updates the
	// policy in place.
	OpAddChain
	// OpAddSet is `add set` / `add map` followed by its elements.
	OpAddSet
	// OpAddRules is one `add rule` per rule of Chain, appended in order.
	OpAddRules
	// OpAddElements is `add element`.
	OpAddElements
	// OpDeleteTable is `delete table`.
	OpDeleteTable
)

var opKindNames = map[OpKind]string{
	OpAddTable:       "add table",
	OpFlushChain:     "flush chain",
	OpDeleteElements: "delete element",
	OpDeleteChain:    "delete chain",
	OpDeleteSet:      "delete set",
	OpAddChain:       "add chain",
	OpAddSet:         "add set",
	OpAddRules:       "add rule",
	OpAddElements:    "add element",
	OpDeleteTable:    "delete table",
}

// String returns the nft command the kind mirrors.
func (k OpKind) String() string {
	if s, ok := opKindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("OpKind(%d)", k)
}

// Op is one operation of a transaction.
type Op struct {
	Kind OpKind
	// Name is the chain or set the operation is about (empty for table
	// operations).
	Name string
	// Chain is the chain to add (OpAddChain: its name and hook) or whose
	// rules are appended (OpAddRules).
	Chain *Chain
	// Set is the set to add (OpAddSet) or whose elements change.
	Set *Set
	// Elements are added or deleted (OpAddSet, OpAddElements,
	// OpDeleteElements), sorted by key.
	Elements []Element
	// Policy marks an OpAddChain of a base chain that exists already: it
	// changes the policy in place.
	Policy bool
}

// NumOperations counts the objects the op adds or removes: one per rule and
// per element, one for anything else.
func (op *Op) NumOperations() int {
	switch op.Kind {
	case OpAddRules:
		return len(op.Chain.Rules)
	case OpAddElements, OpDeleteElements:
		return len(op.Elements)
	case OpAddSet:
		return 1 + len(op.Elements)
	}
	return 1
}

// Transaction is the record of one kernel transaction: what was planned and,
// once sent, how big the batch was. Table.LastTransaction returns the last
// one, for tests (knftables' Fake.LastTransaction).
type Transaction struct {
	// Family and Table name the table the transaction is for.
	Family Family
	Table  string
	// Ops are the operations in batch order.
	Ops []Op
	// Messages is the number of netlink messages in the batch, without the
	// batch begin and end markers; 0 when nothing was sent.
	Messages int
	// Bytes is the size of the batch on the wire.
	Bytes int
	// Batches is the number of kernel transactions the operations went in:
	// 1, or a few more for a large cold start, whose new chains are
	// prepared in batches before one last batch publishes them (see
	// Table.Apply).
	Batches int
	// Gen is the ruleset generation id the transaction produced, when known.
	Gen uint32
}

// NumOperations returns the number of objects the transaction adds or
// removes (see Op.NumOperations). Zero means nothing was sent.
func (tx *Transaction) NumOperations() int {
	n := 0
	for i := range tx.Ops {
		n += tx.Ops[i].NumOperations()
	}
	return n
}

// String prints the transaction as nft commands, one per line (rules by
// their comment only; see Model.String for the full table text).
func (tx *Transaction) String() string {
	var b strings.Builder
	tbl := string(tx.Family) + " " + tx.Table
	for i := range tx.Ops {
		op := &tx.Ops[i]
		switch op.Kind {
		case OpAddTable, OpDeleteTable:
			fmt.Fprintf(&b, "%s %s\n", op.Kind, tbl)
		case OpAddChain:
			if bc := op.Chain.Base; bc != nil {
				fmt.Fprintf(&b, "add chain %s %s { type %s hook %s priority %d; policy %s; }\n",
					tbl, op.Name, bc.Type, bc.Hook, bc.Priority, bc.Policy)
			} else {
				fmt.Fprintf(&b, "add chain %s %s\n", tbl, op.Name)
			}
		case OpFlushChain, OpDeleteChain:
			fmt.Fprintf(&b, "%s %s %s\n", op.Kind, tbl, op.Name)
		case OpAddRules:
			for j, r := range op.Chain.Rules {
				fmt.Fprintf(&b, "add rule %s %s # rule %d: %q\n", tbl, op.Name, j+1, r.Comment)
			}
		case OpAddSet:
			fmt.Fprintf(&b, "add %s %s %s { type %s; }\n", setNoun(op.Set), tbl, op.Name, setTypeString(op.Set))
			if len(op.Elements) > 0 {
				fmt.Fprintf(&b, "add element %s %s { %s }\n", tbl, op.Name, elementList(op.Elements))
			}
		case OpDeleteSet:
			fmt.Fprintf(&b, "delete %s %s %s\n", setNoun(op.Set), tbl, op.Name)
		case OpAddElements, OpDeleteElements:
			fmt.Fprintf(&b, "%s %s %s { %s }\n", op.Kind, tbl, op.Name, elementList(op.Elements))
		}
	}
	return b.String()
}

func setNoun(s *Set) string {
	if s != nil && s.Data != DataNone {
		return "map"
	}
	return "set"
}

func setTypeString(s *Set) string {
	k := make([]string, len(s.Key))
	for i, t := range s.Key {
		k[i] = string(t)
	}
	t := strings.Join(k, " . ")
	if s.Data != DataNone {
		t += " : " + string(s.Data)
	}
	if s.Interval {
		t += "; flags interval"
	}
	return t
}

func elementList(es []Element) string {
	parts := make([]string, len(es))
	for i, e := range es {
		switch {
		case e.Verdict != nil && e.Verdict.Chain != "":
			parts[i] = fmt.Sprintf("%s : %s %s", e.Key, e.Verdict.Kind, e.Verdict.Chain)
		case e.Verdict != nil:
			parts[i] = fmt.Sprintf("%s : %s", e.Key, e.Verdict.Kind)
		default:
			parts[i] = e.Key
		}
	}
	return strings.Join(parts, ", ")
}

// Summary says in a few words what the transaction does, for errors and
// logs: "3 chains added, 1 rewritten, 2 elements added to map filter-from-wl".
func (tx *Transaction) Summary() string {
	adds, dels, rewrites := map[string]bool{}, map[string]bool{}, map[string]bool{}
	var policies, setsAdded, setsDeleted int
	for i := range tx.Ops {
		op := &tx.Ops[i]
		switch op.Kind {
		case OpAddChain:
			if op.Policy {
				policies++
			} else {
				adds[op.Name] = true
			}
		case OpDeleteChain:
			dels[op.Name] = true
		case OpFlushChain, OpAddRules:
			rewrites[op.Name] = true
		case OpAddSet:
			setsAdded++
		case OpDeleteSet:
			setsDeleted++
		}
	}
	var added, recreated, deleted, rewritten int
	for name := range adds {
		if dels[name] {
			recreated++ // a hook change
		} else {
			added++
		}
	}
	for name := range dels {
		if !adds[name] {
			deleted++ // flushed first only to drop its references
		}
	}
	for name := range rewrites {
		if !adds[name] && !dels[name] {
			rewritten++
		}
	}
	var parts []string
	count := func(n int, one, many string) {
		switch {
		case n == 1:
			parts = append(parts, "1 "+one)
		case n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", n, many))
		}
	}
	count(added, "chain added", "chains added")
	count(recreated, "chain recreated", "chains recreated")
	count(rewritten, "rewritten", "rewritten")
	count(deleted, "deleted", "deleted")
	count(policies, "policy changed", "policies changed")
	count(setsAdded, "set added", "sets added")
	count(setsDeleted, "set deleted", "sets deleted")
	for i := range tx.Ops {
		op := &tx.Ops[i]
		switch op.Kind {
		case OpAddElements:
			count(len(op.Elements), "element added to "+setNoun(op.Set)+" "+op.Name, "elements added to "+setNoun(op.Set)+" "+op.Name)
		case OpDeleteElements:
			count(len(op.Elements), "element deleted from "+setNoun(op.Set)+" "+op.Name, "elements deleted from "+setNoun(op.Set)+" "+op.Name)
		}
	}
	if len(parts) == 0 {
		return "no changes"
	}
	return strings.Join(parts, ", ")
}

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
	elements map[string]Element
	// parsed caches the parsed keys of elements (of an interval set, for
	// the overlap check of additions), so that adding one element to a
	// large set does not parse all the others every time.
	parsed map[string][]keyField
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

// digest identifies the rules of a chain: 128 bits of maphash over the rule
// hashes (the ones kept in rule userdata), in order. Comparing digests lets
// a resync compare 20,000 chains without keeping 240,000 hash strings.
// Digests never leave the process, so per-process random seeds do (and keep
// anyone from crafting collisions).
type digest [16]byte

var digestSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

type digester struct {
	h [2]maphash.Hash
	n int
}

func newDigester() *digester {
	d := &digester{}
	d.h[0].SetSeed(digestSeeds[0])
	d.h[1].SetSeed(digestSeeds[1])
	return d
}

func (d *digester) add(ruleHash string) {
	for i := range d.h {
		d.h[i].WriteString(ruleHash)
		d.h[i].WriteByte(0)
	}
	d.n++
}

func (d *digester) sum() digest {
	var out digest
	// The rule count goes in last, so that no two lists collide by
	// splitting differently.
	for i := range d.h {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(d.n))
		d.h[i].Write(n[:])
		binary.LittleEndian.PutUint64(out[8*i:], d.h[i].Sum64())
	}
	return out
}

// chainDigest computes c's digest from its rules.
func chainDigest(c *Chain) digest {
	d := newDigester()
	for _, r := range c.Rules {
		d.add(ruleHash(r))
	}
	return d.sum()
}

// refs calls fn for every chain (jump/goto) and set a rule refers to.
func ruleRefs(r *Rule, chain func(string), set func(string)) {
	for _, m := range r.Match {
		switch m := m.(type) {
		case Addr:
			if m.Set != "" {
				set(m.Set)
			}
		case *Addr:
			if m.Set != "" {
				set(m.Set)
			}
		case Port:
			if m.Set != "" {
				set(m.Set)
			}
		case *Port:
			if m.Set != "" {
				set(m.Set)
			}
		case Lookup:
			set(m.Set)
		case *Lookup:
			set(m.Set)
		}
	}
	switch a := r.Action.(type) {
	case Verdict:
		if a.Kind == Jump || a.Kind == Goto {
			chain(a.Chain)
		}
	case *Verdict:
		if a.Kind == Jump || a.Kind == Goto {
			chain(a.Chain)
		}
	case VMap:
		set(a.Map)
	case *VMap:
		set(a.Map)
	case SetMarkFromMap:
		set(a.Map)
	case *SetMarkFromMap:
		set(a.Map)
	}
}

// chainRefsOf calls fn for each reference the rules of c make.
func chainRefsOf(c *Chain, chain func(string), set func(string)) {
	for _, r := range c.Rules {
		ruleRefs(r, chain, set)
	}
}

// liveChains returns the chains of st that packets can reach: the base
// chains and every chain reachable from them through jumps, gotos and
// verdict maps, as far as st knows. unknown is true when it cannot tell (a
// reachable chain with rules it does not know, or a reachable set that is
// not ours): then any chain may be live.
func (st *state) liveChains() (live map[string]bool, unknown bool) {
	live = map[string]bool{}
	seenSets := map[string]bool{}
	var queue []string
	reach := func(name string) {
		if !live[name] {
			live[name] = true
			queue = append(queue, name)
		}
	}
	for name, cs := range st.chains {
		if cs.base != nil {
			reach(name)
		}
	}
	for len(queue) > 0 {
		name := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		cs := st.chains[name]
		switch {
		case cs == nil, cs.chain == nil && cs.empty:
			continue
		case cs.chain == nil:
			return nil, true
		}
		chainRefsOf(cs.chain, reach, func(set string) {
			if seenSets[set] || unknown {
				return
			}
			seenSets[set] = true
			ss := st.sets[set]
			switch {
			case ss == nil:
			case ss.def == nil:
				unknown = true
			case ss.def.Data == DataVerdict:
				for _, e := range ss.elements {
					if c := elementChain(&e); c != "" {
						reach(c)
					}
				}
			}
		})
		if unknown {
			return nil, true
		}
	}
	return live, false
}

// elementChain returns the chain a map element jumps or goes to, or "".
func elementChain(e *Element) string {
	if e.Verdict != nil && (e.Verdict.Kind == Jump || e.Verdict.Kind == Goto) {
		return e.Verdict.Chain
	}
	return ""
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

// validator checks the objects a transaction adds; the vocabulary provides
// the checks. Tests replace it to push invalid objects at the kernel.
type validator interface {
	chain(m *Model, c *Chain) error
	set(m *Model, s *Set) error
	element(m *Model, s *Set, e *Element) error
	// additions checks the elements added to an existing interval set
	// against its others (checkAddedOverlaps).
	additions(s *Set, adds []Element, fields func(key string) ([]keyField, error)) error
}

// vocabularyValidator is the validator of the vocabulary (validate.go).
type vocabularyValidator struct{}

func (vocabularyValidator) chain(m *Model, c *Chain) error { return validateChain(m, c) }
func (vocabularyValidator) set(m *Model, s *Set) error     { return validateSet(m, s) }
func (vocabularyValidator) element(m *Model, s *Set, e *Element) error {
	return validateElement(m, s, *e)
}
func (vocabularyValidator) additions(s *Set, adds []Element, fields func(string) ([]keyField, error)) error {
	if err := checkAddedOverlaps(s, adds, fields); err != nil {
		return fmt.Errorf("set %q: %w", s.Name, err)
	}
	return nil
}

// planner compares the state the kernel holds with the desired model.
type planner struct {
	have *state
	want *Model
	v    validator
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

	// Chains: classify every desired and every programmed chain.
	changes := map[string]chainChange{}
	kept := 0 // desired chains that the kernel has
	for name, wc := range want.chains {
		hs := have.chains[name]
		if hs != nil {
			kept++
		}
		switch {
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
		default:
			changes[name] = chainRewrite
		}
	}
	// Only if the kernel has chains we do not want: at 20,000 chains the
	// scan costs a millisecond an Apply.
	if kept < len(have.chains) {
		for name := range have.chains {
			if want.chains[name] == nil {
				changes[name] = chainGone
			}
		}
	}

	// Sets: new, recreated (definition changed or unknown), deleted, or an
	// element delta.
	type setChange struct {
		recreate bool
		gone     bool
		adds     []Element
		dels     []Element
	}
	setChanges := map[string]*setChange{}
	for name, ws := range want.sets {
		hs := have.sets[name]
		switch {
		case hs == nil:
			setChanges[name] = &setChange{recreate: true}
		case hs.def == nil || !setDefEqual(hs.def, ws):
			setChanges[name] = &setChange{recreate: true}
		default:
			var sc setChange
			found := 0
			for k, we := range ws.Elements {
				he, ok := hs.elements[k]
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
			if found < len(hs.elements) {
				for k, he := range hs.elements {
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
	for name := range have.sets {
		if want.sets[name] == nil {
			setChanges[name] = &setChange{gone: true}
		}
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
	if err := p.validate(changes, func(name string) (adds []Element, recreate bool) {
		sc := setChanges[name]
		if sc == nil {
			return nil, false
		}
		return sc.adds, sc.recreate
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
func (p *planner) validate(changes map[string]chainChange, setDelta func(string) ([]Element, bool)) error {
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
	for _, name := range want.SetNames() {
		s := want.sets[name]
		adds, recreate := setDelta(name)
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
			if err := p.v.additions(s, adds, func(key string) ([]keyField, error) { return hs.keyFields(s, key) }); err != nil {
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
			for k := range hs.elements {
				e := hs.elements[k]
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
		for _, k := range sortedKeys(hs.elements) {
			e := hs.elements[k]
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
		st.sets[s.Name] = &setState{def: setDef(s), elements: es}
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
				delete(hs.elements, e.Key)
				delete(hs.parsed, e.Key)
			}
		case OpAddElements:
			hs := st.sets[op.Name]
			for _, e := range op.Elements {
				if c := elementChain(&e); c != "" {
					st.chainRefs[c]++
				}
				hs.elements[e.Key] = e
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
		for _, e := range ss.elements {
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
	for _, e := range hs.elements {
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
		s.Elements = make(map[string]Element, len(ss.elements))
		for k, e := range ss.elements {
			s.Elements[k] = e
		}
		m.sets[n] = s
	}
	return m
}

package nft

import (
	"context"
	"errors"
	"fmt"
	"maps"
)

// A record of the last apply: what a Table knows the kernel holds, kept
// across processes. A one-shot `nftep apply` writes it into the run
// directory after its commit; the next one, if the ruleset generation has
// not moved since, trusts it instead of reading the table back and
// computing the whole node: it renders only the objects that changed (and
// those they depend on) into a partial desired model, and the plan, from
// the model's change log, touches only those. See Trust and partial.

// TableRecord is what a Table knew its kernel table held at generation Gen.
type TableRecord struct {
	Family Family
	Name   string
	// Gen is the ruleset generation at which the kernel held this.
	Gen    uint32
	Chains []ChainRecord
	Sets   []SetRecord
	// ChainRefs and SetRefs count the references to each chain (jumps,
	// gotos, verdict map elements) and set (rules) in the whole table.
	ChainRefs, SetRefs map[string]int

	// refsTaken: a Table trusted this record and owns its reference
	// counts now (see Trust).
	refsTaken bool
	// prepared is what Trust makes of the record, built ahead by Prepare.
	prepared *state
}

// ChainRecord is one chain: its hook (nil for a regular chain) and the
// digest of its rules.
type ChainRecord struct {
	Name   string
	Base   *BaseChain
	Digest [16]byte
	Empty  bool
}

// SetRecord is one set or map with its elements.
type SetRecord struct {
	Def      Set
	Elements []Element
}

// ErrNoRecord is returned by Record when the Table does not know what the
// kernel holds (before the first commit, after a failure, or with chains
// whose content it could not match).
var ErrNoRecord = errors.New("the table's kernel state is not known")

// Record returns what the Table knows the kernel holds, for a later
// process's Trust. It fails with ErrNoRecord unless the last transaction
// committed with a known generation.
func (t *Table) Record() (*TableRecord, error) {
	if t.needResync || !t.genKnown || !t.have.table {
		return nil, ErrNoRecord
	}
	rec := &TableRecord{
		Family:    t.cfg.Family,
		Name:      t.cfg.Name,
		Gen:       t.gen,
		Chains:    make([]ChainRecord, 0, len(t.have.chains)),
		Sets:      make([]SetRecord, 0, len(t.have.sets)),
		ChainRefs: maps.Clone(t.have.chainRefs),
		SetRefs:   maps.Clone(t.have.setRefs),
	}
	// In map order: the record is read back into maps (Trust), and
	// sorting tens of thousands of names costs more than the rest.
	for name, cs := range t.have.chains {
		if cs.digest == (digest{}) && cs.chain == nil {
			return nil, fmt.Errorf("%w: chain %q", ErrNoRecord, name)
		}
		rec.Chains = append(rec.Chains, t.chainRecord(name, cs))
	}
	for name, ss := range t.have.sets {
		if ss.def == nil {
			return nil, fmt.Errorf("%w: set %q", ErrNoRecord, name)
		}
		sr := SetRecord{Def: *setDef(ss.def), Elements: make([]Element, 0, ss.elements.len())}
		for _, e := range ss.elements.all() {
			sr.Elements = append(sr.Elements, e)
		}
		rec.Sets = append(rec.Sets, sr)
	}
	return rec, nil
}

// chainRecord is the record of chain name as the Table has it (cs), its
// digest computed and kept if it was not known yet; cs.chain or cs.digest
// must be set.
func (t *Table) chainRecord(name string, cs *chainState) ChainRecord {
	if cs.digest == (digest{}) {
		cs.digest = chainDigest(cs.chain)
	}
	empty := cs.empty
	if cs.chain != nil {
		empty = len(cs.chain.Rules) == 0
	}
	return ChainRecord{Name: name, Base: cs.base, Digest: cs.digest, Empty: empty}
}

// RecordMismatch is Trust's error when the desired model is not part of
// what the record says the kernel holds: the record is not the one of this
// node's last apply, or the rendering changed. The caller computes the whole
// node instead.
type RecordMismatch struct{ What string }

func (e *RecordMismatch) Error() string { return "record of the last apply does not match: " + e.What }

// Trust makes the Table take rec as what the kernel holds, without reading
// it, and turns the Table partial: Desired() then holds only some of the
// table's objects, exactly as the kernel has them (checked here: every
// chain's digest, every set and element), and what changes from now on is
// planned from the change log alone, so the objects the model does not
// hold are left as they are. A chain the model drops is deleted only if
// nothing in the kernel refers to it any more after the transaction (see
// planner.partial); otherwise another, unrendered, object still uses it, as
// it would in the whole node's model, and it stays.
//
// A Table that trusts rec takes its reference counts (ChainRefs, SetRefs):
// rec cannot be trusted again.
//
// The kernel's ruleset generation must still be rec.Gen: any commit since,
// by anyone, may have changed the table, and then Trust refuses
// (RecordMismatch); the commit checks it again (see send). A partial Table
// never reads the kernel's table back: after a failed commit, Apply and
// Resync return ErrPartial, and the caller starts over with a whole model.
func (t *Table) Trust(ctx context.Context, rec *TableRecord) error {
	if rec.Family != t.cfg.Family || rec.Name != t.cfg.Name {
		return &RecordMismatch{What: fmt.Sprintf("record of table %s %s, not %s", rec.Family, rec.Name, t.describe())}
	}
	gen, err := t.tr.generation(ctx)
	if err != nil {
		return fmt.Errorf("table %s: %w", t.describe(), err)
	}
	if gen != rec.Gen {
		return &RecordMismatch{What: fmt.Sprintf("the ruleset generation moved from %d to %d since (a commit by anyone)", rec.Gen, gen)}
	}
	// The reference counts are taken, not copied (at 10,000 workloads,
	// 20,000 chains: a copy is megabytes of fresh memory for a one-shot
	// process); the checks below leave them as they are.
	if rec.refsTaken {
		return errors.New("a record's reference counts can be trusted once: read the record again")
	}
	// The state is taken too, prepared or not: the checks below fill it
	// in, so a Trust that fails leaves nothing to a later one.
	rec.Prepare()
	st := rec.prepared
	rec.prepared = nil
	st.chainRefs, st.setRefs = rec.ChainRefs, rec.SetRefs
	if st.chainRefs == nil {
		st.chainRefs = map[string]int{}
	}
	if st.setRefs == nil {
		st.setRefs = map[string]int{}
	}
	for name, wc := range t.desired.chains {
		cs := st.chains[name]
		switch {
		case cs == nil:
			return &RecordMismatch{What: fmt.Sprintf("chain %q is not in the record", name)}
		case !baseEqual(cs.base, wc.Base) || chainDigest(wc) != cs.digest:
			return &RecordMismatch{What: fmt.Sprintf("chain %q differs from the record", name)}
		}
		cs.chain = wc
	}
	for name, ws := range t.desired.sets {
		ss := st.sets[name]
		if ss == nil || !setDefEqual(ss.def, ws) {
			return &RecordMismatch{What: fmt.Sprintf("set %q differs from the record", name)}
		}
		for k, we := range ws.Elements {
			if he, ok := ss.elements.get(k); !ok || !elementEqual(&he, &we) {
				return &RecordMismatch{What: fmt.Sprintf("set %q element %q differs from the record", name, k)}
			}
		}
	}
	rec.refsTaken = true
	t.have = st
	t.gen, t.genKnown = rec.Gen, true
	t.needResync = false
	t.partial = true
	t.changes.reset()
	return nil
}

// Prepare builds what Trust makes of the record, the lookup of its chains
// and sets, so that a caller can have it built beside other work (at
// 10,000 workloads, 20,000 chains: milliseconds). Trust does it when it
// was not done. Prepare must not run concurrently with Trust, and copies
// of a prepared record share what it prepared (as they share its
// reference counts).
func (rec *TableRecord) Prepare() {
	if rec.prepared != nil {
		return
	}
	st := &state{
		table:  true,
		chains: make(map[string]*chainState, len(rec.Chains)),
		sets:   make(map[string]*setState, len(rec.Sets)),
	}
	cs := make([]chainState, len(rec.Chains)) // one allocation for all
	for i, c := range rec.Chains {
		cs[i] = chainState{base: c.Base, digest: c.Digest, empty: c.Empty}
		st.chains[c.Name] = &cs[i]
	}
	for i := range rec.Sets {
		sr := &rec.Sets[i]
		// The elements stay in the record's slice: see elementSet.
		st.sets[sr.Def.Name] = &setState{def: setDef(&sr.Def), elements: recordedElements(sr.Elements)}
	}
	rec.prepared = st
}

// ErrPartial is returned by a partial Table (see Trust) that would need to
// read the kernel's table back: its model does not hold the whole table,
// so it cannot repair it.
var ErrPartial = errors.New("a partial table cannot be read back and repaired: start over with the whole node")

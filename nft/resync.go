package nft

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// ResyncStats describes one resync.
type ResyncStats struct {
	// Skipped is true when the ruleset generation was still the one our
	// last commit produced: nobody changed any table since, so the table
	// was not read (pending changes of the model were still applied).
	Skipped bool
	// Reads is the number of times the table was read: a read is repeated
	// when the generation moved while it ran.
	Reads int
	// Inconsistent is true when the generation moved during each of the
	// reads (on a busy node any commit to any table moves it): the repair
	// was planned from the last read anyway, and the next resync reads
	// again.
	Inconsistent bool
	// Read is the time spent reading the table back.
	Read time.Duration
	// Rules is the number of rules the read found in the table.
	Rules int
	// Drift is what the kernel's table lacked or held in excess compared
	// with the desired model.
	Drift Drift
	// Apply is the repair transaction (with any pending model change).
	Apply ApplyStats
	// Total is the time of the whole resync.
	Total time.Duration
}

// Drift counts the differences a resync found between the kernel's table
// and the desired model (changes not yet applied count too).
type Drift struct {
	// TableMissing: the table did not exist, or someone made it dormant.
	TableMissing bool
	// Chains, sets and elements the model has and the kernel lacks
	// (Missing), has in another form (Differ: other rules, hook, definition
	// or value), or that the kernel has and the model does not (Extra).
	ChainsMissing, ChainsDiffer, ChainsExtra       int
	SetsMissing, SetsDiffer, SetsExtra             int
	ElementsMissing, ElementsDiffer, ElementsExtra int
}

// Any reports whether there is any difference.
func (d Drift) Any() bool { return d != Drift{} }

// String lists the non-zero counts: "2 chains differ, 1 extra element".
func (d Drift) String() string {
	var parts []string
	if d.TableMissing {
		parts = append(parts, "table missing")
	}
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(d.ChainsMissing, "chains missing")
	add(d.ChainsDiffer, "chains differ")
	add(d.ChainsExtra, "chains extra")
	add(d.SetsMissing, "sets missing")
	add(d.SetsDiffer, "sets differ")
	add(d.SetsExtra, "sets extra")
	add(d.ElementsMissing, "elements missing")
	add(d.ElementsDiffer, "elements differ")
	add(d.ElementsExtra, "elements extra")
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// maxReads bounds how often a resync re-reads a table whose ruleset keeps
// changing underneath it before it uses the last read.
const maxReads = 5

// Resync reads the table back from the kernel, compares it with the desired
// model and repairs every difference in one transaction: missing or changed
// chains are (re)written, missing elements added, and everything in our
// table that the model does not hold (chains, sets, elements, rules added by
// someone else) is removed. Other tables are never touched.
//
// The read is consistent: the ruleset generation is read before and after,
// and the read is repeated if it moved, up to maxReads times; if it moved
// every time (a busy node: any commit to any table moves it), the repair is
// planned from the last read anyway (ResyncStats.Inconsistent), and the
// next resync reads again. The read is skipped only if the
// generation is still one at which the table was known to hold what we
// programmed: the one a resync read at, or one our own commits produced
// from there, each directly on top of the previous known one. (Our commit
// being one past the generation read just before it is not enough: a
// foreign commit may have landed between our previous commit and that read.)
func (t *Table) Resync(ctx context.Context) (rs ResyncStats, err error) {
	start := time.Now()
	defer func() { rs.Total = time.Since(start) }()
	p := t.takePlan(true)
	if p != nil {
		// Planned earlier (Plan): that time counts too.
		start = start.Add(-p.took)
	} else if p, err = t.planResync(ctx); err != nil {
		return p.rs, err
	}
	rs = p.rs
	rs.Apply, err = t.execute(ctx, p.pl, p.plan)
	if err != nil && rs.Inconsistent {
		// execute set needResync: the next Apply (paced by the caller's
		// backoff) reads again; nothing is retried here.
		t.log.Info("the repair planned from an inconsistent read failed; the next apply reads the table again", "table", t.describe(), "error", err)
		err = fmt.Errorf("resync table %s: repair planned from a read the ruleset changed under: %w", t.describe(), err)
	}
	return rs, err
}

// planResync is the first half of Resync: the read of the table (or the
// check of the generation that makes it unnecessary) and the plan of the
// repair. The returned plan is never nil; on error, its rs says what the
// read did.
func (t *Table) planResync(ctx context.Context) (p *tablePlan, err error) {
	start := time.Now()
	p = &tablePlan{resync: true, version: t.desired.version}
	rs := &p.rs
	defer func() { p.took = time.Since(start) }()
	if t.partial {
		if !t.needResync && t.genKnown {
			if g, err := t.tr.generation(ctx); err == nil && g == t.gen {
				rs.Skipped = true
				planStart := time.Now()
				pl, err := (&planner{have: t.have, want: t.desired, v: t.v, changed: t.changes, partial: true}).plan()
				if err != nil {
					return p, fmt.Errorf("apply to table %s: %w", t.describe(), &invalidError{err})
				}
				p.pl, p.plan = pl, time.Since(planStart)
				return p, nil
			}
		}
		return p, fmt.Errorf("resync table %s: %w", t.describe(), ErrPartial)
	}

	var (
		kt         *kernelTable
		gen        uint32
		consistent bool
	)
	for rs.Reads < maxReads {
		g1, err := t.tr.generation(ctx)
		if err != nil {
			return p, fmt.Errorf("resync table %s: %w", t.describe(), err)
		}
		if rs.Reads == 0 && !t.needResync && t.genKnown && g1 == t.gen {
			rs.Skipped = true
			t.log.Debug("nftables resync: generation unchanged, table not read", "table", t.describe(), "generation", g1)
			planStart := time.Now()
			pl, err := (&planner{have: t.have, want: t.desired, v: t.v, changed: t.changes}).plan()
			if err != nil {
				return p, fmt.Errorf("apply to table %s: %w", t.describe(), &invalidError{err})
			}
			p.pl, p.plan = pl, time.Since(planStart)
			return p, nil
		}
		rs.Reads++
		readStart := time.Now()
		kt, err = t.tr.readTable(ctx, t.family, t.cfg.Name)
		interrupted := errors.Is(err, errInterrupted)
		if err == nil || interrupted && rs.Reads == maxReads {
			// The elements are most of a read: not worth reading for
			// an interrupted read that is repeated anyway.
			err = t.readElements(ctx, kt)
		}
		rs.Read += time.Since(readStart)
		if t.afterRead != nil {
			t.afterRead()
		}
		if err != nil && !errors.Is(err, errInterrupted) {
			return p, fmt.Errorf("resync table %s: %w", t.describe(), err)
		}
		g2, gerr := t.tr.generation(ctx)
		if gerr != nil {
			return p, fmt.Errorf("resync table %s: %w", t.describe(), gerr)
		}
		if !interrupted && g1 == g2 {
			gen, consistent = g1, true
			break
		}
	}
	rs.Rules = kt.rules
	// One debug line per resync that read: the daemon's benchmark
	// (dataplane BenchmarkDriverChangeCPU) counts read-backs with it.
	t.log.Debug("nftables table read back", "table", t.describe(), "reads", rs.Reads, "rules", rs.Rules, "read", rs.Read)

	have, drift := t.stateFromKernel(kt)
	rs.Drift = drift
	hadTable := t.have.table
	t.have = have
	// have holds what the read found, drift included: until a commit
	// repairs it, plans must compare everything, not only the model's
	// changes since the last commit.
	t.changes.all = true
	t.needResync = false
	if consistent {
		// have is what the kernel held at gen: the repair commit is
		// checked against it (see send).
		t.gen, t.genKnown = gen, true
	} else {
		// On a busy node the generation, global to the namespace, may
		// move during every read (any commit to any table moves it), and
		// failing here would fail every Apply. So the repair is planned
		// from the last read anyway. An inconsistent read can only make
		// a batch the kernel refuses as a whole (it deletes or flushes
		// something that is gone, or refers to something missing), or
		// leave drift behind (rules appended to a chain that already held
		// them, a change missed) that the next read repairs: the
		// generation stays unknown, so the next resync reads again.
		rs.Inconsistent = true
		t.genKnown = false
		t.log.Info("nftables ruleset changed during each read of the table; repairing from the last read", "table", t.describe(), "reads", rs.Reads)
	}
	// The process the kernel named for the last foreign commit, if Watch
	// saw one: who deleted or changed the table.
	by := []any{}
	if w := t.writer.Swap(nil); w != nil {
		by = append(by, "by", w.String())
	}
	switch {
	case !kt.exists && hadTable:
		t.log.Info("nftables table deleted by someone else; recreating it", append([]any{"table", t.describe()}, by...)...)
	case !kt.exists:
		// Not drift: a fresh node, or a table removed while no nftep ran.
		t.log.Info("creating the nftables table", "table", t.describe())
	case drift.Any():
		t.log.Info("nftables table drifted from the desired state; repairing", append([]any{"table", t.describe(), "drift", drift.String()}, by...)...)
	}
	planStart := time.Now()
	pl, err := (&planner{have: have, want: t.desired, v: t.v}).plan()
	if err != nil {
		return p, fmt.Errorf("apply to table %s: %w", t.describe(), &invalidError{err})
	}
	p.pl, p.plan = pl, time.Since(planStart)
	return p, nil
}

// readElements reads the elements of every kernel set whose definition is
// the desired one; the others are recreated or deleted whatever they hold.
func (t *Table) readElements(ctx context.Context, kt *kernelTable) error {
	var names []string
	for name, ks := range kt.sets {
		ws := t.desired.sets[name]
		if ws == nil || !ks.matches(t.cfg.Name, t.family, ws) {
			continue
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return nil
	}
	reads := t.tr.readElements(ctx, t.family, t.cfg.Name, names)
	if err := ctx.Err(); err != nil {
		// The reads were cut short: nothing of this read is used, and
		// the next Apply reads again.
		t.needResync = true
		return err
	}
	for i, name := range names {
		ks := kt.sets[name]
		es, err := reads[i].elements, reads[i].err
		if err != nil {
			// Unreadable elements: treat the set as foreign, which
			// recreates it.
			t.log.Info("cannot read the elements of a set; it will be recreated", "table", t.describe(), "set", name, "error", err)
			ks.elements = nil
			ks.flags = ^uint32(0)
			continue
		}
		ks.elements = es
	}
	return nil
}

// stateFromKernel builds the planner's view of the kernel from a read: a
// chain whose hook and rule hashes equal the desired chain's is recorded as
// holding that chain; any other chain is recorded with unknown content (so
// it is rewritten, or deleted if not desired). Sets likewise.
func (t *Table) stateFromKernel(kt *kernelTable) (*state, Drift) {
	var d Drift
	st := newState()
	st.table = kt.exists && !kt.dormant
	d.TableMissing = !st.table
	want := t.desired
	for name, kc := range kt.chains {
		cs := &chainState{base: kc.base, digest: kc.digest, empty: kc.rules == 0}
		wc := want.chains[name]
		switch {
		case wc == nil:
			d.ChainsExtra++
		case baseEqual(kc.base, wc.Base) && kc.rules == len(wc.Rules) && t.desiredDigest(wc) == kc.digest:
			cs.chain = wc
		default:
			d.ChainsDiffer++
		}
		st.chains[name] = cs
	}
	for name := range want.chains {
		if kt.chains[name] == nil {
			d.ChainsMissing++
		}
	}
	for name, ks := range kt.sets {
		ss := &setState{}
		ws := want.sets[name]
		switch {
		case ws == nil:
			d.SetsExtra++
		case !ks.matches(t.cfg.Name, t.family, ws):
			d.SetsDiffer++
		default:
			es, err := decodeElements(ws, ks.elements)
			if err != nil {
				t.log.Info("cannot decode the elements of a set; it will be recreated", "table", t.describe(), "set", name, "error", err)
				d.SetsDiffer++
				break
			}
			ss.def = setDef(ws)
			ss.elements = elementsOf(es)
			for k, e := range es {
				we, ok := ws.Elements[k]
				switch {
				case !ok:
					d.ElementsExtra++
				case !elementEqual(&we, &e):
					d.ElementsDiffer++
				}
			}
			for k := range ws.Elements {
				if _, ok := es[k]; !ok {
					d.ElementsMissing++
				}
			}
		}
		st.sets[name] = ss
	}
	for name := range want.sets {
		if kt.sets[name] == nil {
			d.SetsMissing++
		}
	}
	st.countRefs()
	return st, d
}

// desiredDigest returns the digest of wc's rules, reusing the one recorded
// when wc was last programmed.
func (t *Table) desiredDigest(wc *Chain) digest {
	if hs := t.have.chains[wc.Name]; hs != nil && hs.chain == wc && hs.digest != (digest{}) {
		return hs.digest
	}
	return chainDigest(wc)
}

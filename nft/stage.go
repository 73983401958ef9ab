package nft

import (
	"context"
	"fmt"
	"time"
)

// Staging ("prepare, then publish": a chain nothing refers to has no effect
// on traffic, so it can be written ahead of the batch that makes it live; see
// docs/architecture.md). A cold start
// of 10,000 workloads is one batch of 85 MB that the kernel takes without
// complaint (TestKernelScaleCold), but holding it whole doubles the daemon's
// peak memory, and encoding it cannot overlap with the kernel applying it.
// So a transaction that writes more than stageMinRules rules into regular
// chains that nothing live refers to goes in several batches. Those chains
// are the new ones, and the existing ones that no base chain reaches
// (through jumps, gotos and verdict maps) in the kernel's table as the
// Table knows it: after a staged apply that stopped midway, the retry finds
// the prepared chains in the kernel, still unreached, and stages again. The
// batches are:
//
//  1. the table, the new chains, empty (new base chains with policy accept),
//     the new sets with their elements, and flushes of the unreached
//     chains being rewritten;
//  2. the rules of those regular chains, stageRules at a time;
//  3. everything else, in the planned order: the base chains' rules and
//     policies, other rewrites, element changes, deletions.
//
// Nothing is live until the last batch commits. An empty base chain with
// policy accept decides nothing (accept ends only its own base chain), and
// nothing live refers to the chains and sets written early until the last
// batch (only base chains, the chains they reach and new elements of
// existing maps could, and they are all in it). So batches 1 and 2 change
// no packet's fate: what traffic sees still changes in one atomic step; on
// a node where the table already exists, the old rules stay enforced until
// then. Creating every chain in the first batch also keeps the kernel's
// listing order (creation order) the order Model.String prints. While the
// kernel applies one batch, the next is encoded on another CPU. A plan that
// recreates an existing chain or set goes as one batch, since rules written
// early could meet the old definition; so does one when the Table cannot
// tell what is live (a chain it reaches holds rules it does not know).
//
// The sizes are the defaults of tuning (tests stage small tables).
const (
	defaultStageMinRules = 65536
	defaultStageRules    = 16384
)

// stages splits pl's transaction (planned against have) for staging, or
// returns nil when it goes as one batch. Transactions of more than minRules
// stageable rules are staged, perBatch rules at a time.
func stages(pl *planned, have *state, minRules, perBatch int) []*Transaction {
	stageMinRules, stageRules := minRules, perBatch
	if pl.replaces {
		return nil
	}
	tx := pl.tx
	// The rules that could be staged, counted first without the
	// reachability walk, which only a large transaction needs.
	count := func(stage func(name string) bool) int {
		n := 0
		for i := range tx.Ops {
			if op := &tx.Ops[i]; op.Kind == OpAddRules && op.Chain.Base == nil && stage(op.Name) {
				n += len(op.Chain.Rules)
			}
		}
		return n
	}
	if count(func(string) bool { return true }) <= stageMinRules {
		return nil
	}
	var live map[string]bool
	if have != nil {
		var unknown bool
		if live, unknown = have.liveChains(); unknown {
			live = nil
		}
	}
	staged := func(name string) bool {
		if pl.fresh["chain "+name] {
			return true
		}
		if live == nil {
			return false
		}
		cs := have.chains[name]
		return cs != nil && cs.base == nil && !live[name]
	}
	if count(staged) <= stageMinRules {
		return nil
	}
	part := func() *Transaction { return &Transaction{Family: tx.Family, Table: tx.Table} }
	head, publish := part(), part()
	var rules []*Transaction
	n := 0
	for _, op := range tx.Ops {
		switch {
		case op.Kind == OpAddTable,
			op.Kind == OpAddChain && pl.fresh["chain "+op.Name],
			op.Kind == OpAddSet && pl.fresh["set "+op.Name],
			op.Kind == OpFlushChain && staged(op.Name):
			head.Ops = append(head.Ops, op)
		case op.Kind == OpAddChain && pl.fresh["base "+op.Name]:
			c := *op.Chain
			b := *c.Base
			b.Policy = PolicyAccept
			c.Base, c.Rules = &b, nil
			head.Ops = append(head.Ops, Op{Kind: OpAddChain, Name: op.Name, Chain: &c})
			if basePolicy(op.Chain.Base) != PolicyAccept {
				publish.Ops = append(publish.Ops, Op{Kind: OpAddChain, Name: op.Name, Chain: op.Chain, Policy: true})
			}
		case op.Kind == OpAddRules && op.Chain.Base == nil && staged(op.Name):
			if len(rules) == 0 || n > 0 && n+len(op.Chain.Rules) > stageRules {
				rules = append(rules, part())
				n = 0
			}
			cur := rules[len(rules)-1]
			cur.Ops = append(cur.Ops, op)
			n += len(op.Chain.Rules)
		default:
			publish.Ops = append(publish.Ops, op)
		}
	}
	out := append([]*Transaction{head}, rules...)
	if len(publish.Ops) > 0 {
		out = append(out, publish)
	}
	return out
}

// sendStages encodes and sends the parts in order, encoding the next part
// while the kernel applies the current one. It returns the generation the
// last commit produced, known when the Table's generation was known and
// each part's commit followed the previous one (or, for the first part,
// t.gen) with no other commit in between.
func (t *Table) sendStages(ctx context.Context, pl *planned, parts []*Transaction, st *ApplyStats) (uint32, bool, error) {
	type encoded struct {
		b   prepared
		err error
		d   time.Duration
	}
	ch := make(chan encoded)
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer close(ch)
		for _, part := range parts {
			start := time.Now()
			b, err := t.tr.prepare(t.family, t.cfg.Name, part, pl)
			select {
			case ch <- encoded{b, err, time.Since(start)}:
			case <-done:
				if b != nil {
					b.release()
				}
				return
			}
			if err != nil {
				return
			}
		}
	}()
	gen, known := t.gen, t.genKnown
	summary := pl.tx.Summary()
	for i, part := range parts {
		if i > 0 {
			if err := ctx.Err(); err != nil {
				// Earlier batches only prepared unreferenced chains; the
				// resync that follows sorts them out.
				return 0, false, fmt.Errorf("apply to table %s: stopped after batch %d of %d: %w", t.describe(), i, len(parts), err)
			}
		}
		e := <-ch
		st.Encode += e.d
		if e.err != nil {
			if i > 0 {
				return 0, false, fmt.Errorf("apply to table %s: batch %d of %d: %w", t.describe(), i+1, len(parts), e.err)
			}
			return 0, false, fmt.Errorf("apply to table %s: %w", t.describe(), &invalidError{e.err})
		}
		msgs, bytes := e.b.stats()
		st.Messages += msgs
		st.Bytes += bytes
		st.Batches++
		what := summary
		if len(parts) > 1 {
			what = fmt.Sprintf("%s; batch %d of %d", summary, i+1, len(parts))
		}
		start := time.Now()
		g, ok, err := t.send(ctx, e.b, part, what, gen, known)
		st.Kernel += time.Since(start)
		e.b.release()
		if err != nil {
			return 0, false, err
		}
		gen, known = g, ok
		if t.afterBatch != nil {
			t.afterBatch(i+1, len(parts))
		}
	}
	return gen, known, nil
}

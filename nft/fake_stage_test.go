package nft

// Staging through the Fake: a staged apply that stops midway (a batch
// refused, the context ended) leaves nothing live, and the retry reads the
// prepared chains back, finds them unreached and stages again.

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stagedTable returns a Table on f that stages anything over 10 rules, 4
// rules a batch, with stagedModel(6) as its desired state.
func stagedTable(t *testing.T, f *Fake) *Table {
	t.Helper()
	tbl := newFakeTable(t, f, FamilyINet)
	tbl.tune.stageMinRules, tbl.tune.stageRules = 10, 4
	stagedModel(tbl.Desired(), 6)
	return tbl
}

// stagedChains are the regular chains of stagedModel(6), sorted.
var stagedChains = []string{"filter-fw-sa", "filter-fw-sb", "filter-fw-sc", "filter-fw-sd", "filter-fw-se", "filter-fw-sf", "filter-fw-v1", "filter-fw-v2"}

// opsOf lists a transaction's operations as "kind name".
func opsOf(tx *Transaction) []string {
	var out []string
	for _, op := range tx.Ops {
		s := op.Kind.String() + " " + op.Name
		if op.Policy {
			s += " (policy)"
		}
		out = append(out, s)
	}
	return out
}

// touches reports whether a transaction changes the chain name.
func touches(tx *Transaction, name string) bool {
	for _, op := range tx.Ops {
		if op.Name == name && op.Kind != OpAddElements && op.Kind != OpDeleteElements && op.Kind != OpAddSet {
			return true
		}
	}
	return false
}

// TestFakeStagedRetryAfterRefusal: the kernel refuses batch 2 of a staged
// cold start. Nothing is live: batch 1's chains are there, empty, and the
// base chain dispatches nowhere. The next Apply reads the table back and
// stages again: its first batch flushes the prepared chains (still
// unreached), the next ones fill them, and only the last makes the base
// chain dispatch.
func TestFakeStagedRetryAfterRefusal(t *testing.T) {
	f := NewFake()
	tbl := stagedTable(t, f)
	commits := 0
	f.OnCommit(func() {
		commits++
		if commits == 1 {
			f.FailNext(syscall.ENOMEM)
		}
	})
	_, err := tbl.Apply(context.Background())
	var e *Error
	require.ErrorAs(t, err, &e)
	require.ErrorIs(t, err, syscall.ENOMEM)
	assert.False(t, IsStateUnknown(err), "a refusal is known not to have committed")
	assert.Contains(t, err.Error(), "batch 2 of 9")
	assert.True(t, tbl.NeedsResync())
	require.Len(t, f.Transactions(), 1, "only the first batch committed")
	assert.False(t, dispatching(f), "a refused staged apply left something live")
	first := f.Transactions()[0]
	for _, c := range stagedChains {
		assert.Contains(t, opsOf(first), "add chain "+c, "batch 1 creates every chain")
	}
	assert.Contains(t, opsOf(first), "add chain filter-input", "the base chain, empty")
	for _, op := range first.Ops {
		assert.NotEqual(t, OpAddRules, op.Kind, "batch 1 writes no rule: %s", op.Name)
	}

	f.OnCommit(nil)
	var live []bool
	f.OnCommit(func() { live = append(live, dispatching(f)) })
	before := len(f.Transactions())
	st := mustApply(t, tbl)
	assert.True(t, st.Resynced)
	assert.Equal(t, 9, st.Batches, "the retry stages again")
	retry := f.Transactions()[before:]
	require.Len(t, retry, 9)
	var flushed []string
	for _, op := range retry[0].Ops {
		require.Equal(t, OpFlushChain, op.Kind, "the retry's first batch only flushes the prepared chains: %v", opsOf(retry[0]))
		flushed = append(flushed, op.Name)
	}
	assert.ElementsMatch(t, stagedChains, flushed)
	for i, tx := range retry[:len(retry)-1] {
		assert.False(t, touches(tx, "filter-input"), "batch %d of the retry touches the base chain: %v", i+1, opsOf(tx))
		assert.False(t, live[i], "batch %d of the retry made the base chain dispatch", i+1)
	}
	assert.Equal(t, []string{"flush chain filter-input", "add rule filter-input"}, opsOf(retry[len(retry)-1]))
	assert.True(t, live[len(live)-1])
	wantFakeHolds(t, f, tbl.Desired())
}

// TestFakeStagedStopsWhenCancelled: a context that ends between batches
// stops the apply there, naming the batch; the retry completes it.
func TestFakeStagedStopsWhenCancelled(t *testing.T) {
	f := NewFake()
	tbl := stagedTable(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	tbl.afterBatch = func(i, n int) {
		if i == 2 {
			cancel()
		}
	}
	_, err := tbl.Apply(ctx)
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "apply to table inet nftep: stopped after batch 2 of 9")
	assert.Len(t, f.Transactions(), 2)
	assert.False(t, dispatching(f))
	assert.True(t, tbl.NeedsResync())

	tbl.afterBatch = nil
	st := mustApply(t, tbl)
	assert.True(t, st.Resynced)
	assert.Greater(t, st.Batches, 1)
	wantFakeHolds(t, f, tbl.Desired())
}

// TestFakeStagedBasePolicy: a new base chain with policy drop is created
// with policy accept (an empty base chain with accept decides nothing) and
// gets its drop in the last batch, with its rules.
func TestFakeStagedBasePolicy(t *testing.T) {
	f := NewFake()
	tbl := stagedTable(t, f)
	c := *tbl.Desired().Chain("filter-input")
	b := *c.Base
	b.Policy = PolicyDrop
	c.Base = &b
	tbl.Desired().SetChain(&c)
	var policies []Policy
	f.OnCommit(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		policies = append(policies, f.tables[fakeKey{FamilyINet, testTable}].chains["filter-input"].base.Policy)
	})
	st := mustApply(t, tbl)
	require.Greater(t, st.Batches, 2)
	for i, p := range policies[:len(policies)-1] {
		assert.Equal(t, PolicyAccept, p, "batch %d", i+1)
	}
	assert.Equal(t, PolicyDrop, policies[len(policies)-1])
	last := lastTx(t, f)
	assert.Contains(t, opsOf(last), "add chain filter-input (policy)")
	assert.Contains(t, last.Summary(), "1 policy changed")
	wantFakeHolds(t, f, tbl.Desired())
}

// TestFakeStagingNeedsToKnowWhatIsLive: rewriting many existing chains
// that nothing reaches is staged; the same rewrite planned from a read
// that found a reachable chain holding rules the Table does not know goes
// in one batch (any chain may be live then), as does a plan that recreates
// a set.
func TestFakeStagingNeedsToKnowWhatIsLive(t *testing.T) {
	unreached := func(m *Model, body string) {
		for i := range 6 {
			m.SetChain(regular(fmt.Sprintf("filter-unreached-%d", i), rule(body, accept), rule(body, accept), rule(body, drop)))
		}
	}
	setup := func(t *testing.T) (*Fake, *Table) {
		f := NewFake()
		tbl := newFakeTable(t, f, FamilyINet)
		baseModel(tbl.Desired())
		unreached(tbl.Desired(), "first")
		require.Equal(t, 1, mustApply(t, tbl).Batches, "cold start with the default sizes: one batch")
		tbl.tune.stageMinRules, tbl.tune.stageRules = 10, 4
		unreached(tbl.Desired(), "second")
		return f, tbl
	}

	t.Run("known", func(t *testing.T) {
		f, tbl := setup(t)
		st := mustApply(t, tbl)
		assert.Greater(t, st.Batches, 2, "a rewrite of unreached chains is staged")
		txs := f.Transactions()
		head := txs[len(txs)-st.Batches]
		for _, op := range head.Ops {
			assert.Equal(t, OpFlushChain, op.Kind, "%v", opsOf(head))
		}
		wantFakeHolds(t, f, tbl.Desired())
	})
	t.Run("unknown", func(t *testing.T) {
		f, tbl := setup(t)
		mustForeign(t, f.InsertRule(FamilyINet, testTable, "filter-fw-v1", rule("theirs", accept)))
		rs, err := tbl.Resync(context.Background())
		require.NoError(t, err)
		assert.Equal(t, Drift{ChainsDiffer: 7}, rs.Drift, "filter-fw-v1 and the six rewritten")
		assert.Equal(t, 1, rs.Apply.Batches, "planned from a read with a live chain it does not know")
		wantFakeHolds(t, f, tbl.Desired())
	})
	t.Run("set recreated", func(t *testing.T) {
		f, tbl := setup(t)
		s := *tbl.Desired().Set("allowed")
		s.Comment = "another definition"
		tbl.Desired().SetSet(&s)
		st := mustApply(t, tbl)
		assert.Equal(t, 1, st.Batches, "a plan that recreates a set")
		wantFakeHolds(t, f, tbl.Desired())
	})
}

// TestFakeGenerationsShared: Tables sharing a Generations see each
// other's commits as their own, so a resync after a sibling's commit
// reads nothing; without it, every resync after a sibling's commit reads.
// A foreign commit makes both read.
func TestFakeGenerationsShared(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			f := NewFake()
			var gens *Generations
			if shared {
				gens = NewGenerations()
			}
			newTable := func(fam Family) *Table {
				tbl, err := NewTable(TableConfig{Family: fam, Name: testTable, Transport: f, Generations: gens})
				require.NoError(t, err)
				return tbl
			}
			inet, arp := newTable(FamilyINet), newTable(FamilyARP)
			baseModel(inet.Desired())
			arp.Desired().SetChain(&Chain{Name: "arp-input", Base: &BaseChain{Type: ChainTypeFilter, Hook: HookInput, Priority: PriorityFilter, Policy: PolicyAccept}})
			mustApply(t, inet)
			mustApply(t, arp)

			inet.Desired().SetElement("allowed", Element{Key: "10.0.0.5"})
			mustApply(t, inet)
			rs, err := arp.Resync(context.Background())
			require.NoError(t, err)
			assert.Equal(t, shared, rs.Skipped, "the arp table's resync after the inet table's commit")
			// The inet table's own commit followed the arp table's cold
			// start: only a shared Generations tells it that commit was a
			// sibling's.
			rs, err = inet.Resync(context.Background())
			require.NoError(t, err)
			assert.Equal(t, shared, rs.Skipped, "the inet table's resync after its own commit")

			mustForeign(t, f.AddTable(FamilyINet, "theirs"))
			for _, tbl := range []*Table{inet, arp} {
				rs, err := tbl.Resync(context.Background())
				require.NoError(t, err)
				assert.False(t, rs.Skipped, "%s after a foreign commit", tbl.describe())
				assert.Equal(t, 1, rs.Reads)
				assert.False(t, rs.Drift.Any())
			}
		})
	}
}

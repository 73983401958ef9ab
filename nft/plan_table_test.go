package nft

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPlanBeforeApply: Plan reads the table back and checks the
// transaction without sending anything; the next Apply sends that plan; a
// model changed since is planned again; an invalid model fails Plan.
func TestPlanBeforeApply(t *testing.T) {
	ctx := context.Background()
	f := NewFake()
	tbl := newFakeTable(t, f, FamilyINet)
	m := tbl.Desired()
	baseModel(m)

	require.NoError(t, tbl.Plan(ctx, false))
	assert.Empty(t, f.Transactions(), "Plan sent something")
	st := mustApply(t, tbl)
	assert.True(t, st.Resynced, "cold apply: planned from a read")
	assert.NotZero(t, st.Operations)
	assert.Len(t, f.Transactions(), 1)
	wantFakeHolds(t, f, m)

	// A change after the plan: Apply plans again and sends the change.
	require.NoError(t, tbl.Plan(ctx, false))
	m.SetChain(regular("filter-fw-v3", rule("v3", accept)))
	m.SetElement("filter-from-wl", Element{Key: "v3", Verdict: &Verdict{Kind: Goto, Chain: "filter-fw-v3"}})
	mustApply(t, tbl)
	wantFakeHolds(t, f, m)

	// Plan, then Resync: the resync sends the plan Plan(resync) made.
	m.DeleteElement("filter-from-wl", "v3")
	m.DeleteChain("filter-fw-v3")
	require.NoError(t, tbl.Plan(ctx, true))
	n := len(f.Transactions())
	rs, err := tbl.Resync(ctx)
	require.NoError(t, err)
	assert.True(t, rs.Skipped, "the generation was ours: no read")
	assert.Len(t, f.Transactions(), n+1)
	wantFakeHolds(t, f, m)

	// An invalid model: Plan fails, nothing is sent, and Apply fails the
	// same way.
	m.SetChain(&Chain{Name: "bad name"})
	n = len(f.Transactions())
	err = tbl.Plan(ctx, false)
	assert.True(t, IsInvalid(err), "Plan: %v", err)
	_, err = tbl.Apply(ctx)
	assert.True(t, IsInvalid(err), "Apply: %v", err)
	assert.Len(t, f.Transactions(), n, "an invalid model sent something")
}

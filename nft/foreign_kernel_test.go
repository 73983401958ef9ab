package nft

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/internal/netnstest"
)

// TestKernelForeignInFirstCommit: removals in other tables set with
// SetForeign go in the same kernel transaction as the table's first commit
// (the generation moves by one, and the Table knows its table at it); a
// refused removal refuses the whole transaction, so our table is not
// created either, and the error names the removal; with nothing of ours to
// change the removals go alone.
func TestKernelForeignInFirstCommit(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft is not installed")
	}
	ns := netnstest.New(t)
	ns.Run(t, "nft", "add table ip calico; add chain ip calico c; add table ip filter; add chain ip filter cali-X; add chain ip filter INPUT { type filter hook input priority 0; }; add rule ip filter INPUT jump cali-X; add rule ip filter INPUT tcp dport 22 accept")
	ctx := context.Background()
	tbl, err := NewTable(TableConfig{Family: FamilyINet, Name: testTable, NetNSFd: ns.Fd()})
	require.NoError(t, err)
	baseModel(tbl.Desired())

	// Refused: a table that is not there.
	tbl.SetForeign([]ForeignOp{{Kind: ForeignDeleteTable, Family: FamilyIP, Table: "calico"}, {Kind: ForeignDeleteTable, Family: FamilyIP6, Table: "missing"}})
	_, err = tbl.Apply(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "delete table ip6 missing")
	tables := ns.Run(t, "nft", "list", "tables")
	assert.Contains(t, tables, "table ip calico")
	assert.NotContains(t, tables, "inet "+testTable)

	read, err := ReadForeign(ctx, ns.Fd(), func(f Family, n string) bool { return f == FamilyIP && n == "filter" }, true)
	require.NoError(t, err)
	input := read[0].Chain("INPUT")
	require.Len(t, input.Rules, 2)
	g0, err := GetGeneration(ctx, ns.Fd())
	require.NoError(t, err)
	tbl.SetForeign([]ForeignOp{
		{Kind: ForeignDeleteTable, Family: FamilyIP, Table: "calico"},
		{Kind: ForeignDeleteRule, Family: FamilyIP, Table: "filter", Chain: "INPUT", Handle: input.Rules[0].Handle},
		{Kind: ForeignDeleteChain, Family: FamilyIP, Table: "filter", Chain: "cali-X"},
	})
	st, err := tbl.Apply(ctx)
	require.NoError(t, err)
	g1, err := GetGeneration(ctx, ns.Fd())
	require.NoError(t, err)
	assert.Equal(t, g0+1, g1, "one transaction")
	assert.Contains(t, tbl.LastTransaction().Summary(), "3 removals in other tables (ip calico, ip filter)")
	assert.Greater(t, st.Operations, 3)
	tables = ns.Run(t, "nft", "list", "tables")
	assert.NotContains(t, tables, "table ip calico")
	assert.Contains(t, tables, "table inet "+testTable)
	filter := ns.Run(t, "nft", "list", "table", "ip", "filter")
	assert.NotContains(t, filter, "cali-X")
	assert.Contains(t, filter, "tcp dport 22 accept")

	// Nothing of ours to change: the removals go alone, and the Table
	// still knows its table (the next resync reads nothing).
	ns.Run(t, "nft", "add table arp calico-arp")
	tbl.SetForeign([]ForeignOp{{Kind: ForeignDeleteTable, Family: FamilyARP, Table: "calico-arp"}})
	st, err = tbl.Apply(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, st.Operations)
	assert.False(t, strings.Contains(ns.Run(t, "nft", "list", "tables"), "calico-arp"))
	rs, err := tbl.Resync(ctx)
	require.NoError(t, err)
	assert.False(t, rs.Skipped, "a foreign change came in between our last read and this commit")
	rs, err = tbl.Resync(ctx)
	require.NoError(t, err)
	assert.True(t, rs.Skipped)
}

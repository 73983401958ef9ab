package nft

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/internal/testutil"
)

// TestKernelResyncSaysCreatingNotDrifted: the first apply on a fresh node
// creates the table, which is not drift and must not read like an incident;
// a table someone deleted, and a chain someone flushed, are drift.
func TestKernelResyncSaysCreatingNotDrifted(t *testing.T) {
	ns := netnstest.New(t)
	var logs testutil.SyncBuffer
	tbl, err := NewTable(TableConfig{Family: FamilyINet, Name: testTable, NetNSFd: ns.Fd(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	baseModel(tbl.Desired())
	mustApply(t, tbl)
	if got := logs.Take(); !strings.Contains(got, `msg="creating the nftables table" table="inet nftep"`) || strings.Contains(got, "drift") {
		t.Errorf("first apply on a fresh node logged:\n%s\nwant only that it creates the table", got)
	}

	ns.Run(t, "nft", "delete table inet nftep")
	if _, err := tbl.Resync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := logs.Take(); !strings.Contains(got, `msg="nftables table deleted by someone else; recreating it"`) {
		t.Errorf("resync after a foreign delete logged:\n%s", got)
	}

	ns.Run(t, "nft", "flush chain inet nftep filter-input")
	if _, err := tbl.Resync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := logs.Take(); !strings.Contains(got, `msg="nftables table drifted from the desired state; repairing" table="inet nftep" drift="1 chains differ"`) {
		t.Errorf("resync after a foreign flush logged:\n%s", got)
	}
}

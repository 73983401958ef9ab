package nft

import (
	"context"
	"fmt"
	"testing"

	"github.com/nftep/nftep/internal/netnstest"
)

// TestKernelSiblingCommitsSkipReads drives nftep's two tables (inet and
// arp, same name) through a series of changes, each followed by a resync
// of both, as the daemon does after the nftables events of its own
// commits, and counts the read-backs. With a shared Generations no resync
// reads; with none, every resync reads its whole table. A foreign commit
// still makes both read.
func TestKernelSiblingCommitsSkipReads(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			ns := netnstest.New(t)
			var gens *Generations
			if shared {
				gens = NewGenerations()
			}
			newTable := func(f Family) *Table {
				tbl, err := NewTable(TableConfig{Family: f, Name: testTable, NetNSFd: ns.Fd(), Generations: gens})
				if err != nil {
					t.Fatal(err)
				}
				return tbl
			}
			inet, arp := newTable(FamilyINet), newTable(FamilyARP)
			baseModel(inet.Desired())
			arp.Desired().SetChain(&Chain{Name: "arp-input", Base: &BaseChain{Type: ChainTypeFilter, Hook: HookInput, Priority: PriorityFilter, Policy: PolicyAccept}})
			mustApply(t, inet)
			mustApply(t, arp)

			const changes = 10
			reads := 0
			resyncBoth := func() {
				t.Helper()
				for _, tbl := range []*Table{inet, arp} {
					rs, err := tbl.Resync(context.Background())
					if err != nil {
						t.Fatalf("Resync %s: %v", tbl.describe(), err)
					}
					if rs.Apply.Operations != 0 {
						t.Errorf("resync of %s repaired %d operations; want none", tbl.describe(), rs.Apply.Operations)
					}
					reads += rs.Reads
				}
			}
			resyncBoth() // settle: the first resync of the first-applied table may read
			reads = 0
			for i := range changes {
				inet.Desired().SetElement("allowed", Element{Key: fmt.Sprintf("10.0.1.%d", i+1)})
				mustApply(t, inet)
				arp.Desired().SetChain(&Chain{Name: "arp-input", Base: &BaseChain{Type: ChainTypeFilter, Hook: HookInput, Priority: PriorityFilter, Policy: PolicyAccept},
					Rules: []*Rule{rule(fmt.Sprintf("change %d", i), Verdict{Kind: Accept})}})
				mustApply(t, arp)
				resyncBoth()
			}
			want := 0
			if !shared {
				// Both, every time: the inet table's generation is behind
				// the arp table's commit, and the arp table's own commit
				// came after the inet table's, one past a generation it
				// did not know.
				want = 2 * changes
			}
			if reads != want {
				t.Errorf("%d changes to both tables: %d read-backs, want %d", changes, reads, want)
			}

			// Someone else's commit: both tables read again.
			ns.Run(t, "nft", "add table inet someone-else")
			reads = 0
			resyncBoth()
			if reads != 2 {
				t.Errorf("after a foreign commit: %d read-backs, want 2 (one per table)", reads)
			}
		})
	}
}

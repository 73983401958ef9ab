package routes

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
)

// TestStats counts route writes: what the caller asked for is programmed or
// removed; what a resync found drifted is counted as repaired too.
func TestStats(t *testing.T) {
	k := newFakeKernel()
	idx := k.addLink("cali1", true)
	tbl, _ := newTestTable(t, k, Config{})

	// 1. Two routes wanted: two programmed, no repair.
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", ""), target("10.65.0.2/32", "")})
	mustApply(t, tbl)
	if diff := cmp.Diff(Stats{Programmed: 2}, tbl.TakeStats()); diff != "" {
		t.Errorf("step 1 (-want +got):\n%s", diff)
	}

	// 2. Someone deletes both and adds a route of their own on cali1: the
	// resync puts ours back and removes theirs, all three repairs.
	k.mu.Lock()
	k.dropRoutesOf(idx)
	k.mu.Unlock()
	k.addRoute(netlink.Route{LinkIndex: idx, Dst: ipnet("10.99.0.1/32"), Protocol: netlink.RouteProtocol(3), Scope: netlink.SCOPE_LINK})
	tbl.QueueResync()
	mustApply(t, tbl)
	if diff := cmp.Diff(Stats{Programmed: 2, Removed: 1, Repaired: 3}, tbl.TakeStats()); diff != "" {
		t.Errorf("step 2 (-want +got):\n%s", diff)
	}

	// 3. A change the caller asked for is no repair, even in an Apply that
	// resyncs.
	tbl.SetRoutes("cali1", []Target{target("10.65.0.1/32", "")})
	tbl.QueueResync()
	mustApply(t, tbl)
	if diff := cmp.Diff(Stats{Removed: 1}, tbl.TakeStats()); diff != "" {
		t.Errorf("step 3 (-want +got):\n%s", diff)
	}
}

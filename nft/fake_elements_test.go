package nft

// Element paths: element operations the kernel refuses are named, element
// lists too big for one message are split (an interval's end never apart
// from its start) and a refusal names the elements of the message refused,
// and a set whose elements cannot be read back is recreated.

import (
	"context"
	"fmt"
	"log/slog"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/nftep/nftep/internal/testutil"
)

// TestFakeElementRefusalNamesElement: someone deleted an element that the
// next transaction deletes too; the kernel refuses it (ENOENT), the error
// names the element and its set, nothing is applied, and the next Apply
// reads the table back and finds nothing left to do.
func TestFakeElementRefusalNamesElement(t *testing.T) {
	f := NewFake()
	tbl := newFakeTable(t, f, FamilyINet)
	m := tbl.Desired()
	baseModel(m)
	m.SetElement("allowed", Element{Key: "10.0.0.2"})
	mustApply(t, tbl)
	mustForeign(t, f.DeleteElement(FamilyINet, testTable, "allowed", "10.0.0.2"))
	before, g := f.Dump(), f.Generation()

	m.DeleteElement("allowed", "10.0.0.2")
	m.SetElement("allowed", Element{Key: "10.0.0.3"})
	_, err := tbl.Apply(context.Background())
	var e *Error
	require.ErrorAs(t, err, &e)
	require.ErrorIs(t, err, syscall.ENOENT)
	assert.Equal(t, `delete element "10.0.0.2" from set "allowed"`, e.Op)
	assert.Equal(t, "1 element deleted from set allowed, 1 element added to set allowed", e.Summary)
	assert.Equal(t, before, f.Dump(), "a refused transaction changed the Fake")
	assert.Equal(t, g, f.Generation())

	st := mustApply(t, tbl)
	assert.True(t, st.Resynced)
	assert.Equal(t, "1 element added to set allowed", lastTx(t, f).Summary())
	wantFakeHolds(t, f, m)
}

// TestFakeMapElementChanges: a verdict-map element that changes its
// verdict is deleted and added again in one transaction, in which the
// chain it no longer goes to is flushed first and deleted last.
func TestFakeMapElementChanges(t *testing.T) {
	f := NewFake()
	tbl := newFakeTable(t, f, FamilyINet)
	m := tbl.Desired()
	baseModel(m)
	mustApply(t, tbl)
	m.SetElement("filter-from-wl", Element{Key: "v1", Verdict: &Verdict{Kind: Goto, Chain: "filter-fw-v2"}})
	m.DeleteChain("filter-fw-v1")
	mustApply(t, tbl)
	tx := lastTx(t, f)
	assert.Equal(t, []string{"flush chain filter-fw-v1", "delete element filter-from-wl", "add element filter-from-wl", "delete chain filter-fw-v1"}, opsOf(tx))
	assert.Equal(t, "1 deleted, 1 element deleted from map filter-from-wl, 1 element added to map filter-from-wl", tx.Summary())
	wantFakeHolds(t, f, m)
}

// unreadableElements is a Fake whose sets' elements cannot be read.
type unreadableElements struct{ *Fake }

func (unreadableElements) readElements(_ context.Context, _ uint8, _ string, sets []string) []elementsRead {
	out := make([]elementsRead, len(sets))
	for i := range out {
		out[i].err = syscall.EPERM
	}
	return out
}

// TestResyncRecreatesUnreadableSet: a set whose elements a resync cannot
// read is treated as someone else's: deleted and created again with the
// model's elements, in the repair transaction.
func TestResyncRecreatesUnreadableSet(t *testing.T) {
	f := NewFake()
	logs := &testutil.SyncBuffer{}
	tbl, err := NewTable(TableConfig{Family: FamilyINet, Name: testTable, Transport: f, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	m := tbl.Desired()
	baseModel(m)
	mustApply(t, tbl)
	tbl.tr = unreadableElements{f}
	mustForeign(t, f.AddTable(FamilyINet, "theirs")) // the next resync reads

	rs, err := tbl.Resync(context.Background())
	require.NoError(t, err)
	assert.Equal(t, Drift{SetsDiffer: 2}, rs.Drift)
	tx := lastTx(t, f)
	assert.Contains(t, opsOf(tx), "add set allowed")
	assert.Contains(t, tx.Summary(), "2 sets added")
	assert.Contains(t, logs.String(), `msg="cannot read the elements of a set; it will be recreated" table="inet nftep" set=allowed error="operation not permitted"`)
	wantFakeHolds(t, f, m)
}

// bigSet returns n IPv4 addresses 10.0.x.y in the order the printer sorts
// them.
func bigSet(n int) []Element {
	out := make([]Element, n)
	for i := range out {
		out[i] = Element{Key: fmt.Sprintf("10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff)}
	}
	return out
}

// TestWireLargeElementLists: thousands of elements go in several
// NEWSETELEM messages, each below netlink's 64 KiB attribute limit, and
// read back with no drift; when the kernel refuses the second message,
// the error names its first element and how many it held, and nothing of
// the transaction is applied.
func TestWireLargeElementLists(t *testing.T) {
	w := &wire{f: NewFake()}
	tbl := newWireTable(t, w, FamilyINet)
	m := tbl.Desired()
	m.SetSet(&Set{Name: "big", Key: []KeyType{TypeIPv4Addr}})
	m.SetChain(&Chain{Name: "filter-input", Base: &BaseChain{Type: ChainTypeFilter, Hook: HookInput, Priority: PriorityFilter, Policy: PolicyAccept},
		Rules: []*Rule{rule("big", drop, Addr{Family: IPv4, Dir: In, Set: "big"})}})
	mustApply(t, tbl)

	els := bigSet(10000)
	for _, e := range els {
		m.SetElement("big", e)
	}
	w.refuse.typ, w.refuse.n, w.refuse.errno = unix.NFT_MSG_NEWSETELEM, 2, syscall.ENOSPC
	w.elements = nil
	before := w.f.Dump()
	_, err := tbl.Apply(context.Background())
	var e *Error
	require.ErrorAs(t, err, &e)
	require.ErrorIs(t, err, syscall.ENOSPC)
	require.GreaterOrEqual(t, len(w.elements), 3, "10,000 elements in one message")
	first, n := w.elements[0], w.elements[1]
	assert.Equal(t, fmt.Sprintf("add %d elements from %q to set %q", n, els[first].Key, "big"), e.Op)
	assert.Equal(t, before, w.f.Dump(), "a refused batch was applied")

	w.elements = nil
	mustApply(t, tbl)
	total := 0
	for _, n := range w.elements {
		total += n
	}
	assert.Equal(t, len(els), total, "every element sent once")
	wantFakeHolds(t, w.f, m)
	tbl.genKnown = false
	rs, err := tbl.Resync(context.Background())
	require.NoError(t, err)
	assert.False(t, rs.Drift.Any(), "drift %s", rs.Drift)

	// Deleting them: DELSETELEM messages of keys only, as many as needed.
	w.elements = nil
	for _, e := range els[:5000] {
		m.DeleteElement("big", e.Key)
	}
	mustApply(t, tbl)
	assert.Equal(t, "5000 elements deleted from set big", lastTx(t, w.f).Summary())
	assert.Greater(t, len(w.elements), 1)
	wantFakeHolds(t, w.f, m)
}

// TestWireIntervalElements: an interval set's elements are a start and an
// end each; a split never separates them, and the kernel's refusal of a
// message names the model's element, not the kernel's half of it.
func TestWireIntervalElements(t *testing.T) {
	w := &wire{f: NewFake()}
	tbl := newWireTable(t, w, FamilyINet)
	m := tbl.Desired()
	m.SetSet(&Set{Name: "nets", Key: []KeyType{TypeIPv4Addr}, Interval: true})
	mustApply(t, tbl)
	var keys []string
	for i := range 6000 {
		k := fmt.Sprintf("10.%d.%d.0/24", i>>8, i&0xff)
		keys = append(keys, k)
		m.SetElement("nets", Element{Key: k})
	}
	w.refuse.typ, w.refuse.n, w.refuse.errno = unix.NFT_MSG_NEWSETELEM, 2, syscall.EEXIST
	w.elements = nil
	_, err := tbl.Apply(context.Background())
	var e *Error
	require.ErrorAs(t, err, &e)
	require.GreaterOrEqual(t, len(w.elements), 2)
	for i, n := range w.elements {
		assert.Zero(t, n%2, "message %d holds %d kernel elements: an interval split from its end", i+1, n)
	}
	first, n := w.elements[0]/2, w.elements[1]/2
	assert.Equal(t, fmt.Sprintf("add %d elements from %q to set %q", n, keys[first], "nets"), e.Op)

	mustApply(t, tbl)
	wantFakeHolds(t, w.f, m)
}

// TestDescribeOp: how an error names each operation the kernel may
// refuse.
func TestDescribeOp(t *testing.T) {
	set := &Set{Name: "allowed", Key: []KeyType{TypeIPv4Addr}}
	vmap := &Set{Name: "dispatch", Key: []KeyType{TypeIfName}, Data: DataVerdict}
	els := []Element{{Key: "10.0.0.1"}, {Key: "10.0.0.2"}}
	base := &Chain{Name: "filter-input", Base: &BaseChain{Type: ChainTypeFilter, Hook: HookInput, Priority: PriorityFilter}}
	for _, tc := range []struct {
		op   Op
		sub  int
		want string
	}{
		{Op{Kind: OpAddTable}, 0, "add table"},
		{Op{Kind: OpDeleteTable}, 0, "delete table"},
		{Op{Kind: OpAddChain, Name: "filter-input", Chain: base}, 0, `add base chain "filter-input" (hook input priority 0)`},
		{Op{Kind: OpAddChain, Name: "c", Chain: regular("c")}, 0, `add chain "c"`},
		{Op{Kind: OpFlushChain, Name: "c"}, 0, `flush chain "c"`},
		{Op{Kind: OpDeleteChain, Name: "c"}, 0, `delete chain "c"`},
		{Op{Kind: OpAddRules, Name: "c", Chain: regular("c", rule("first", accept), &Rule{Action: drop})}, 1, `add rule 2 to chain "c"`},
		{Op{Kind: OpAddRules, Name: "c", Chain: regular("c", rule("first", accept))}, 0, `add rule 1 to chain "c" (comment "first")`},
		{Op{Kind: OpAddRules, Name: "c", Chain: regular("c")}, 0, `add rule to chain "c"`},
		{Op{Kind: OpAddSet, Name: "allowed", Set: set, Elements: els}, 0, `add set "allowed"`},
		{Op{Kind: OpAddSet, Name: "allowed", Set: set, Elements: els}, 1, `add element "10.0.0.2" to new set "allowed"`},
		{Op{Kind: OpAddSet, Name: "dispatch", Set: vmap}, 0, `add map "dispatch"`},
		{Op{Kind: OpDeleteSet, Name: "dispatch", Set: vmap}, 0, `delete map "dispatch"`},
		{Op{Kind: OpAddElements, Name: "allowed", Set: set, Elements: els}, 1, `add element "10.0.0.2" to set "allowed"`},
		{Op{Kind: OpAddElements, Name: "allowed", Set: set, Elements: els}, 2, `add elements to set "allowed"`},
		{Op{Kind: OpDeleteElements, Name: "dispatch", Set: vmap, Elements: []Element{{Key: "cali1"}}}, 0, `delete element "cali1" from map "dispatch"`},
		{Op{Kind: OpKind(99)}, 0, "OpKind(99)"},
	} {
		assert.Equal(t, tc.want, describeOp(&tc.op, tc.sub))
	}
	op := Op{Kind: OpDeleteElements, Name: "allowed", Set: set, Elements: els}
	assert.Equal(t, `delete 2 elements from "10.0.0.1" from set "allowed"`, describeElements(&op, 0, 2))
}

// TestFakeSkipEncoding: a Fake that skips encoding takes the same
// transactions (a dry run's check) and counts no messages.
func TestFakeSkipEncoding(t *testing.T) {
	f := NewFake()
	f.SkipEncoding()
	tbl := newFakeTable(t, f, FamilyINet)
	baseModel(tbl.Desired())
	st := mustApply(t, tbl)
	assert.NotZero(t, st.Operations)
	assert.Zero(t, st.Messages)
	assert.Zero(t, st.Bytes)
	wantFakeHolds(t, f, tbl.Desired())
}

// TestFakeDumpOrder: Dump prints inet tables before arp tables, each
// family's by name.
func TestFakeDumpOrder(t *testing.T) {
	f := NewFake()
	for _, k := range []fakeKey{{FamilyARP, "a"}, {FamilyINet, "z"}, {FamilyINet, "b"}} {
		mustForeign(t, f.AddTable(k.family, k.name))
	}
	assert.Equal(t, "table inet b {\n}\ntable inet z {\n}\ntable arp a {\n}\n", f.Dump())
	assert.NoError(t, f.AddTable(FamilyINet, "b"), "adding a table that exists")
	assert.ErrorIs(t, f.DeleteTable(FamilyARP, "missing"), syscall.ENOENT)
}

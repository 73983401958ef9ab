package nft

// The engine through the Fake: the same behaviour the kernel tests check,
// without root, so that `go test -short` runs Apply, Resync, staging and
// Watch. TestFakeMatchesKernel keeps the Fake honest against the kernel.

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/internal/netnstest"
)

func newFakeTable(t *testing.T, f *Fake, family Family) *Table {
	t.Helper()
	tbl, err := NewTable(TableConfig{Family: family, Name: testTable, Transport: f})
	require.NoError(t, err)
	return tbl
}

// wantFakeHolds checks that the Fake holds exactly the model.
func wantFakeHolds(t *testing.T, f *Fake, m *Model) {
	t.Helper()
	if diff := cmp.Diff(m.String(), f.DumpTable(m.Family, m.Name)); diff != "" {
		require.FailNow(t, "the Fake's table differs from the model (-model +fake):\n"+diff)
	}
}

// lastTx returns the last transaction the Fake took.
func lastTx(t *testing.T, f *Fake) *Transaction {
	t.Helper()
	txs := f.Transactions()
	require.NotEmpty(t, txs, "no transaction")
	return txs[len(txs)-1]
}

func TestFakeApplyIncremental(t *testing.T) {
	f := NewFake()
	tbl := newFakeTable(t, f, FamilyINet)
	m := tbl.Desired()
	baseModel(m)

	st := mustApply(t, tbl)
	assert.True(t, st.Resynced, "cold apply: a first read")
	assert.NotZero(t, st.Operations)
	assert.NotZero(t, st.Messages)
	wantFakeHolds(t, f, m)
	g := f.Generation()
	assert.Equal(t, m.String(), tbl.Programmed().String(), "what the Table believes the kernel holds")

	// Nothing to do: nothing committed.
	st = mustApply(t, tbl)
	assert.Zero(t, st.Operations, "unchanged apply")
	assert.Equal(t, g, f.Generation(), "unchanged apply")

	// A new endpoint: one transaction adding its chain and element.
	m.SetChain(regular("filter-fw-v3", rule("v3", accept)))
	m.SetElement("filter-from-wl", Element{Key: "v3", Verdict: &Verdict{Kind: Goto, Chain: "filter-fw-v3"}})
	mustApply(t, tbl)
	wantFakeHolds(t, f, m)
	assert.Equal(t, g+1, f.Generation(), "one change, one commit")
	tx := lastTx(t, f)
	assert.Equal(t, "1 chain added, 1 element added to map filter-from-wl", tx.Summary())
	assert.Equal(t, f.Generation(), tx.Gen)
	assert.Same(t, tbl.LastTransaction(), tx)

	// Removal: element first, then the chain, in one transaction.
	m.DeleteElement("filter-from-wl", "v3")
	m.DeleteChain("filter-fw-v3")
	mustApply(t, tbl)
	wantFakeHolds(t, f, m)

	// A resync right after our own commits reads nothing.
	rs, err := tbl.Resync(context.Background())
	require.NoError(t, err)
	assert.True(t, rs.Skipped, "resync after our own commits")
	assert.Zero(t, rs.Reads)
	assert.NoError(t, tbl.Close(), "Close of a Table on the Fake")
}

// The Fake refuses what the kernel refuses, naming the operation, and
// applies nothing of a refused transaction.
func TestFakeKernelSemantics(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(m *Model)
		errno  syscall.Errno
		op     string
	}{
		{"jump to a missing chain", func(m *Model) {
			m.SetChain(regular("filter-fw-v2", rule("to nowhere", jump("missing"))))
		}, syscall.ENOENT, `add rule 1 to chain "filter-fw-v2" (comment "to nowhere")`},
		{"jump to a base chain", func(m *Model) {
			m.SetChain(regular("filter-fw-v2", rule("to base", jump("filter-input"))))
		}, syscall.EOPNOTSUPP, `add rule 1 to chain "filter-fw-v2" (comment "to base")`},
		{"a loop", func(m *Model) {
			m.SetChain(regular("filter-fw-v2", rule("to v1", jump("filter-fw-v1"))))
			m.SetChain(regular("filter-fw-v1", rule("to v2", jump("filter-fw-v2"))))
		}, syscall.ELOOP, "commit"},
		{"a loop through a verdict map element", func(m *Model) {
			// filter-fw-v3 looks the map up; a new element sends the
			// map's lookers to a chain that jumps back to v3.
			m.SetChain(regular("filter-fw-v3", rule("dispatch again", VMap{Key: SelIIFName, Map: "filter-from-wl"})))
			m.SetChain(regular("filter-fw-v4", rule("to v3", jump("filter-fw-v3"))))
			m.SetElement("filter-from-wl", Element{Key: "v4", Verdict: &Verdict{Kind: Goto, Chain: "filter-fw-v4"}})
		}, syscall.ELOOP, "commit"},
		{"a set nobody created", func(m *Model) {
			m.SetChain(regular("filter-fw-v2", rule("lookup", accept, Addr{Family: IPv4, Dir: In, Set: "nowhere"})))
		}, syscall.ENOENT, `add rule 1 to chain "filter-fw-v2" (comment "lookup")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake()
			tbl := newFakeTable(t, f, FamilyINet)
			baseModel(tbl.Desired())
			mustApply(t, tbl)
			before, g := f.Dump(), f.Generation()
			tbl.v = noValidation{} // let the model past the engine's own checks
			tc.change(tbl.Desired())
			_, err := tbl.Apply(context.Background())
			var e *Error
			require.ErrorAs(t, err, &e)
			require.ErrorIs(t, err, tc.errno)
			assert.Equal(t, tc.op, e.Op)
			assert.Equal(t, before, f.Dump(), "a refused transaction changed the Fake")
			assert.Equal(t, g, f.Generation(), "a refused transaction moved the generation")
			assert.True(t, tbl.NeedsResync(), "after a refusal")
		})
	}

	t.Run("foreign changes", func(t *testing.T) {
		f := NewFake()
		tbl := newFakeTable(t, f, FamilyINet)
		baseModel(tbl.Desired())
		mustApply(t, tbl)
		assert.ErrorIs(t, f.DeleteChain(FamilyINet, testTable, "filter-fw-v1"), syscall.EBUSY, "delete a chain a map element refers to")
		assert.ErrorIs(t, f.DeleteElement(FamilyINet, testTable, "allowed", "10.9.9.9"), syscall.ENOENT, "delete a missing element")
		assert.ErrorIs(t, f.DeleteElement(FamilyINet, testTable, "nowhere", "10.9.9.9"), syscall.ENOENT, "delete from a missing set")
		assert.ErrorIs(t, f.FlushChain(FamilyINet, testTable, "missing"), syscall.ENOENT, "flush a missing chain")
		assert.ErrorIs(t, f.InsertRule(FamilyINet, testTable, "filter-fw-v2", rule("loop", jump("filter-fw-v2"))), syscall.ELOOP, "insert a rule that loops")
		assert.ErrorIs(t, f.InsertRule(FamilyINet, testTable, "missing", rule("x", drop)), syscall.ENOENT, "insert into a missing chain")
		assert.ErrorIs(t, f.InsertRule(FamilyINet, "missing", "filter-fw-v2", rule("x", drop)), syscall.ENOENT, "insert into a missing table")
		assert.ErrorIs(t, f.InsertRule(FamilyINet, testTable, "filter-fw-v2", rule("x", jump("missing"))), syscall.ENOENT, "insert a jump to a missing chain")
		assert.Error(t, f.InsertRule(FamilyINet, testTable, "filter-fw-v2", &Rule{}), "insert a rule without an action")
		assert.ErrorIs(t, f.DeleteChain(FamilyINet, testTable, "missing"), syscall.ENOENT, "delete a missing chain")
		assert.ErrorIs(t, f.DeleteTable(FamilyINet, "missing"), syscall.ENOENT, "delete a missing table")
	})

	t.Run("element clash", func(t *testing.T) {
		ft, _, _ := (*fakeTable)(nil).apply(&Op{Kind: OpAddTable})
		ft.chains["a"], ft.chains["b"] = &fakeChain{}, &fakeChain{}
		vmap := &Set{Name: "m", Key: []KeyType{TypeIfName}, Data: DataVerdict}
		add := func(key, chain string) error {
			_, _, err := ft.apply(&Op{Kind: OpAddElements, Name: "m", Set: vmap,
				Elements: []Element{{Key: key, Verdict: &Verdict{Kind: Goto, Chain: chain}}}})
			return err
		}
		_, _, err := ft.apply(&Op{Kind: OpAddSet, Name: "m", Set: vmap})
		require.NoError(t, err)
		require.NoError(t, add("v1", "a"))
		assert.NoError(t, add("v1", "a"), "adding the same element again (no NLM_F_EXCL)")
		assert.ErrorIs(t, add("v1", "b"), syscall.EEXIST, "adding the key with another verdict")
		assert.ErrorIs(t, add("v2", "missing"), syscall.ENOENT, "an element that goes to a missing chain")
		ft.chains["base"] = &fakeChain{base: &BaseChain{Type: ChainTypeFilter, Hook: HookInput, Priority: PriorityFilter}}
		assert.ErrorIs(t, add("v3", "base"), syscall.EOPNOTSUPP, "an element that goes to a base chain")
		_, _, err = ft.apply(&Op{Kind: OpAddSet, Name: "m", Set: &Set{Name: "m", Key: []KeyType{TypeIPv4Addr}}})
		assert.ErrorIs(t, err, syscall.EEXIST, "the set again with another definition")
		allowed := &Set{Name: "ranges", Key: []KeyType{TypeIPv4Addr}, Interval: true}
		_, _, err = ft.apply(&Op{Kind: OpAddSet, Name: "ranges", Set: allowed, Elements: []Element{{Key: "10.0.0.0/8"}}})
		require.NoError(t, err)
		_, _, err = ft.apply(&Op{Kind: OpAddElements, Name: "ranges", Set: allowed, Elements: []Element{{Key: "10.1.0.0/16"}}})
		assert.ErrorIs(t, err, syscall.EEXIST, "an overlapping interval")
		_, _, err = ft.apply(&Op{Kind: OpAddElements, Name: "nowhere", Set: allowed, Elements: []Element{{Key: "10.1.0.0/16"}}})
		assert.ErrorIs(t, err, syscall.ENOENT, "elements of a missing set")
		_, _, err = ft.apply(&Op{Kind: OpDeleteElements, Name: "nowhere", Set: allowed, Elements: []Element{{Key: "10.1.0.0/16"}}})
		assert.ErrorIs(t, err, syscall.ENOENT, "delete elements of a missing set")
		_, _, err = ft.apply(&Op{Kind: OpDeleteSet, Name: "nowhere"})
		assert.ErrorIs(t, err, syscall.ENOENT, "delete a missing set")
		_, _, err = ft.apply(&Op{Kind: OpAddRules, Name: "nowhere", Chain: regular("nowhere", rule("x", drop))})
		assert.ErrorIs(t, err, syscall.ENOENT, "rules of a missing chain")
		_, _, err = ft.apply(&Op{Kind: OpKind(99)})
		assert.ErrorIs(t, err, syscall.EOPNOTSUPP, "an operation the Fake does not know")
		_, _, err = (*fakeTable)(nil).apply(&Op{Kind: OpAddChain, Name: "x", Chain: regular("x")})
		assert.ErrorIs(t, err, syscall.ENOENT, "a chain without its table")
	})
}

func mustForeign(t *testing.T, err error) {
	t.Helper()
	require.NoError(t, err, "foreign change")
}

// TestFakeResyncRepairsForeignChanges: what someone else does to our table
// is found by a resync and repaired in one transaction; their own table is
// never touched.
func TestFakeResyncRepairsForeignChanges(t *testing.T) {
	f := NewFake()
	tbl := newFakeTable(t, f, FamilyINet)
	m := tbl.Desired()
	baseModel(m)
	mustApply(t, tbl)
	mustForeign(t, f.AddTable(FamilyINet, "filter"))

	for _, tc := range []struct {
		name   string
		change func() error
		want   Drift
	}{
		{"flushed chain", func() error { return f.FlushChain(FamilyINet, testTable, "filter-fw-v1") }, Drift{ChainsDiffer: 1}},
		{"inserted rule", func() error {
			return f.InsertRule(FamilyINet, testTable, "filter-fw-v2", rule("theirs", drop))
		}, Drift{ChainsDiffer: 1}},
		{"deleted element", func() error { return f.DeleteElement(FamilyINet, testTable, "allowed", "10.0.0.1") }, Drift{ElementsMissing: 1}},
		{"deleted table", func() error { return f.DeleteTable(FamilyINet, testTable) }, Drift{TableMissing: true, ChainsMissing: 3, SetsMissing: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mustForeign(t, tc.change())
			rs, err := tbl.Resync(context.Background())
			require.NoError(t, err)
			assert.False(t, rs.Skipped)
			assert.Equal(t, tc.want, rs.Drift)
			assert.Equal(t, 1, rs.Apply.Batches, "one repair transaction")
			wantFakeHolds(t, f, m)
			assert.True(t, f.HasTable(FamilyINet, "filter"), "the foreign table is still there")
		})
	}
}

// stagedModel is baseModel with n more endpoint chains of 3 rules each,
// dispatched to through the map: with stageMinRules 10 and stageRules 4,
// a cold start of it is staged.
func stagedModel(m *Model, n int) {
	baseModel(m)
	for i := range n {
		name := "filter-fw-s" + string(rune('a'+i))
		m.SetChain(regular(name, rule("one", accept), rule("two", accept), rule("three", drop)))
		m.SetElement("filter-from-wl", Element{Key: "s" + string(rune('a'+i)), Verdict: &Verdict{Kind: Goto, Chain: name}})
	}
}

// dispatching reports whether the Fake's base chain filter-input holds
// rules: before it does, no packet reaches anything the table holds.
func dispatching(f *Fake) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft := f.tables[fakeKey{FamilyINet, testTable}]
	return ft != nil && ft.chains["filter-input"] != nil && len(ft.chains["filter-input"].rules) > 0
}

// TestFakeStagedColdStart: a large cold start goes in several transactions,
// and nothing is reachable before the last.
func TestFakeStagedColdStart(t *testing.T) {
	f := NewFake()
	tbl := newFakeTable(t, f, FamilyINet)
	tbl.tune.stageMinRules, tbl.tune.stageRules = 10, 4
	stagedModel(tbl.Desired(), 6)
	var published []bool
	f.OnCommit(func() { published = append(published, dispatching(f)) })
	st := mustApply(t, tbl)
	require.GreaterOrEqual(t, st.Batches, 3, "cold start staged")
	require.Len(t, published, st.Batches)
	for i, p := range published[:len(published)-1] {
		assert.False(t, p, "batch %d of %d already made the base chain dispatch", i+1, len(published))
	}
	assert.True(t, published[len(published)-1], "the last batch made the base chain dispatch")
	wantFakeHolds(t, f, tbl.Desired())
}

// TestFakeWatch: Watch notifies once subscribed and after a change to the
// table, not after a change to another table.
func TestFakeWatch(t *testing.T) {
	f := NewFake()
	tbl := newFakeTable(t, f, FamilyINet)
	baseModel(tbl.Desired())
	mustApply(t, tbl)
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan struct{}, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tbl.Watch(ctx, func() { events <- struct{}{} })
	}()
	wait := func(what string) {
		t.Helper()
		select {
		case <-events:
		case <-time.After(5 * time.Second):
			require.FailNow(t, "no notification "+what)
		}
	}
	wait("on subscribing")
	mustForeign(t, f.AddTable(FamilyINet, "other"))
	mustForeign(t, f.FlushChain(FamilyINet, testTable, "filter-fw-v2"))
	wait("after a flush of our chain")
	cancel()
	<-done
	assert.Empty(t, events, "notifications beyond the two changes to our table")
}

// TestFakeRejectedBatch: an injected refusal is an *Error, not state
// unknown, and the next Apply reads the table back first.
func TestFakeRejectedBatch(t *testing.T) {
	f := NewFake()
	tbl := newFakeTable(t, f, FamilyINet)
	m := tbl.Desired()
	baseModel(m)
	mustApply(t, tbl)
	f.FailNext(syscall.ENOMEM)
	m.SetElement("allowed", Element{Key: "10.0.0.2"})
	_, err := tbl.Apply(context.Background())
	require.ErrorIs(t, err, syscall.ENOMEM)
	assert.False(t, IsStateUnknown(err))
	st := mustApply(t, tbl)
	assert.True(t, st.Resynced, "the Apply after a refusal read the table back")
	wantFakeHolds(t, f, m)
}

// TestFakeDelete: Delete removes the table; deleting a missing one is no
// error.
func TestFakeDelete(t *testing.T) {
	f := NewFake()
	tbl := newFakeTable(t, f, FamilyINet)
	baseModel(tbl.Desired())
	mustApply(t, tbl)
	for range 2 {
		require.NoError(t, tbl.Delete(context.Background()))
		assert.Equal(t, "table deleted", tbl.LastTransaction().Summary())
	}
	assert.False(t, f.HasTable(FamilyINet, testTable), "the table survived Delete")
	assert.Empty(t, f.Dump())
	assert.Empty(t, f.DumpTable(FamilyINet, testTable))
	mustApply(t, tbl)
	wantFakeHolds(t, f, tbl.Desired())
}

// TestFakeMatchesKernel runs one sequence of models and foreign changes
// through a Table on the kernel and one on the Fake. After every step both
// hold the model, the transactions have the same size, and resyncs find
// the same drift: what the Fake accepts, refuses and reads back is what the
// kernel does, so tests on the Fake mean something.
func TestFakeMatchesKernel(t *testing.T) {
	ns := netnstest.New(t)
	f := NewFake()
	kt, ft := newKernelTable(t, ns), newFakeTable(t, f, FamilyINet)
	models := []*Model{kt.Desired(), ft.Desired()}
	each := func(fn func(m *Model)) {
		for _, m := range models {
			fn(m)
		}
	}
	check := func(step string, sk, sf ApplyStats) {
		t.Helper()
		assert.Equal(t, []int{sk.Operations, sk.Messages, sk.Batches}, []int{sf.Operations, sf.Messages, sf.Batches},
			"%s: operations, messages and batches, kernel against Fake", step)
		assertKernelHolds(t, ns, kt.Desired())
		wantFakeHolds(t, f, ft.Desired())
	}
	apply := func(step string, change func(m *Model)) {
		t.Helper()
		each(change)
		check(step, mustApply(t, kt), mustApply(t, ft))
	}
	resync := func(step string, kernel func(), fake func() error) {
		t.Helper()
		kernel()
		mustForeign(t, fake())
		rk, err := kt.Resync(context.Background())
		require.NoError(t, err)
		rf, err := ft.Resync(context.Background())
		require.NoError(t, err)
		assert.Equal(t, rk.Drift, rf.Drift, "%s: drift, kernel against Fake", step)
		assert.Equal(t, rk.Skipped, rf.Skipped, "%s: skipped, kernel against Fake", step)
		check(step, rk.Apply, rf.Apply)
	}

	apply("cold", func(m *Model) {
		baseModel(m)
		v := vocabModel(testTable)
		for _, n := range v.SetNames() {
			m.SetSet(v.Set(n))
		}
		for _, n := range v.ChainNames() {
			m.SetChain(v.Chain(n))
		}
	})
	apply("unchanged", func(*Model) {})
	apply("add endpoint", func(m *Model) {
		m.SetChain(regular("filter-fw-v3", rule("v3 default", drop)))
		m.SetElement("filter-from-wl", Element{Key: "v3", Verdict: &Verdict{Kind: Goto, Chain: "filter-fw-v3"}, Comment: "endpoint v3"})
	})
	apply("change chain and element", func(m *Model) {
		m.SetChain(regular("filter-fw-v3", rule("v3 established", accept, CtStateMatch{States: CtStateEstablished}), rule("v3 default", drop)))
		m.SetElement("filter-from-wl", Element{Key: "v2", Verdict: &Verdict{Kind: Goto, Chain: "filter-fw-v3"}})
	})
	apply("set elements", func(m *Model) {
		m.SetElement("allowed", Element{Key: "10.0.0.2"})
		m.DeleteElement("allowed", "10.0.0.1")
	})
	apply("remove endpoint", func(m *Model) {
		m.DeleteElement("filter-from-wl", "v1")
		m.DeleteChain("filter-fw-v1")
	})
	apply("priority", func(m *Model) {
		c := *m.Chain("filter-input")
		b := *c.Base
		b.Priority = 10
		c.Base = &b
		m.SetChain(&c)
	})
	apply("set definition", func(m *Model) {
		s := *m.Set("allowed")
		s.Comment = "now with a comment"
		s.Elements = map[string]Element{"10.0.0.9": {Key: "10.0.0.9"}}
		m.SetSet(&s)
	})

	resync("flushed chain",
		func() { ns.Run(t, "nft", "flush chain inet nftep filter-fw-v2") },
		func() error { return f.FlushChain(FamilyINet, testTable, "filter-fw-v2") })
	resync("inserted rule",
		func() { ns.Run(t, "nft", "insert rule inet nftep filter-fw-v3 drop") },
		func() error { return f.InsertRule(FamilyINet, testTable, "filter-fw-v3", &Rule{Action: drop}) })
	resync("deleted element",
		func() { ns.Run(t, "nft", "delete element inet nftep allowed { 10.0.0.9 }") },
		func() error { return f.DeleteElement(FamilyINet, testTable, "allowed", "10.0.0.9") })
	resync("deleted table",
		func() { ns.Run(t, "nft", "delete table inet nftep") },
		func() error { return f.DeleteTable(FamilyINet, testTable) })
	resync("nothing", func() {}, func() error { return nil })
}

// A resync that read drift but did not commit (the plan failed, or the
// context ended) leaves the drift to the next Apply: the read's state is
// compared whole, not only the model's changes since the last commit.
func TestResyncWithoutCommitKeepsDrift(t *testing.T) {
	for _, tc := range []struct {
		name   string
		resync func(tbl *Table) error
	}{
		{"invalid model", func(tbl *Table) error {
			tbl.Desired().SetChain(regular("bad", rule("x", jump("nowhere"))))
			_, err := tbl.Resync(context.Background())
			tbl.Desired().DeleteChain("bad")
			return err
		}},
		{"context ended", func(tbl *Table) error {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := tbl.Resync(ctx)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake()
			tbl := newFakeTable(t, f, FamilyINet)
			baseModel(tbl.Desired())
			mustApply(t, tbl)
			mustForeign(t, f.FlushChain(FamilyINet, testTable, "filter-fw-v1"))
			require.Error(t, tc.resync(tbl), "the resync did not fail")
			mustApply(t, tbl)
			wantFakeHolds(t, f, tbl.Desired())
		})
	}
}

// TestFakeInPlace: a Fake that commits in place ends with the tables a
// copying one does, and still refuses a loop made by a new verdict map
// element (found through the chains that look the map up, kept with the
// reference counts).
func TestFakeInPlace(t *testing.T) {
	ctx := context.Background()
	build := func(inPlace bool) (*Fake, *Table) {
		f := NewFake()
		if inPlace {
			f.InPlace()
		}
		tbl, err := NewTable(TableConfig{Family: FamilyINet, Name: testTable, Transport: f})
		if err != nil {
			t.Fatal(err)
		}
		return f, tbl
	}
	fc, copying := build(false)
	fi, inPlace := build(true)
	for _, tbl := range []*Table{copying, inPlace} {
		recordNode(tbl.Desired(), "a", "b", "c")
		tbl.Desired().SetChain(regular("disp", rule("dispatch again", VMap{Key: SelIIFName, Map: "from-wl"})))
		if _, err := tbl.Apply(ctx); err != nil {
			t.Fatal(err)
		}
		m := tbl.Desired()
		m.DeleteElement("from-wl", "b")
		m.DeleteChain("ep-b")
		m.SetChain(regular("ep-d", rule("to policy", jump("pol"))))
		m.SetElement("from-wl", Element{Key: "d", Verdict: &Verdict{Kind: Goto, Chain: "ep-d"}})
		if _, err := tbl.Apply(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := fc.Dump(), fi.Dump(); a != b {
		t.Errorf("in place:\n%s\ncopying:\n%s", b, a)
	}
	for _, tbl := range []*Table{copying, inPlace} {
		m := tbl.Desired()
		m.SetChain(regular("ep-e", rule("back to the dispatch", jump("disp"))))
		m.SetElement("from-wl", Element{Key: "e", Verdict: &Verdict{Kind: Goto, Chain: "ep-e"}})
		if _, err := tbl.Apply(ctx); !errors.Is(err, syscall.ELOOP) {
			t.Errorf("a loop through the map: %v, want ELOOP", err)
		}
	}
}

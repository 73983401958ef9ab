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
	"github.com/nftep/nftep/internal/netnstest"
)

func newFakeTable(t *testing.T, f *Fake, family Family) *Table {
	t.Helper()
	tbl, err := NewTable(TableConfig{Family: family, Name: testTable, Transport: f})
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

// wantFakeHolds checks that the Fake holds exactly the model.
func wantFakeHolds(t *testing.T, f *Fake, m *Model) {
	t.Helper()
	if diff := cmp.Diff(m.String(), f.DumpTable(m.Family, m.Name)); diff != "" {
		t.Fatalf("the Fake's table differs from the model (-model +fake):\n%s", diff)
	}
}

func TestFakeApplyIncremental(t *testing.T) {
	f := NewFake()
	tbl := newFakeTable(t, f, FamilyINet)
	m := tbl.Desired()
	baseModel(m)

	st := mustApply(t, tbl)
	if !st.Resynced || st.Operations == 0 || st.Messages == 0 {
		t.Errorf("cold apply: %+v; want a first read and operations", st)
	}
	wantFakeHolds(t, f, m)
	g := f.Generation()

	// Nothing to do: nothing committed.
	if st := mustApply(t, tbl); st.Operations != 0 || f.Generation() != g {
		t.Errorf("unchanged apply: %d operations, generation %d → %d", st.Operations, g, f.Generation())
	}

	// A new endpoint: one transaction adding its chain and element.
	m.SetChain(regular("filter-fw-v3", rule("v3", accept)))
	m.SetElement("filter-from-wl", Element{Key: "v3", Verdict: &Verdict{Kind: Goto, Chain: "filter-fw-v3"}})
	mustApply(t, tbl)
	wantFakeHolds(t, f, m)
	if f.Generation() != g+1 {
		t.Errorf("one change moved the generation %d → %d, want one commit", g, f.Generation())
	}
	tx := f.Transactions()[len(f.Transactions())-1]
	if got := tx.Summary(); got != "1 chain added, 1 element added to map filter-from-wl" {
		t.Errorf("transaction: %s", got)
	}

	// Removal: element first, then the chain, in one transaction.
	m.DeleteElement("filter-from-wl", "v3")
	m.DeleteChain("filter-fw-v3")
	mustApply(t, tbl)
	wantFakeHolds(t, f, m)

	// A resync right after our own commits reads nothing.
	rs, err := tbl.Resync(context.Background())
	if err != nil || !rs.Skipped {
		t.Errorf("resync after our own commits: skipped %v, err %v", rs.Skipped, err)
	}
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
			if !errors.As(err, &e) || !errors.Is(err, tc.errno) || e.Op != tc.op {
				t.Fatalf("Apply: %v; want %v at %q", err, tc.errno, tc.op)
			}
			if f.Dump() != before || f.Generation() != g {
				t.Errorf("a refused transaction changed the Fake")
			}
			if !tbl.NeedsResync() {
				t.Errorf("NeedsResync is false after a refusal")
			}
		})
	}

	t.Run("foreign changes", func(t *testing.T) {
		f := NewFake()
		tbl := newFakeTable(t, f, FamilyINet)
		baseModel(tbl.Desired())
		mustApply(t, tbl)
		if err := f.DeleteChain(FamilyINet, testTable, "filter-fw-v1"); !errors.Is(err, syscall.EBUSY) {
			t.Errorf("delete a chain a map element refers to: %v, want EBUSY", err)
		}
		if err := f.DeleteElement(FamilyINet, testTable, "allowed", "10.9.9.9"); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("delete a missing element: %v, want ENOENT", err)
		}
		if err := f.FlushChain(FamilyINet, testTable, "missing"); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("flush a missing chain: %v, want ENOENT", err)
		}
		if err := f.InsertRule(FamilyINet, testTable, "filter-fw-v2", rule("loop", jump("filter-fw-v2"))); !errors.Is(err, syscall.ELOOP) {
			t.Errorf("insert a rule that loops: %v, want ELOOP", err)
		}
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
		if _, _, err := ft.apply(&Op{Kind: OpAddSet, Name: "m", Set: vmap}); err != nil {
			t.Fatal(err)
		}
		if err := add("v1", "a"); err != nil {
			t.Fatal(err)
		}
		if err := add("v1", "a"); err != nil {
			t.Errorf("adding the same element again: %v, want nothing (no NLM_F_EXCL)", err)
		}
		if err := add("v1", "b"); !errors.Is(err, syscall.EEXIST) {
			t.Errorf("adding the key with another verdict: %v, want EEXIST", err)
		}
		if err := add("v2", "missing"); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("an element that goes to a missing chain: %v, want ENOENT", err)
		}
		allowed := &Set{Name: "ranges", Key: []KeyType{TypeIPv4Addr}, Interval: true}
		if _, _, err := ft.apply(&Op{Kind: OpAddSet, Name: "ranges", Set: allowed, Elements: []Element{{Key: "10.0.0.0/8"}}}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ft.apply(&Op{Kind: OpAddElements, Name: "ranges", Set: allowed, Elements: []Element{{Key: "10.1.0.0/16"}}}); !errors.Is(err, syscall.EEXIST) {
			t.Errorf("an overlapping interval: %v, want EEXIST", err)
		}
	})
}

func mustForeign(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("foreign change: %v", err)
	}
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
			if err != nil {
				t.Fatal(err)
			}
			if rs.Skipped || rs.Drift != tc.want {
				t.Errorf("resync: skipped %v, drift %s; want %s", rs.Skipped, rs.Drift, tc.want)
			}
			wantFakeHolds(t, f, m)
			if !f.HasTable(FamilyINet, "filter") {
				t.Errorf("the foreign table is gone")
			}
		})
	}
}

// TestFakeStagedColdStart: a large cold start goes in several transactions,
// and nothing is reachable before the last.
func TestFakeStagedColdStart(t *testing.T) {
	f := NewFake()
	tbl := newFakeTable(t, f, FamilyINet)
	tbl.tune.stageMinRules, tbl.tune.stageRules = 10, 4
	m := tbl.Desired()
	baseModel(m)
	for i := range 6 {
		name := "filter-fw-s" + string(rune('a'+i))
		m.SetChain(regular(name, rule("one", accept), rule("two", accept), rule("three", drop)))
		m.SetElement("filter-from-wl", Element{Key: "s" + string(rune('a'+i)), Verdict: &Verdict{Kind: Goto, Chain: name}})
	}
	// Live means: the base chain has its rules (the dispatch through the
	// map); before that no packet reaches anything written.
	var published []bool
	f.OnCommit(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		published = append(published, len(f.tables[fakeKey{FamilyINet, testTable}].chains["filter-input"].rules) > 0)
	})
	st := mustApply(t, tbl)
	if st.Batches < 3 {
		t.Fatalf("cold start in %d batches, want it staged", st.Batches)
	}
	for i, p := range published[:len(published)-1] {
		if p {
			t.Errorf("batch %d of %d already made the base chain dispatch", i+1, len(published))
		}
	}
	if !published[len(published)-1] {
		t.Errorf("the last batch did not make the base chain dispatch")
	}
	wantFakeHolds(t, f, m)
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
			t.Fatalf("no notification %s", what)
		}
	}
	wait("on subscribing")
	mustForeign(t, f.AddTable(FamilyINet, "other"))
	mustForeign(t, f.FlushChain(FamilyINet, testTable, "filter-fw-v2"))
	wait("after a flush of our chain")
	cancel()
	<-done
	if len(events) != 0 {
		t.Errorf("%d notifications more than the two changes to our table", len(events))
	}
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
	if !errors.Is(err, syscall.ENOMEM) || IsStateUnknown(err) {
		t.Fatalf("Apply: %v", err)
	}
	if st := mustApply(t, tbl); !st.Resynced {
		t.Errorf("the Apply after a refusal did not read the table back")
	}
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
		if err := tbl.Delete(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if f.HasTable(FamilyINet, testTable) {
		t.Errorf("the table survived Delete")
	}
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
		if sk.Operations != sf.Operations || sk.Messages != sf.Messages || sk.Batches != sf.Batches {
			t.Errorf("%s: kernel %d operations in %d messages and %d batches, Fake %d in %d and %d",
				step, sk.Operations, sk.Messages, sk.Batches, sf.Operations, sf.Messages, sf.Batches)
		}
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
		if err != nil {
			t.Fatal(err)
		}
		rf, err := ft.Resync(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if rk.Drift != rf.Drift || rk.Skipped != rf.Skipped {
			t.Errorf("%s: kernel drift %s (skipped %v), Fake %s (skipped %v)", step, rk.Drift, rk.Skipped, rf.Drift, rf.Skipped)
		}
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
			if err := tc.resync(tbl); err == nil {
				t.Fatal("the resync did not fail")
			}
			mustApply(t, tbl)
			wantFakeHolds(t, f, tbl.Desired())
		})
	}
}

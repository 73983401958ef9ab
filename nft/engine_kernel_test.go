package nft

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables"

	"github.com/nftep/nftep/internal/netnstest"
)

// Conventions of the engine's kernel tests: every test makes its own
// namespace; the table is `inet nftep`; the kernel's state is checked with
// the real nft (`nft list table`) against Model.String, block by block,
// because objects added by incremental applies are listed after the older
// ones while Model.String sorts them.

const testTable = "nftep"

func newKernelTable(t *testing.T, ns *netnstest.NS) *Table {
	t.Helper()
	tbl, err := NewTable(TableConfig{Family: FamilyINet, Name: testTable, NetNSFd: ns.Fd()})
	if err != nil {
		t.Fatalf("NewTable: %v", err)
	}
	return tbl
}

func mustApply(t *testing.T, tbl *Table) ApplyStats {
	t.Helper()
	st, err := tbl.Apply(context.Background())
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return st
}

func gen(t *testing.T, ns *netnstest.NS) uint32 {
	t.Helper()
	g, err := GetGeneration(context.Background(), ns.Fd())
	if err != nil {
		t.Fatalf("GetGeneration: %v", err)
	}
	return g
}

var blockStart = regexp.MustCompile(`^\t(chain|set|map) (\S+) \{$`)

// blocks splits `nft list table` text (or Model.String) into its sets,
// maps and chains, keyed "chain NAME" etc., each with its lines trimmed.
func blocks(text string) map[string]string {
	out := map[string]string{}
	var key string
	var cur []string
	for _, l := range strings.Split(text, "\n") {
		if m := blockStart.FindStringSubmatch(l); m != nil {
			key = m[1] + " " + m[2]
			cur = nil
			continue
		}
		if key == "" {
			continue
		}
		if l == "\t}" {
			out[key] = strings.Join(cur, "\n")
			key = ""
			continue
		}
		cur = append(cur, strings.TrimSpace(l))
	}
	return out
}

// assertKernelHolds checks that nft lists exactly m (up to the order of
// sets and chains).
func assertKernelHolds(t *testing.T, ns *netnstest.NS, m *Model) {
	t.Helper()
	got := ns.Run(t, "nft", "list", "table", "inet", m.Name)
	if diff := cmp.Diff(blocks(m.String()), blocks(got)); diff != "" {
		t.Fatalf("nft list table inet %s differs from the model (-model +kernel):\n%s", m.Name, diff)
	}
}

// trimmedLines splits text into lines without surrounding whitespace.
func trimmedLines(s string) []string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return lines
}

func regular(name string, rules ...*Rule) *Chain { return &Chain{Name: name, Rules: rules} }

func rule(comment string, a Action, ms ...Match) *Rule {
	return &Rule{Match: ms, Action: a, Comment: comment}
}

func jump(c string) Verdict { return Verdict{Kind: Jump, Chain: c} }
func goTo(c string) Verdict { return Verdict{Kind: Goto, Chain: c} }

var (
	accept = Verdict{Kind: Accept}
	drop   = Verdict{Kind: Drop}
	ret    = Verdict{Kind: Return}
)

// TestKernelColdApplyListsModel applies the vocabulary's table (every match,
// action and set kind) through Table and checks that nft lists exactly
// Model.String, text for text: the cold-start order (sets and chains in
// print order, elements in the printer's order) is what makes that hold.
func TestKernelColdApplyListsModel(t *testing.T) {
	ns := netnstest.New(t)
	tbl := newKernelTable(t, ns)
	m := vocabModel(testTable)
	for _, n := range m.SetNames() {
		tbl.Desired().SetSet(m.Set(n))
	}
	for _, n := range m.ChainNames() {
		tbl.Desired().SetChain(m.Chain(n))
	}
	st := mustApply(t, tbl)
	if !st.Resynced || st.Operations == 0 {
		t.Errorf("first Apply: stats %+v, want a resync and operations", st)
	}
	got := ns.Run(t, "nft", "list", "table", "inet", testTable)
	if diff := cmp.Diff(trimmedLines(m.String()), trimmedLines(got)); diff != "" {
		t.Fatalf("nft list differs from Model.String (-want +got):\n%s", diff)
	}
	// And a resync of what we just wrote finds nothing to do.
	tbl.genKnown = false
	rs, err := tbl.Resync(context.Background())
	if err != nil {
		t.Fatalf("Resync: %v", err)
	}
	if rs.Skipped || rs.Drift.Any() || rs.Apply.Operations != 0 {
		t.Errorf("resync after a cold apply: skipped %v, drift %s, %d operations; want a read with no drift", rs.Skipped, rs.Drift, rs.Apply.Operations)
	}
}

// baseModel is a small dispatch table: a filter-input base chain that sends
// packets through an ifname verdict map, two endpoint chains, a set.
func baseModel(m *Model) {
	m.SetSet(&Set{Name: "filter-from-wl", Key: []KeyType{TypeIfName}, Data: DataVerdict})
	m.SetSet(&Set{Name: "allowed", Key: []KeyType{TypeIPv4Addr}})
	m.SetChain(&Chain{Name: "filter-input", Base: &BaseChain{Type: ChainTypeFilter, Hook: HookInput, Priority: PriorityFilter, Policy: PolicyAccept},
		Rules: []*Rule{
			rule("dispatch from workloads", VMap{Key: SelIIFName, Map: "filter-from-wl"}),
		}})
	m.SetChain(regular("filter-fw-v1",
		rule("established", accept, CtStateMatch{States: CtStateEstablished | CtStateRelated}),
		rule("allowed sources", accept, Addr{Family: IPv4, Dir: In, Set: "allowed"}),
		rule("default drop", drop)))
	m.SetChain(regular("filter-fw-v2", rule("accept", accept)))
	m.SetElement("filter-from-wl", Element{Key: "v1", Verdict: &Verdict{Kind: Goto, Chain: "filter-fw-v1"}})
	m.SetElement("filter-from-wl", Element{Key: "v2", Verdict: &Verdict{Kind: Goto, Chain: "filter-fw-v2"}})
	m.SetElement("allowed", Element{Key: "10.0.0.1"})
}

// TestKernelIncremental walks a table through additions, changes and
// removals of chains, map elements and set elements. After every step the
// kernel lists exactly the model, each apply is one transaction (the
// generation moves by one), and an apply with nothing to do sends nothing
// (the generation stays).
func TestKernelIncremental(t *testing.T) {
	ns := netnstest.New(t)
	tbl := newKernelTable(t, ns)
	m := tbl.Desired()
	baseModel(m)

	step := func(name string, change func(), wantOps int) {
		t.Helper()
		before := gen(t, ns)
		change()
		st := mustApply(t, tbl)
		after := gen(t, ns)
		if wantOps >= 0 && st.Operations != wantOps {
			t.Errorf("%s: %d operations, want %d:\n%s", name, st.Operations, wantOps, tbl.LastTransaction())
		}
		switch {
		case st.Operations == 0 && after != before:
			t.Errorf("%s: nothing to apply, yet the generation moved %d → %d", name, before, after)
		case st.Operations > 0 && after != before+1:
			t.Errorf("%s: generation moved %d → %d, want one transaction", name, before, after)
		}
		assertKernelHolds(t, ns, m)
		if diff := cmp.Diff(m.String(), tbl.Programmed().String()); diff != "" {
			t.Errorf("%s: Programmed differs from Desired (-want +got):\n%s", name, diff)
		}
	}

	// 1. Cold start.
	step("cold", func() {}, -1)
	// 2. Nothing changed: nothing sent.
	step("unchanged", func() {}, 0)
	// 3. The same chain rebuilt as a new object: still nothing.
	step("same content", func() {
		m.SetChain(regular("filter-fw-v2", rule("accept", accept)))
	}, 0)
	// 4. A new endpoint: add chain + 1 rule + map element = 3.
	step("add endpoint", func() {
		m.SetChain(regular("filter-fw-v3", rule("v3 default", drop)))
		m.SetElement("filter-from-wl", Element{Key: "v3", Verdict: &Verdict{Kind: Goto, Chain: "filter-fw-v3"}, Comment: "endpoint v3"})
	}, 3)
	// 5. A changed chain: flush + 2 rules.
	step("change chain", func() {
		m.SetChain(regular("filter-fw-v3", rule("v3 established", accept, CtStateMatch{States: CtStateEstablished}), rule("v3 default", drop)))
	}, 3)
	// 6. A changed map value: delete + add of the key.
	step("change element", func() {
		m.SetElement("filter-from-wl", Element{Key: "v2", Verdict: &Verdict{Kind: Goto, Chain: "filter-fw-v3"}})
	}, 2)
	// 7. Set elements come and go.
	step("set elements", func() {
		m.SetElement("allowed", Element{Key: "10.0.0.2"})
		m.SetElement("allowed", Element{Key: "10.0.0.3"})
		m.DeleteElement("allowed", "10.0.0.1")
	}, 3)
	// 8. An endpoint goes: element, then its chain (flush + delete), in one
	// batch: the element's reference goes before the chain.
	step("remove endpoint", func() {
		m.DeleteElement("filter-from-wl", "v1")
		m.DeleteChain("filter-fw-v1")
	}, 3)
	// 9. A base chain's policy changes in place; its priority by recreate.
	step("policy", func() {
		c := *m.Chain("filter-input")
		b := *c.Base
		b.Policy = PolicyDrop
		c.Base = &b
		m.SetChain(&c)
	}, 1)
	step("priority", func() {
		c := *m.Chain("filter-input")
		b := *c.Base
		b.Priority = 10
		c.Base = &b
		m.SetChain(&c)
	}, -1)
	// 10. A set's definition changes: delete + recreate, with the chain
	// that uses it rewritten in the same batch.
	step("set definition", func() {
		s := *m.Set("allowed")
		s.Comment = "now with a comment"
		s.Elements = map[string]Element{"10.0.0.9": {Key: "10.0.0.9"}}
		m.SetSet(&s)
	}, -1)
	// 11. Unchanged again.
	step("unchanged again", func() {}, 0)
}

// TestKernelDispatch sends real packets: namespace A has two veths, to B
// (v1) and to C (v2); A's filter-input dispatches by input interface through
// a verdict map, v1 to a chain that accepts, v2 to one that drops. UDP from B
// arrives, from C does not.
func TestKernelDispatch(t *testing.T) {
	a, b, c := netnstest.New(t), netnstest.New(t), netnstest.New(t)
	netnstest.Veth(t, a, "v1", b, "peer")
	netnstest.Veth(t, a, "v2", c, "peer")
	a.AddAddr(t, "v1", "10.0.1.1/24")
	b.AddAddr(t, "peer", "10.0.1.2/24")
	a.AddAddr(t, "v2", "10.0.2.1/24")
	c.AddAddr(t, "peer", "10.0.2.2/24")

	tbl := newKernelTable(t, a)
	m := tbl.Desired()
	m.SetSet(&Set{Name: "filter-from-wl", Key: []KeyType{TypeIfName}, Data: DataVerdict})
	m.SetChain(&Chain{Name: "filter-input", Base: &BaseChain{Type: ChainTypeFilter, Hook: HookInput, Priority: PriorityFilter, Policy: PolicyAccept},
		Rules: []*Rule{rule("dispatch", VMap{Key: SelIIFName, Map: "filter-from-wl"})}})
	m.SetChain(regular("accept-chain", rule("allowed endpoint", accept)))
	m.SetChain(regular("drop-chain", rule("denied endpoint", drop)))
	m.SetElement("filter-from-wl", Element{Key: "v1", Verdict: &Verdict{Kind: Jump, Chain: "accept-chain"}})
	m.SetElement("filter-from-wl", Element{Key: "v2", Verdict: &Verdict{Kind: Jump, Chain: "drop-chain"}})
	mustApply(t, tbl)

	var conn *net.UDPConn
	if err := a.Do(func() error {
		var err error
		conn, err = net.ListenUDP("udp4", &net.UDPAddr{Port: 7777})
		return err
	}); err != nil {
		t.Fatalf("listen in A: %v", err)
	}
	defer conn.Close()

	send := func(from *netnstest.NS, to string, payload string) {
		t.Helper()
		if err := from.Do(func() error {
			s, err := net.Dial("udp4", to)
			if err != nil {
				return err
			}
			defer s.Close()
			_, err = s.Write([]byte(payload))
			return err
		}); err != nil {
			t.Fatalf("send %q: %v", payload, err)
		}
	}
	received := func() []string {
		var got []string
		buf := make([]byte, 100)
		for {
			_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			n, err := conn.Read(buf)
			if err != nil {
				break
			}
			got = append(got, string(buf[:n]))
		}
		sort.Strings(got)
		return got
	}
	send(b, "10.0.1.1:7777", "from B via v1")
	send(c, "10.0.2.1:7777", "from C via v2")
	if diff := cmp.Diff([]string{"from B via v1"}, received()); diff != "" {
		t.Errorf("packets received (-want +got):\n%s", diff)
	}

	// Swap the verdicts: now C gets through and B does not.
	m.SetElement("filter-from-wl", Element{Key: "v1", Verdict: &Verdict{Kind: Jump, Chain: "drop-chain"}})
	m.SetElement("filter-from-wl", Element{Key: "v2", Verdict: &Verdict{Kind: Jump, Chain: "accept-chain"}})
	mustApply(t, tbl)
	send(b, "10.0.1.1:7777", "from B via v1")
	send(c, "10.0.2.1:7777", "from C via v2")
	if diff := cmp.Diff([]string{"from C via v2"}, received()); diff != "" {
		t.Errorf("packets received after the swap (-want +got):\n%s", diff)
	}
}

// noValidation lets a test push what validation would stop at the kernel.
type noValidation struct{}

func (noValidation) chain(*Model, *Chain) error           { return nil }
func (noValidation) set(*Model, *Set) error               { return nil }
func (noValidation) element(*Model, *Set, *Element) error { return nil }
func (noValidation) additions(*Set, []Element, heldElements) error {
	return nil
}

// TestKernelRejectedBatch makes the kernel refuse a transaction, once for a
// jump to a base chain (EOPNOTSUPP, validation bypassed) and once for a jump
// loop (EMLINK, which validation does not look for): the table is exactly as
// before, and the error names the transaction and the operation.
func TestKernelRejectedBatch(t *testing.T) {
	ns := netnstest.New(t)
	tbl := newKernelTable(t, ns)
	m := tbl.Desired()
	baseModel(m)
	mustApply(t, tbl)
	before := ns.Run(t, "nft", "list", "table", "inet", testTable)
	g := gen(t, ns)

	check := func(name string, wantErr error, wantText ...string) {
		t.Helper()
		_, err := tbl.Apply(context.Background())
		if err == nil {
			t.Fatalf("%s: Apply succeeded, want %v", name, wantErr)
		}
		if !errors.Is(err, wantErr) {
			t.Errorf("%s: error %v, want %v", name, err, wantErr)
		}
		var e *Error
		if !errors.As(err, &e) || IsStateUnknown(err) {
			t.Errorf("%s: error %T %v: want an *Error with a known outcome", name, err, err)
		}
		for _, w := range wantText {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", name, err, w)
			}
		}
		if after := ns.Run(t, "nft", "list", "table", "inet", testTable); after != before {
			t.Errorf("%s: the table changed:\nbefore\n%s\nafter\n%s", name, before, after)
		}
		if gen(t, ns) != g {
			t.Errorf("%s: the generation moved", name)
		}
		if !tbl.NeedsResync() {
			t.Errorf("%s: NeedsResync is false after a refused batch", name)
		}
	}

	// A jump to a base chain.
	tbl.v = noValidation{}
	m.SetChain(regular("filter-fw-v4", rule("bad", jump("filter-input"))))
	m.SetChain(regular("filter-fw-v5", rule("fine", accept)))
	check("jump to base chain", syscall.EOPNOTSUPP,
		`apply to table inet nftep (2 chains added)`, `add rule 1 to chain "filter-fw-v4" (comment "bad")`)
	m.DeleteChain("filter-fw-v4")
	m.DeleteChain("filter-fw-v5")
	tbl.v = vocabularyValidator{}

	// A loop through chains that the base chain reaches via the map.
	m.SetChain(regular("loop-a", rule("to b", jump("loop-b"))))
	m.SetChain(regular("loop-b", rule("back to a", jump("loop-a"))))
	m.SetElement("filter-from-wl", Element{Key: "v9", Verdict: &Verdict{Kind: Jump, Chain: "loop-a"}})
	check("jump loop", syscall.EMLINK, "2 chains added", "1 element added to map filter-from-wl")

	// Repair the model: the next Apply resyncs and succeeds.
	m.DeleteElement("filter-from-wl", "v9")
	m.DeleteChain("loop-a")
	m.DeleteChain("loop-b")
	st := mustApply(t, tbl)
	if !st.Resynced || st.Operations != 0 {
		t.Errorf("Apply after the refusal: %+v, want a resync with nothing to do", st)
	}
	assertKernelHolds(t, ns, m)
}

// TestKernelResyncRepairsDrift has a second connection delete one of our
// chains, add a rule to another and flush a map, and add a chain of its own
// to our table; Resync restores the model exactly and leaves a foreign table
// in the same namespace alone.
func TestKernelResyncRepairsDrift(t *testing.T) {
	ns := netnstest.New(t)
	tbl := newKernelTable(t, ns)
	m := tbl.Desired()
	baseModel(m)
	mustApply(t, tbl)

	ns.Run(t, "nft", "add table inet foreign")
	ns.Run(t, "nft", "add chain inet foreign c { type filter hook input priority 10; }")
	ns.Run(t, "nft", "add rule inet foreign c counter accept comment \"not ours\"")
	foreign := ns.Run(t, "nft", "list", "table", "inet", "foreign")

	// Nothing touched our table since our commit? The generation moved (the
	// foreign table), so the resync reads, and finds no drift.
	rs, err := tbl.Resync(context.Background())
	if err != nil {
		t.Fatalf("Resync: %v", err)
	}
	if rs.Skipped || rs.Drift.Any() || rs.Apply.Operations != 0 {
		t.Errorf("resync with only a foreign change: %+v", rs)
	}
	// Now nothing at all moved: the resync skips the read.
	if rs, err = tbl.Resync(context.Background()); err != nil || !rs.Skipped {
		t.Errorf("resync with nothing changed: skipped=%v err=%v, want skipped", rs.Skipped, err)
	}

	c := ns.NFTConn(t)
	ours := &nftables.Table{Name: testTable, Family: nftables.TableFamilyINet}
	// The map loses its elements first: the chain it points at can go then.
	c.FlushSet(&nftables.Set{Table: ours, Name: "filter-from-wl"})
	c.DelChain(&nftables.Chain{Table: ours, Name: "filter-fw-v2"})
	if err := c.Flush(); err != nil {
		t.Fatalf("drift: %v", err)
	}
	ns.Run(t, "nft", "add rule inet nftep filter-fw-v1 udp dport 53 accept")
	ns.Run(t, "nft", "add chain inet nftep intruder")
	ns.Run(t, "nft", "add set inet nftep intruders { type ipv4_addr; }")

	rs, err = tbl.Resync(context.Background())
	if err != nil {
		t.Fatalf("Resync: %v", err)
	}
	want := Drift{ChainsMissing: 1, ChainsDiffer: 1, ChainsExtra: 1, SetsExtra: 1, ElementsMissing: 2}
	if rs.Drift != want {
		t.Errorf("drift %s, want %s", rs.Drift, want)
	}
	assertKernelHolds(t, ns, m)
	if got := ns.Run(t, "nft", "list", "table", "inet", "foreign"); got != foreign {
		t.Errorf("the foreign table changed:\nbefore\n%s\nafter\n%s", foreign, got)
	}
	// And the repaired table needs nothing more.
	tbl.genKnown = false
	if rs, err = tbl.Resync(context.Background()); err != nil || rs.Drift.Any() {
		t.Errorf("second resync: drift %s, err %v", rs.Drift, err)
	}
}

// TestKernelStagedColdStart lowers the staging thresholds so that a small
// cold start goes in several batches (new chains and sets, their rules in
// parts, then the base chains that publish them), and checks that the
// kernel lists exactly the model, that every batch was a commit, and that
// the table is then handled incrementally as usual.
func TestKernelStagedColdStart(t *testing.T) {
	ns := netnstest.New(t)
	tbl := newKernelTable(t, ns)
	tbl.tune.stageMinRules, tbl.tune.stageRules = 100, 60
	m := tbl.Desired()
	nodeModel(m, 20, 10)
	// A base chain whose policy is set only when it is published.
	c := *m.Chain("filter-output")
	b := *c.Base
	b.Policy = PolicyDrop
	c.Base = &b
	c.Rules = append(append([]*Rule(nil), c.Rules...), rule("allow the rest", accept))
	m.SetChain(&c)
	g0 := gen(t, ns)
	st := mustApply(t, tbl)
	if st.Batches < 4 {
		t.Errorf("cold start in %d batches, want staging", st.Batches)
	}
	if g := gen(t, ns); g != g0+uint32(st.Batches) {
		t.Errorf("generation moved by %d for %d batches", g-g0, st.Batches)
	}
	got := ns.Run(t, "nft", "list", "table", "inet", testTable)
	if diff := cmp.Diff(trimmedLines(m.String()), trimmedLines(got)); diff != "" {
		t.Fatalf("nft list differs from Model.String (-want +got):\n%s", diff)
	}
	addWorkload(m, 20, 10, 0)
	if st := mustApply(t, tbl); st.Batches != 1 || st.Operations != 28 {
		t.Errorf("one more endpoint: %d batches, %d operations", st.Batches, st.Operations)
	}
	assertKernelHolds(t, ns, m)
}

// TestKernelLostRepliesAreStateUnknown makes the kernel's error replies
// overflow a tiny receive buffer (ENOBUFS): the outcome is reported as
// unknown, and the next Apply reads the table back before writing.
func TestKernelLostRepliesAreStateUnknown(t *testing.T) {
	ns := netnstest.New(t)
	tbl := newKernelTable(t, ns)
	m := tbl.Desired()
	baseModel(m)
	mustApply(t, tbl)

	tbl.v, tbl.tr.(*kernelTransport).rcvbuf = noValidation{}, 1
	var rules []*Rule
	for i := 0; i < 2000; i++ {
		rules = append(rules, rule("to nowhere", jump("missing")))
	}
	m.SetChain(regular("many-errors", rules...))
	_, err := tbl.Apply(context.Background())
	if !IsStateUnknown(err) || !errors.Is(err, syscall.ENOBUFS) {
		t.Fatalf("Apply: %v; want ENOBUFS, state unknown", err)
	}
	if !tbl.NeedsResync() {
		t.Errorf("NeedsResync is false after a lost reply")
	}
	tbl.v, tbl.tr.(*kernelTransport).rcvbuf = vocabularyValidator{}, 0
	m.DeleteChain("many-errors")
	if st := mustApply(t, tbl); !st.Resynced {
		t.Errorf("the Apply after a lost reply did not resync")
	}
	assertKernelHolds(t, ns, m)
}

// TestKernelDelete removes our table and only ours; deleting it again is
// not an error, and a later Apply recreates it.
func TestKernelDelete(t *testing.T) {
	ns := netnstest.New(t)
	tbl := newKernelTable(t, ns)
	baseModel(tbl.Desired())
	mustApply(t, tbl)
	ns.Run(t, "nft", "add table inet foreign")
	if err := tbl.Delete(context.Background()); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if out, err := ns.Output("nft", "list", "table", "inet", testTable); err == nil {
		t.Errorf("the table is still there:\n%s", out)
	}
	ns.Run(t, "nft", "list", "table", "inet", "foreign")
	if err := tbl.Delete(context.Background()); err != nil {
		t.Errorf("second Delete: %v", err)
	}
	mustApply(t, tbl)
	assertKernelHolds(t, ns, tbl.Desired())
}

// TestKernelForeignCommitBetweenApplies is the reviewer's sequence: a
// foreign commit to our table lands between two of our applies. The second
// apply's own commit is then one past the generation it read, but that
// generation is not ours: the resync must still read the table and repair
// the flushed chain.
func TestKernelForeignCommitBetweenApplies(t *testing.T) {
	ns := netnstest.New(t)
	tbl := newKernelTable(t, ns)
	m := tbl.Desired()
	baseModel(m)
	mustApply(t, tbl)

	ns.Run(t, "nft", "flush chain inet nftep filter-input")
	m.SetElement("allowed", Element{Key: "10.0.0.2"})
	if st := mustApply(t, tbl); st.Operations != 1 {
		t.Fatalf("second apply: %d operations, want 1", st.Operations)
	}
	rs, err := tbl.Resync(context.Background())
	if err != nil {
		t.Fatalf("Resync: %v", err)
	}
	if rs.Skipped || rs.Drift.ChainsDiffer != 1 {
		t.Errorf("resync after a foreign flush: skipped=%v drift=%s, want a read finding 1 chain differing", rs.Skipped, rs.Drift)
	}
	assertKernelHolds(t, ns, m)

	// Our own consecutive commits, with nothing in between, still let the
	// next resync skip the read.
	m.SetElement("allowed", Element{Key: "10.0.0.3"})
	mustApply(t, tbl)
	m.SetElement("allowed", Element{Key: "10.0.0.4"})
	mustApply(t, tbl)
	if rs, err := tbl.Resync(context.Background()); err != nil || !rs.Skipped {
		t.Errorf("resync after our own applies only: skipped=%v err=%v, want skipped", rs.Skipped, err)
	}
}

// busyNamespace commits to a foreign table of ns in a tight loop (each
// commit bumps the namespace's generation, interrupting any read of ours)
// until the returned stop is called, which reports how many commits ran.
func busyNamespace(t *testing.T, ns *netnstest.NS, workers int) (stop func() int) {
	t.Helper()
	ns.Run(t, "nft", "add table inet busy")
	ns.Run(t, "nft", "add set inet busy s { type ipv4_addr; }")
	done := make(chan struct{})
	counts := make(chan int, workers)
	for w := 0; w < workers; w++ {
		c := ns.NFTConn(t)
		go func() {
			tbl := &nftables.Table{Name: "busy", Family: nftables.TableFamilyINet}
			s := &nftables.Set{Table: tbl, Name: "s", KeyType: nftables.TypeIPAddr}
			n := 0
			deadline := time.Now().Add(20 * time.Second) // bounded even if stop is never called
			for time.Now().Before(deadline) {
				select {
				case <-done:
					counts <- n
					return
				default:
				}
				key := []byte{10, byte(w), byte(n >> 8), byte(n)}
				if err := c.SetAddElements(s, []nftables.SetElement{{Key: key}}); err == nil {
					if c.Flush() == nil {
						n++
					}
				}
				_ = c.SetDeleteElements(s, []nftables.SetElement{{Key: key}})
				if c.Flush() == nil {
					n++
				}
			}
			<-done
			counts <- n
		}()
	}
	return func() int {
		close(done)
		total := 0
		for w := 0; w < workers; w++ {
			total += <-counts
		}
		return total
	}
}

// TestKernelResyncOnBusyNode: another agent commits to its own table all
// the time, so the generation moves during every read of ours. Resync must
// still repair our table from its last read (rather than fail, leaving
// every later Apply failing too), and not claim to know the generation.
func TestKernelResyncOnBusyNode(t *testing.T) {
	ns := netnstest.New(t)
	tbl := newKernelTable(t, ns)
	m := tbl.Desired()
	nodeModel(m, 150, 5) // 300 endpoint chains: rules are read chain by chain
	mustApply(t, tbl)

	ns.Run(t, "nft", "flush chain inet nftep filter-input")
	stop := busyNamespace(t, ns, 2)
	// The busy loop alone interrupts most reads; a foreign commit after
	// every read makes sure all of them are, whatever the scheduling.
	foreign := 0
	tbl.afterRead = func() {
		foreign++
		ns.Run(t, "nft", fmt.Sprintf("add element inet busy s { 10.200.%d.%d }", foreign>>8, foreign&0xff))
	}
	rs, err := tbl.Resync(context.Background())
	commits := stop()
	if err != nil {
		t.Fatalf("Resync on a busy node (%d foreign commits): %v", commits, err)
	}
	if !rs.Inconsistent || rs.Reads != maxReads {
		t.Fatalf("resync: %d reads, inconsistent=%v (%d foreign commits); the busy loop did not interrupt every read", rs.Reads, rs.Inconsistent, commits)
	}
	if rs.Drift.ChainsDiffer != 1 || rs.Apply.Operations == 0 {
		t.Errorf("resync: drift %s, %d operations; want the flushed chain rewritten", rs.Drift, rs.Apply.Operations)
	}
	if tbl.NeedsResync() || tbl.genKnown {
		t.Errorf("after a repair from an inconsistent read: NeedsResync=%v genKnown=%v, want false, false", tbl.NeedsResync(), tbl.genKnown)
	}
	assertKernelHolds(t, ns, m)
	// The next resync, on a quiet node, reads again and finds nothing.
	afterRead := tbl.afterRead
	tbl.afterRead = nil
	rs, err = tbl.Resync(context.Background())
	if err != nil || rs.Skipped || rs.Drift.Any() || rs.Apply.Operations != 0 {
		t.Errorf("quiet resync: skipped=%v drift=%s ops=%d err=%v, want a read with no drift", rs.Skipped, rs.Drift, rs.Apply.Operations, err)
	}

	// A repair the kernel refuses (validation bypassed: a jump to a base
	// chain) after inconsistent reads: Resync returns the refusal once, and
	// the next Apply tries again (the caller's backoff paces it).
	tbl.v = noValidation{}
	m.SetChain(regular("filter-bad", rule("bad", jump("filter-input"))))
	tbl.needResync = true
	stop = busyNamespace(t, ns, 2)
	tbl.afterRead = afterRead
	rs, err = tbl.Resync(context.Background())
	tbl.afterRead = nil
	stop()
	if !errors.Is(err, syscall.EOPNOTSUPP) || !rs.Inconsistent {
		t.Errorf("refused repair: inconsistent=%v err=%v, want EOPNOTSUPP from an inconsistent read", rs.Inconsistent, err)
	}
	if !tbl.NeedsResync() {
		t.Errorf("NeedsResync is false after a refused repair")
	}
	tbl.v = vocabularyValidator{}
	m.DeleteChain("filter-bad")
	if st := mustApply(t, tbl); !st.Resynced {
		t.Errorf("the Apply after a refused repair did not resync")
	}
	assertKernelHolds(t, ns, m)
}

// TestKernelOverlappingAdditionCaughtBeforeSending: an element added to an
// existing concatenated interval set that overlaps one already there. The
// kernel refuses it with EEXIST (shown with validation bypassed); Apply
// names the set and both elements and sends nothing.
func TestKernelOverlappingAdditionCaughtBeforeSending(t *testing.T) {
	ns := netnstest.New(t)
	tbl := newKernelTable(t, ns)
	m := tbl.Desired()
	m.SetSet(&Set{Name: "rpf", Key: []KeyType{TypeIfName, TypeIPv4Addr}, Interval: true})
	m.SetElement("rpf", Element{Key: "a . 10.0.0.0/8"})
	mustApply(t, tbl)

	m.SetElement("rpf", Element{Key: "a . 10.1.0.0/16"})
	g := gen(t, ns)
	_, err := tbl.Apply(context.Background())
	if !IsInvalid(err) || err == nil || !strings.Contains(err.Error(), `set "rpf": elements "a . 10.0.0.0/8" and "a . 10.1.0.0/16" overlap`) {
		t.Errorf("Apply: %v; want the overlap named before sending", err)
	}
	if gen(t, ns) != g || tbl.NeedsResync() {
		t.Errorf("the invalid addition reached the kernel")
	}

	tbl.v = noValidation{}
	if _, err := tbl.Apply(context.Background()); !errors.Is(err, syscall.EEXIST) {
		t.Errorf("Apply without validation: %v, want the kernel's EEXIST", err)
	}
	tbl.v = vocabularyValidator{}
	m.DeleteElement("rpf", "a . 10.1.0.0/16")
	mustApply(t, tbl)
	assertKernelHolds(t, ns, m)
}

// TestKernelStagedRetryStaysStaged: a staged cold start stops after its
// second batch (the table, the empty chains and maps, and part of the
// rules are committed; nothing refers to the chains yet). The retry reads
// the table back: the chains now exist, but nothing live reaches them, so
// the retry is staged too, and until its last batch the base chains stay
// empty.
func TestKernelStagedRetryStaysStaged(t *testing.T) {
	ns := netnstest.New(t)
	tbl := newKernelTable(t, ns)
	tbl.tune.stageMinRules, tbl.tune.stageRules = 100, 60
	m := tbl.Desired()
	nodeModel(m, 20, 10)

	ctx, cancel := context.WithCancel(context.Background())
	tbl.afterBatch = func(i, n int) {
		if i == 2 {
			cancel()
		}
	}
	if _, err := tbl.Apply(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply stopped after batch 2: %v", err)
	}
	if !tbl.NeedsResync() {
		t.Fatalf("NeedsResync is false after a partial staged commit")
	}
	baseRules := func() int {
		n := 0
		for _, c := range []string{"filter-input", "filter-forward", "filter-output"} {
			out := ns.Run(t, "nft", "list", "chain", "inet", testTable, c)
			n += strings.Count(out, "comment")
		}
		return n
	}
	if n := baseRules(); n != 0 {
		t.Fatalf("the base chains hold %d rules after the prepare batches", n)
	}

	var live []int
	tbl.afterBatch = func(i, n int) {
		if i < n {
			live = append(live, baseRules())
		}
	}
	st, err := tbl.Apply(context.Background())
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	tbl.afterBatch = nil
	if !st.Resynced || st.Batches < 3 {
		t.Errorf("retry: resynced=%v in %d batches, want a staged retry", st.Resynced, st.Batches)
	}
	for i, n := range live {
		if n != 0 {
			t.Errorf("retry: base chains hold %d rules after batch %d of %d", n, i+1, st.Batches)
		}
	}
	assertKernelHolds(t, ns, m)
}

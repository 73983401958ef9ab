package nft

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Planner tests: no kernel. The state a plan starts from is built by
// planning and committing, exactly as Table does after a successful batch.

// planFor plans want against have.
func planFor(t *testing.T, have *state, want *Model) *planned {
	t.Helper()
	p := &planner{have: have, want: want, v: vocabularyValidator{}}
	pl, err := p.plan()
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	return pl
}

// programmed returns the state after applying want to an empty table.
func programmed(t *testing.T, want *Model) *state {
	t.Helper()
	st := newState()
	st.commit(planFor(t, st, want), want)
	return st
}

func dedentText(s string) string {
	lines := strings.Split(strings.TrimPrefix(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimLeft(l, "\t")
	}
	return strings.Join(lines, "\n")
}

func assertTx(t *testing.T, tx *Transaction, want string) {
	t.Helper()
	if diff := cmp.Diff(dedentText(want), tx.String()); diff != "" {
		t.Errorf("transaction (-want +got):\n%s", diff)
	}
}

func TestPlanColdOrder(t *testing.T) {
	m := NewModel(FamilyINet, "nftep")
	baseModel(m)
	pl := planFor(t, newState(), m)
	// Table; chains empty (base first), so that rules and elements may refer
	// to any of them; sets with their elements; rules.
	assertTx(t, pl.tx, `
		add table inet nftep
		add chain inet nftep filter-input { type filter hook input priority 0; policy accept; }
		add chain inet nftep filter-fw-v1
		add chain inet nftep filter-fw-v2
		add set inet nftep allowed { type ipv4_addr; }
		add element inet nftep allowed { 10.0.0.1 }
		add map inet nftep filter-from-wl { type ifname : verdict; }
		add element inet nftep filter-from-wl { v1 : goto filter-fw-v1, v2 : goto filter-fw-v2 }
		add rule inet nftep filter-fw-v1 # rule 1: "established"
		add rule inet nftep filter-fw-v1 # rule 2: "allowed sources"
		add rule inet nftep filter-fw-v1 # rule 3: "default drop"
		add rule inet nftep filter-fw-v2 # rule 1: "accept"
		add rule inet nftep filter-input # rule 1: "dispatch from workloads"
	`)
	// table 1, chains 3, set 1+1, map 1+2, rules 5.
	if got, want := pl.tx.NumOperations(), 1+3+2+3+5; got != want {
		t.Errorf("NumOperations %d, want %d", got, want)
	}
	if got, want := pl.tx.Summary(), "3 chains added, 2 sets added"; got != want {
		t.Errorf("Summary %q, want %q", got, want)
	}
}

func TestPlanIncremental(t *testing.T) {
	m := NewModel(FamilyINet, "nftep")
	baseModel(m)
	st := programmed(t, m)

	step := func(name string, change func(), want string, wantSummary string) {
		t.Helper()
		change()
		pl := planFor(t, st, m)
		t.Run(name, func(t *testing.T) {
			assertTx(t, pl.tx, want)
			if wantSummary != "" && pl.tx.Summary() != wantSummary {
				t.Errorf("Summary %q, want %q", pl.tx.Summary(), wantSummary)
			}
		})
		st.commit(pl, m)
		if pl := planFor(t, st, m); len(pl.tx.Ops) != 0 {
			t.Errorf("%s: after commit, a second plan is not empty:\n%s", name, pl.tx)
		}
	}
	step("unchanged", func() {}, "", "no changes")
	step("same content, new object", func() {
		m.SetChain(regular("filter-fw-v2", rule("accept", accept)))
	}, "", "")
	step("add endpoint", func() {
		m.SetChain(regular("filter-fw-v3", rule("v3", drop)))
		m.SetElement("filter-from-wl", Element{Key: "v3", Verdict: &Verdict{Kind: Goto, Chain: "filter-fw-v3"}})
	}, `
		add chain inet nftep filter-fw-v3
		add rule inet nftep filter-fw-v3 # rule 1: "v3"
		add element inet nftep filter-from-wl { v3 : goto filter-fw-v3 }
	`, "1 chain added, 1 element added to map filter-from-wl")
	step("rewrite chain", func() {
		m.SetChain(regular("filter-fw-v3", rule("v3 est", accept, CtStateMatch{States: CtStateEstablished}), rule("v3", drop)))
	}, `
		flush chain inet nftep filter-fw-v3
		add rule inet nftep filter-fw-v3 # rule 1: "v3 est"
		add rule inet nftep filter-fw-v3 # rule 2: "v3"
	`, "1 rewritten")
	step("changed map value is delete + add", func() {
		m.SetElement("filter-from-wl", Element{Key: "v2", Verdict: &Verdict{Kind: Goto, Chain: "filter-fw-v3"}})
	}, `
		delete element inet nftep filter-from-wl { v2 : goto filter-fw-v2 }
		add element inet nftep filter-from-wl { v2 : goto filter-fw-v3 }
	`, "")
	step("remove endpoint: its element, then its chain", func() {
		m.DeleteElement("filter-from-wl", "v1")
		m.DeleteChain("filter-fw-v1")
	}, `
		flush chain inet nftep filter-fw-v1
		delete element inet nftep filter-from-wl { v1 : goto filter-fw-v1 }
		delete chain inet nftep filter-fw-v1
	`, "1 deleted, 1 element deleted from map filter-from-wl")
	step("policy in place", func() {
		c := *m.Chain("filter-input")
		b := *c.Base
		b.Policy = PolicyDrop
		c.Base = &b
		m.SetChain(&c)
	}, `
		add chain inet nftep filter-input { type filter hook input priority 0; policy drop; }
	`, "1 policy changed")
	step("priority: delete and recreate", func() {
		c := *m.Chain("filter-input")
		b := *c.Base
		b.Priority = -10
		c.Base = &b
		m.SetChain(&c)
	}, `
		delete chain inet nftep filter-input
		add chain inet nftep filter-input { type filter hook input priority -10; policy drop; }
		add rule inet nftep filter-input # rule 1: "dispatch from workloads"
	`, "1 chain recreated")
	step("a user of the set", func() {
		m.SetChain(regular("filter-fw-v4", rule("allowed", accept, Addr{Family: IPv4, Dir: In, Set: "allowed"})))
	}, `
		add chain inet nftep filter-fw-v4
		add rule inet nftep filter-fw-v4 # rule 1: "allowed"
	`, "")
	step("set definition: its users rewritten around a recreate", func() {
		s := *m.Set("allowed")
		s.Comment = "with a comment"
		s.Elements = nil // keep the elements
		m.SetSet(&s)
	}, `
		flush chain inet nftep filter-fw-v4
		delete set inet nftep allowed
		add set inet nftep allowed { type ipv4_addr; }
		add element inet nftep allowed { 10.0.0.1 }
		add rule inet nftep filter-fw-v4 # rule 1: "allowed"
	`, "1 rewritten, 1 set added, 1 set deleted")
}

func TestPlanRefusesDeletingWhatIsUsed(t *testing.T) {
	m := NewModel(FamilyINet, "nftep")
	baseModel(m)
	m.SetChain(regular("shared", rule("shared", accept)))
	m.SetChain(regular("user", rule("to shared", jump("shared"))))
	st := programmed(t, m)

	// Deleting a chain an unchanged chain jumps to: the validator of the
	// changed objects does not see it; the reference count does.
	m.DeleteChain("shared")
	p := &planner{have: st, want: m, v: vocabularyValidator{}}
	if _, err := p.plan(); err == nil || !strings.Contains(err.Error(), `chain "shared": deleted but chain "user" still jumps to it`) {
		t.Errorf("plan: %v", err)
	}
	m.SetChain(regular("shared", rule("shared", accept)))

	// A map element still going to a deleted chain.
	m.DeleteChain("filter-fw-v2")
	if _, err := p.plan(); err == nil || !strings.Contains(err.Error(), `map "filter-from-wl" element "v2"`) {
		t.Errorf("plan: %v", err)
	}
	m.SetChain(regular("filter-fw-v2", rule("accept", accept)))

	// A set still used by an unchanged rule.
	m.DeleteSet("allowed")
	if _, err := p.plan(); err == nil || !strings.Contains(err.Error(), `set "allowed": deleted but chain "filter-fw-v1" still uses it`) {
		t.Errorf("plan: %v", err)
	}
}

func TestPlanUnknownKernelContent(t *testing.T) {
	// What a resync records for drift: a chain with unknown rules is
	// rewritten; an unknown chain not desired is flushed and deleted; a set
	// whose definition is not ours is recreated.
	m := NewModel(FamilyINet, "nftep")
	baseModel(m)
	st := programmed(t, m)
	st.chains["filter-fw-v1"] = &chainState{}
	st.chains["intruder"] = &chainState{}
	st.sets["allowed"].def = nil
	st.countRefs()
	pl := planFor(t, st, m)
	assertTx(t, pl.tx, `
		flush chain inet nftep filter-fw-v1
		flush chain inet nftep intruder
		delete set inet nftep allowed
		add set inet nftep allowed { type ipv4_addr; }
		add element inet nftep allowed { 10.0.0.1 }
		add rule inet nftep filter-fw-v1 # rule 1: "established"
		add rule inet nftep filter-fw-v1 # rule 2: "allowed sources"
		add rule inet nftep filter-fw-v1 # rule 3: "default drop"
		delete chain inet nftep intruder
	`)
}

// TestOneEndpointBatchSizeConstant: adding, changing and removing one
// endpoint sends the same number of netlink messages in a table of 100
// workloads as in one of 10,000.
func TestOneEndpointBatchSizeConstant(t *testing.T) {
	messages := func(workloads int) []int {
		m := NewModel(FamilyINet, "nftep")
		nodeModel(m, workloads, benchPolicies)
		st := programmed(t, m)
		var out []int
		for _, change := range []func(){
			func() { addWorkload(m, workloads, benchPolicies, 0) },
			func() { addWorkload(m, workloads, benchPolicies, 1) },
			func() { removeWorkload(m, workloads) },
		} {
			change()
			pl := planFor(t, st, m)
			b, err := encodeBatch(unix.NFPROTO_INET, "nftep", pl.tx, pl, 0)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b.msgs)
			b.release()
			st.commit(pl, m)
		}
		return out
	}
	small, large := messages(100), messages(10000)
	// add: 2 chains + 24 rules + 2 elements; change: 2 flushes + 24 rules;
	// remove: 2 elements + 2 flushes + 2 deletes.
	if want := []int{28, 26, 6}; !cmp.Equal(small, want) || !cmp.Equal(large, want) {
		t.Errorf("messages for add, change, remove: %v at 100 workloads, %v at 10,000; want %v for both", small, large, want)
	}
}

func TestStages(t *testing.T) {
	m := NewModel(FamilyINet, "nftep")
	nodeModel(m, 10000, benchPolicies)
	pl := planFor(t, newState(), m)
	parts := stages(pl, newState(), defaultStageMinRules, defaultStageRules)
	if len(parts) < 3 {
		t.Fatalf("a cold start of 10,000 workloads in %d parts", len(parts))
	}
	n := 0
	for _, p := range parts {
		n += len(p.Ops)
	}
	if n != len(pl.tx.Ops) {
		t.Errorf("parts hold %d operations, the transaction %d", n, len(pl.tx.Ops))
	}
	// The head creates the table, the chains (base chains empty, policy
	// accept) and the maps; the middle only adds rules to regular chains;
	// the last holds the base chains' rules.
	for _, op := range parts[0].Ops {
		switch {
		case op.Kind != OpAddTable && op.Kind != OpAddChain && op.Kind != OpAddSet,
			op.Chain != nil && op.Chain.Base != nil && (len(op.Chain.Rules) > 0 || op.Chain.Base.Policy != PolicyAccept):
			t.Errorf("head holds %v %s", op.Kind, op.Name)
		}
	}
	for _, p := range parts[1 : len(parts)-1] {
		rules := 0
		for _, op := range p.Ops {
			if op.Kind != OpAddRules || !pl.fresh["chain "+op.Name] {
				t.Errorf("prepare batch holds %v %s", op.Kind, op.Name)
			}
			rules += len(op.Chain.Rules)
		}
		if rules > defaultStageRules {
			t.Errorf("prepare batch of %d rules", rules)
		}
	}
	last := parts[len(parts)-1]
	for _, op := range last.Ops {
		if op.Kind != OpAddRules || op.Chain.Base == nil {
			t.Errorf("publish holds %v %s", op.Kind, op.Name)
		}
	}
	// A small change is never staged.
	st := newState()
	st.commit(pl, m)
	addWorkload(m, 10000, benchPolicies, 0)
	if parts := stages(planFor(t, st, m), st, defaultStageMinRules, defaultStageRules); parts != nil {
		t.Errorf("a one-endpoint change staged in %d parts", len(parts))
	}
}

// TestExprFastPathMatchesGoogleNftables: the expressions we marshal
// ourselves are byte for byte what google/nftables' expr.Marshal writes, for
// every rule of the vocabulary's table and of the node-shaped table.
func TestExprFastPathMatchesGoogleNftables(t *testing.T) {
	m := vocabModel("nftep")
	nodeModel(m, 3, 5)
	seen := map[string]int{}
	for _, name := range m.ChainNames() {
		for i, r := range m.Chain(name).Rules {
			exprs, _, err := encodeRule(r)
			if err != nil {
				t.Fatalf("chain %q rule %d: %v", name, i+1, err)
			}
			for _, x := range exprs {
				want, err := expr.Marshal(unix.NFPROTO_INET, x)
				if err != nil {
					t.Fatal(err)
				}
				var e enc
				if err := e.expr(unix.NFPROTO_INET, x); err != nil {
					t.Fatal(err)
				}
				if mq, ok := x.(*expr.Masq); ok && mq.ToPorts {
					// On purpose: expr.Marshal drops a ported
					// masquerade's flags (see expr.go); TestNATKernel
					// checks ours against the kernel.
					continue
				}
				if !bytes.Equal(e.b, want) {
					t.Errorf("chain %q rule %d: %T %+v:\n got %x\nwant %x", name, i+1, x, x, e.b, want)
				}
				seen[fmt.Sprintf("%T", x)]++
			}
		}
	}
	for _, typ := range []string{"*expr.Meta", "*expr.Cmp", "*expr.Bitwise", "*expr.Immediate", "*expr.Verdict", "*expr.Lookup", "*expr.Ct", "*expr.Payload", "*expr.Counter"} {
		if seen[typ] == 0 {
			t.Errorf("no %s in the test tables: the fast path for it is untested", typ)
		}
	}
}

// TestBatchNamesTheFailingOperation maps sequence numbers back to the
// operation, rule and element they carried, across parallel segments.
func TestBatchNamesTheFailingOperation(t *testing.T) {
	m := NewModel(FamilyINet, "nftep")
	nodeModel(m, 1000, benchPolicies)
	pl := planFor(t, newState(), m)
	b, err := encodeBatch(unix.NFPROTO_INET, "nftep", pl.tx, pl, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.release()
	if runtime.GOMAXPROCS(0) > 1 && len(b.segs) < 2 {
		t.Errorf("a batch of %d messages was encoded in %d segment(s)", b.msgs, len(b.segs))
	}
	if got := b.describe(pl.tx, b.seq0); got != "commit" {
		t.Errorf("begin: %q", got)
	}
	last := b.segs[len(b.segs)-1]
	got := b.describe(pl.tx, last.seqOf(len(last.refs)-1))
	if !strings.HasPrefix(got, "add rule 12 to chain \"filter-tw-cali") || !strings.Contains(got, "drop if no profiles matched") {
		t.Errorf("last message: %q", got)
	}
	first := b.segs[0]
	if got := b.describe(pl.tx, first.seqOf(0)); got != "add table" {
		t.Errorf("first message: %q", got)
	}
	// The map's elements: the set, then its elements in chunks.
	for i, ref := range first.refs {
		op := pl.tx.Ops[ref.op]
		if op.Kind == OpAddSet && op.Name == "filter-to-wl" && i > 0 && first.refs[i-1].op == ref.op {
			got := b.describe(pl.tx, first.seqOf(i))
			if !strings.HasPrefix(got, `add element "cali`) || !strings.HasSuffix(got, `to new map "filter-to-wl"`) {
				t.Errorf("element message: %q", got)
			}
			break
		}
	}
}

// TestPlanRefusesOverlappingAdditions: an element added to an interval set
// the kernel already holds is checked against the set's other elements,
// one-field and concatenated, so that the overlap is reported by name
// instead of as the kernel's EEXIST. An element deleted in the same
// transaction (deletes go first) is no obstacle.
func TestPlanRefusesOverlappingAdditions(t *testing.T) {
	m := NewModel(FamilyINet, "nftep")
	m.SetSet(&Set{Name: "nets", Key: []KeyType{TypeIPv4Addr}, Interval: true})
	m.SetSet(&Set{Name: "rpf", Key: []KeyType{TypeIfName, TypeIPv4Addr}, Interval: true})
	m.SetElement("nets", Element{Key: "10.0.0.0/8"})
	m.SetElement("rpf", Element{Key: "a . 10.0.0.0/8"})
	for i := 0; i < 50; i++ {
		m.SetElement("nets", Element{Key: fmt.Sprintf("192.168.%d.0/24", i)})
		m.SetElement("rpf", Element{Key: fmt.Sprintf("b%d . 10.0.0.0/8", i)})
	}
	st := programmed(t, m)
	p := &planner{have: st, want: m, v: vocabularyValidator{}}
	check := func(name, want string) {
		t.Helper()
		_, err := p.plan()
		if err == nil || err.Error() != want || !IsInvalid(err) {
			t.Errorf("%s: plan error %v, want %q", name, err, want)
		}
	}

	m.SetElement("nets", Element{Key: "10.1.0.0/16"})
	check("one field", `set "nets": elements "10.0.0.0/8" and "10.1.0.0/16" overlap`)
	m.DeleteElement("nets", "10.1.0.0/16")

	m.SetElement("rpf", Element{Key: "a . 10.1.0.0/16"})
	check("concatenated", `set "rpf": elements "a . 10.0.0.0/8" and "a . 10.1.0.0/16" overlap`)
	m.DeleteElement("rpf", "a . 10.1.0.0/16")

	// One addition over two held elements is named with the first of them
	// (not with itself, as it was when found twice).
	m.SetElement("rpf", Element{Key: "d . 10.1.0.0/16"})
	m.SetElement("rpf", Element{Key: "d . 10.2.0.0/16"})
	pl, err := p.plan()
	if err != nil {
		t.Fatal(err)
	}
	st.commit(pl, m)
	m.SetElement("rpf", Element{Key: "d . 10.0.0.0/8"})
	check("over two", `set "rpf": elements "d . 10.0.0.0/8" and "d . 10.1.0.0/16" overlap`)
	m.DeleteElement("rpf", "d . 10.0.0.0/8")

	// Two additions overlapping each other.
	m.SetElement("nets", Element{Key: "172.16.0.0/12"})
	m.SetElement("nets", Element{Key: "172.16.1.1"})
	check("between additions", `set "nets": elements "172.16.0.0/12" and "172.16.1.1" overlap`)
	m.DeleteElement("nets", "172.16.1.1")

	// Many additions at once (the sweep rather than pair by pair).
	for i := 0; i < 100; i++ {
		m.SetElement("rpf", Element{Key: fmt.Sprintf("c%d . 10.0.0.0/8", i)})
	}
	m.SetElement("rpf", Element{Key: "b7 . 10.2.3.4"})
	check("many additions", `set "rpf": elements "b7 . 10.0.0.0/8" and "b7 . 10.2.3.4" overlap`)
	m.DeleteElement("rpf", "b7 . 10.2.3.4")

	// Replacing the covering element in the same transaction is fine.
	m.DeleteElement("nets", "10.0.0.0/8")
	m.SetElement("nets", Element{Key: "10.1.0.0/16"})
	if _, err := p.plan(); err != nil {
		t.Errorf("replace 10.0.0.0/8 by 10.1.0.0/16: %v", err)
	}
}

// TestLiveChains: what a base chain reaches through jumps and verdict maps
// is live; a reached chain with unknown rules makes everything possibly
// live, unless it is known to be empty.
func TestLiveChains(t *testing.T) {
	m := NewModel(FamilyINet, "nftep")
	baseModel(m)
	m.SetChain(regular("orphan", rule("x", jump("orphan-target"))))
	m.SetChain(regular("orphan-target", rule("x", accept)))
	m.SetChain(regular("filter-fw-v2", rule("to shared", jump("shared"))))
	m.SetChain(regular("shared", rule("x", accept)))
	st := programmed(t, m)
	live, unknown := st.liveChains()
	want := map[string]bool{"filter-input": true, "filter-fw-v1": true, "filter-fw-v2": true, "shared": true}
	if unknown || !cmp.Equal(live, want) {
		t.Errorf("live chains %v (unknown %v), want %v", live, unknown, want)
	}
	st.chains["filter-input"].chain = nil
	if _, unknown := st.liveChains(); !unknown {
		t.Errorf("a base chain with unknown rules: live chains known")
	}
	st.chains["filter-input"].empty = true
	if live, unknown := st.liveChains(); unknown || !cmp.Equal(live, map[string]bool{"filter-input": true}) {
		t.Errorf("an empty base chain: live chains %v (unknown %v)", live, unknown)
	}
}

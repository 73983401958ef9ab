package dataplane

// The policy dimension against Calico's nftables mode, on a real kernel.
//
// BenchmarkPolicyVsCalico builds the node of policyscale_test.go (N
// policies of 10 `tcp saddr @set dport P` rules, each with its own IP set
// of 100 members, applied by N/10 endpoints) through the endpoint and
// policy managers and the engine, in a throwaway network namespace, at the
// sizes of Calico's benchmark (felix/nftables/bench_test.go: 100, 500 and
// 2,000 chains), and measures its three cases:
//
//   - resync=no-drift: a resync that reads both tables back in full and
//     finds nothing to repair (Calico's BenchmarkResync: forced
//     invalidation, then Apply against a correct dataplane). nftep skips
//     the read while the ruleset generation is one it knows, so each
//     iteration first commits to a foreign table of the namespace (not
//     timed), as any other agent would; resync=gen-unchanged is the same
//     resync without that commit (nothing read).
//   - change=member-add: one member added to one IP set, from the Felix
//     message to the commit (Calico's BenchmarkDeltaUpdate).
//   - change=rule: one rule's port changed in one policy, from the Felix
//     message to the commit (Calico's BenchmarkChainUpdate).
//
// BenchmarkPolicyScale is Calico's scale-test dimension on one node:
// 10,000 policies and 250,000 IP-set members (10,000 sets of 25), 1,000
// endpoints: cold (a fresh namespace each iteration: messages, compute,
// both tables programmed), then the same cases. The batch of a one-member
// change is asserted constant in size by TestPolicyScaleChangeBatchConstant.
//
// Calico's figures to set beside these, measured with Calico's benchmark
// on a machine of this kind (2 vCPUs), at 100 / 500 / 2,000 chains:
// no-drift resync 0.30 / 1.41 / 8.42 s, one member added 9 / 12 / 16 ms,
// one rule changed 13 / 18 / 35 ms (calicoFigures; each case reports its
// ratio to them as a metric).
//
// Run as root, e.g.
//
//	go test ./dataplane -run '^$' -bench 'PolicyVsCalico' -benchtime 20x -count 5
//	go test ./dataplane -run '^$' -bench 'PolicyScale' -benchtime 3x -count 3

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/nftep/nftep/internal/netnstest"
)

func BenchmarkPolicyVsCalico(b *testing.B) {
	for _, n := range []int{100, 500, 2000} {
		b.Run(fmt.Sprintf("policies=%d", n), func(b *testing.B) {
			benchPolicyCases(b, policyScale{policies: n, members: 100})
		})
	}
}

// calicoFigures are Calico's own figures for its benchmark's cases, by
// number of policies (see the comment at the top): what
// BenchmarkPolicyVsCalico reports its ratios against (metrics
// "resync/calico", "member-add/calico", "rule-change/calico").
var calicoFigures = map[int]map[string]time.Duration{
	100:  {"resync=no-drift": 300 * time.Millisecond, "change=member-add": 9 * time.Millisecond, "change=rule": 13 * time.Millisecond},
	500:  {"resync=no-drift": 1410 * time.Millisecond, "change=member-add": 12 * time.Millisecond, "change=rule": 18 * time.Millisecond},
	2000: {"resync=no-drift": 8420 * time.Millisecond, "change=member-add": 16 * time.Millisecond, "change=rule": 35 * time.Millisecond},
}

// calicoMetric is the name of the ratio metric of each case.
var calicoMetric = map[string]string{
	"resync=no-drift": "resync/calico", "change=member-add": "member-add/calico", "change=rule": "rule-change/calico",
}

// reportVsCalico reports the time per operation of case name as a ratio to
// Calico's figure for s, when Calico has one. It times the loop itself
// (b.Elapsed is the timer's total), so call it at the end of the case.
func reportVsCalico(b *testing.B, s policyScale, name string) {
	c, ok := calicoFigures[s.policies][name]
	if !ok || b.N == 0 || s.members != 100 {
		return
	}
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(c), calicoMetric[name])
}

func BenchmarkPolicyScale(b *testing.B) {
	s := policyScale{policies: 10000, members: 25}
	b.Run(fmt.Sprintf("policies=%d/members=%d", s.policies, s.policies*s.members), func(b *testing.B) {
		b.Run("cold", func(b *testing.B) {
			msgs := scaleNode(s)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				ns := netnstest.New(b)
				e := newScaleEngine(b, kernelTables{fd: ns.Fd()})
				b.StartTimer()
				st := e.step(msgs...)
				b.StopTimer()
				b.ReportMetric(float64(st.Operations), "operations")
				b.ReportMetric(float64(st.Batches), "batches")
				b.StartTimer()
			}
		})
		benchPolicyCases(b, s)
	})
}

// benchPolicyCases sets up the node of s in a namespace of its own and runs
// the three cases on it as sub-benchmarks (shared by their -count runs).
func benchPolicyCases(b *testing.B, s policyScale) {
	ns := netnstest.New(b) // skips without root
	e := newScaleEngine(b, kernelTables{fd: ns.Fd()})
	start := time.Now()
	cold := e.step(scaleNode(s)...)
	b.Logf("%v: cold start %v, %d operations in %d batches", s, time.Since(start).Round(time.Millisecond), cold.Operations, cold.Batches)

	foreign := newForeignCommitter(b, ns)
	resync := func(b *testing.B, wantRead bool) {
		r, err := e.e.program(context.Background(), true, false)
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range r.tables {
			if t.Read != wantRead || t.Drift.Any() || t.Operations != 0 {
				b.Fatalf("resync of %s: read %v (want %v), drift %s, %d operations", t.Family, t.Read, wantRead, t.Drift, t.Operations)
			}
		}
	}
	b.Run("resync=no-drift", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			foreign.commit(b)
			b.StartTimer()
			resync(b, true)
		}
		reportVsCalico(b, s, "resync=no-drift")
	})
	b.Run("resync=gen-unchanged", func(b *testing.B) {
		for range b.N {
			resync(b, false)
		}
	})
	var adds, rules int // changes of each kind so far, over the -count runs
	b.Run("change=member-add", func(b *testing.B) {
		for range b.N {
			st := e.step(scaleMemberAdd(s, adds))
			adds++
			if st.Operations != 1 {
				b.Fatalf("one member added: %d operations, want 1 (%s)", st.Operations, e.lastOps())
			}
		}
		reportVsCalico(b, s, "change=member-add")
	})
	b.Run("change=rule", func(b *testing.B) {
		for range b.N {
			rules++
			st := e.step(scaleRuleChange(rules))
			if st.Operations == 0 {
				b.Fatalf("one rule changed: nothing sent")
			}
		}
		reportVsCalico(b, s, "change=rule")
	})
}

// foreignCommitter commits to a table of its own in the namespace, so that
// the ruleset generation moves and nftep's next resync reads its tables.
type foreignCommitter struct {
	c     *nftables.Conn
	table *nftables.Table
	on    bool
}

func newForeignCommitter(b testing.TB, ns *netnstest.NS) *foreignCommitter {
	f := &foreignCommitter{c: ns.NFTConn(b), table: &nftables.Table{Name: "foreign", Family: nftables.TableFamilyINet}}
	f.c.AddTable(f.table)
	if err := f.c.Flush(); err != nil {
		b.Fatalf("foreign table: %v", err)
	}
	return f
}

// commit adds or deletes a chain of the foreign table, alternately: a
// transaction that changes something (an empty one would not move the
// generation).
func (f *foreignCommitter) commit(b testing.TB) {
	ch := &nftables.Chain{Name: "c", Table: f.table}
	if f.on {
		f.c.DelChain(ch)
	} else {
		f.c.AddChain(ch)
	}
	f.on = !f.on
	if err := f.c.Flush(); err != nil {
		b.Fatalf("foreign commit: %v", err)
	}
}

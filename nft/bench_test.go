package nft

// Benchmarks against the kernel (root; `make bench` runs them through
// hack/bench.sh, which also prints the medians and ratios). Every benchmark
// works in fresh network namespaces and compares nftep with `nft -f` loading
// the identical ruleset text (Model.String) in the same run, because the
// machine is shared and only ratios measured side by side mean anything.
//
//	BenchmarkCold/workloads=N      cold start: nftep in a child process (its
//	                               peak RSS is the process's) vs nft -f
//	BenchmarkEndpoint/workloads=N  one endpoint added, changed, removed in a
//	                               table of N, vs nft -f of the same delta and
//	                               vs the kernel floor (a one-rule batch, and
//	                               one the kernel does not validate)
//	BenchmarkResync/workloads=N    read-back without drift, and with one
//	                               foreign rule to repair
//	BenchmarkModel/workloads=N     building the model: heap and allocations
//	BenchmarkPlan, BenchmarkEncode planning and encoding alone (no kernel)
//	BenchmarkValidation/workloads=N/hooks=H
//	                               the kernel's validation of the table: a
//	                               commit of one accept rule vs one of a
//	                               counter alone, with each endpoint chain
//	                               reached from two hooks or one (no nft -f)
//
// NFTEP_BENCH_ONE_BATCH=1 makes BenchmarkCold's child send one batch
// instead of staging (see stages in table.go), for comparison.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/internal/testutil"
)

const benchPolicies = 100

var benchSizes = []int{100, 1000, 10000}

// childEnv carries the child's job: "<netns name> <workloads>".
const childEnv = "NFTEP_BENCH_CHILD"

// childResult is what the child reports on its last line.
type childResult struct {
	BuildNs  int64 `json:"build_ns"`
	ApplyNs  int64 `json:"apply_ns"`
	EncodeNs int64 `json:"encode_ns"`
	KernelNs int64 `json:"kernel_ns"`
	HWMKiB   int64 `json:"hwm_kib"`
	Bytes    int   `json:"bytes"`
}

// TestMain runs the body of BenchmarkCold's child processes instead of the
// tests when the process was started as one (see benchChild).
func TestMain(m *testing.M) {
	testutil.RunSpawner()
	if os.Getenv(childEnv) != "" {
		if err := benchChild(); err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// benchChild is the body of BenchmarkCold's child processes (started
// through the spawner, testutil.Spawn): as the nftep child
// (NFTEP_BENCH_CHILD) it builds the node-shaped model and applies it cold
// into the named namespace, then reports its times and its own peak RSS
// (VmHWM).
func benchChild() error {
	spec := os.Getenv(childEnv)
	var nsName string
	var workloads int
	if _, err := fmt.Sscanf(spec, "%s %d", &nsName, &workloads); err != nil {
		return fmt.Errorf("%s=%q: %w", childEnv, spec, err)
	}
	f, err := os.Open(filepath.Join("/run/netns", nsName))
	if err != nil {
		return err
	}
	defer f.Close()
	start := time.Now()
	tbl, err := NewTable(TableConfig{Family: FamilyINet, Name: testTable, NetNSFd: int(f.Fd())})
	if err != nil {
		return err
	}
	if os.Getenv("NFTEP_BENCH_ONE_BATCH") != "" {
		// For comparison (docs/performance.md): no staging.
		tbl.tune.stageMinRules = 1 << 30
	}
	nodeModel(tbl.Desired(), workloads, benchPolicies)
	built := time.Now()
	st, err := tbl.Apply(context.Background())
	if err != nil {
		return err
	}
	hwm, err := vmHWM()
	if err != nil {
		return err
	}
	res := childResult{
		BuildNs:  built.Sub(start).Nanoseconds(),
		ApplyNs:  time.Since(built).Nanoseconds(),
		EncodeNs: st.Encode.Nanoseconds(),
		KernelNs: st.Kernel.Nanoseconds(),
		HWMKiB:   hwm,
		Bytes:    st.Bytes,
	}
	b, _ := json.Marshal(res)
	fmt.Printf("BENCHCHILD %s\n", b)
	return nil
}

// vmHWM returns this process's peak resident set (VmHWM) in KiB.
func vmHWM() (int64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}

// spawn runs argv (with extra environment) through the spawner
// (testutil.Spawn: a small fresh process, so that the peak RSS is the
// command's own) and returns its output, wall time and peak RSS in KiB.
func spawn(b *testing.B, env []string, argv ...string) (string, time.Duration, int64) {
	b.Helper()
	r := testutil.Spawn(b, env, argv...)
	return r.Out, r.Wall, r.MaxRSSKiB
}

// nftLoad runs `nft -f file` in ns (nsenter execs nft in the same process)
// and returns its wall time and peak RSS.
func nftLoad(b *testing.B, ns *netnstest.NS, file string) (time.Duration, int64) {
	b.Helper()
	_, d, rss := spawn(b, nil, "nsenter", "--net=/run/netns/"+ns.Name, "nft", "-f", file)
	return d, rss
}

func writeFile(b *testing.B, text string) string {
	b.Helper()
	f := filepath.Join(b.TempDir(), "ruleset.nft")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	return f
}

// BenchmarkCold compares a cold start of the node-shaped table through
// nftep (a child process: model build + Apply) with `nft -f` of the same
// text, each in a fresh namespace.
func BenchmarkCold(b *testing.B) {
	netnstest.RequireRoot(b)
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("workloads=%d", n), func(b *testing.B) {
			m := NewModel(FamilyINet, testTable)
			nodeModel(m, n, benchPolicies)
			file := writeFile(b, m.String())
			m = nil
			runtime.GC()
			var apply, proc, nftT time.Duration
			var rss, nftRSS int64
			var res childResult
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				ns := netnstest.New(b)
				b.StartTimer()
				out, d, r := spawn(b, []string{fmt.Sprintf("%s=%s %d", childEnv, ns.Name, n)},
					os.Args[0]) // TestMain runs benchChild
				b.StopTimer()
				proc += d
				line := ""
				for _, l := range strings.Split(out, "\n") {
					if v, ok := strings.CutPrefix(l, "BENCHCHILD "); ok {
						line = v
					}
				}
				if err := json.Unmarshal([]byte(line), &res); err != nil {
					b.Fatalf("child output %q: %v", out, err)
				}
				if r < res.HWMKiB {
					r = res.HWMKiB
				}
				apply += time.Duration(res.ApplyNs)
				rss += r

				ns2 := netnstest.New(b)
				d, r = nftLoad(b, ns2, file)
				nftT += d
				nftRSS += r
				b.StartTimer()
			}
			N := float64(b.N)
			b.ReportMetric(apply.Seconds()/N, "nftep-apply-s")
			b.ReportMetric(proc.Seconds()/N, "nftep-proc-s")
			b.ReportMetric(float64(rss)/1024/N, "nftep-rss-MB")
			b.ReportMetric(nftT.Seconds()/N, "nft-s")
			b.ReportMetric(float64(nftRSS)/1024/N, "nft-rss-MB")
			b.ReportMetric(apply.Seconds()/nftT.Seconds(), "apply/nft")
			b.ReportMetric(proc.Seconds()/nftT.Seconds(), "proc/nft")
			b.ReportMetric(float64(rss)/float64(nftRSS), "rss/nft")
			b.ReportMetric(float64(res.EncodeNs)/1e6, "last-encode-ms")
			b.ReportMetric(float64(res.KernelNs)/1e6, "last-kernel-ms")
		})
	}
}

// deltaText is the `nft -f` input for adding workload i (chains and map
// elements), as nft users would write it.
func deltaAddText(m *Model, i int) string {
	ifc := workloadIface(i)
	var sb strings.Builder
	fmt.Fprintf(&sb, "table inet %s {\n", testTable)
	sb.WriteString(indent(m.Chain("filter-tw-" + ifc).String()))
	sb.WriteString(indent(m.Chain("filter-fw-" + ifc).String()))
	sb.WriteString("}\n")
	fmt.Fprintf(&sb, "add element inet %s filter-to-wl { %q : goto filter-tw-%s }\n", testTable, ifc, ifc)
	fmt.Fprintf(&sb, "add element inet %s filter-from-wl { %q : goto filter-fw-%s }\n", testTable, ifc, ifc)
	return sb.String()
}

func deltaChangeText(m *Model, i int) string {
	ifc := workloadIface(i)
	var sb strings.Builder
	fmt.Fprintf(&sb, "flush chain inet %s filter-tw-%s\n", testTable, ifc)
	fmt.Fprintf(&sb, "flush chain inet %s filter-fw-%s\n", testTable, ifc)
	fmt.Fprintf(&sb, "table inet %s {\n", testTable)
	sb.WriteString(indent(m.Chain("filter-tw-" + ifc).String()))
	sb.WriteString(indent(m.Chain("filter-fw-" + ifc).String()))
	sb.WriteString("}\n")
	return sb.String()
}

func deltaRemoveText(i int) string {
	ifc := workloadIface(i)
	var sb strings.Builder
	fmt.Fprintf(&sb, "delete element inet %s filter-to-wl { %q }\n", testTable, ifc)
	fmt.Fprintf(&sb, "delete element inet %s filter-from-wl { %q }\n", testTable, ifc)
	for _, c := range []string{"filter-tw-" + ifc, "filter-fw-" + ifc} {
		fmt.Fprintf(&sb, "flush chain inet %s %s\ndelete chain inet %s %s\n", testTable, c, testTable, c)
	}
	return sb.String()
}

func indent(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return "\t" + strings.Join(lines, "\n\t") + "\n"
}

// floorBatch sends the smallest transaction that pays the kernel's
// validation of the whole table: one accept rule appended to an
// unreferenced chain (any rule with a verdict marks the table for
// validation at commit).
func floorBatch(b *testing.B, tbl *Table) time.Duration {
	return floorBatchOf(b, tbl, rule("floor", accept))
}

// floorBatchOf is floorBatch with rule r. A rule with a verdict, like
// floorBatch's, makes nf_tables validate the whole table at the commit
// (every chain reachable from a base chain, once per hook that reaches
// it); a rule of a counter alone has no expression that asks for it: the
// difference is the validation's cost.
func floorBatchOf(b *testing.B, tbl *Table, r *Rule) time.Duration {
	b.Helper()
	c := regular("bench-floor", r)
	tx := &Transaction{Family: FamilyINet, Table: testTable, Ops: []Op{{Kind: OpAddRules, Name: c.Name, Chain: c}}}
	bt, err := encodeBatch(tbl.family, testTable, tx, nil, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer bt.release()
	start := time.Now()
	if _, _, err := tbl.send(context.Background(), bt, tx, "bench", 0, false); err != nil {
		b.Fatalf("floor batch: %v", err)
	}
	return time.Since(start)
}

// BenchmarkEndpoint measures one endpoint added, changed (a policy of both
// its chains) and removed in a table of N workloads: nftep's Apply (ns/op),
// `nft -f` of the same delta into an identical table in another namespace,
// and the kernel floor.
func BenchmarkEndpoint(b *testing.B) {
	netnstest.RequireRoot(b)
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("workloads=%d", n), func(b *testing.B) {
			ns, nsNFT := netnstest.New(b), netnstest.New(b)
			tbl, err := NewTable(TableConfig{Family: FamilyINet, Name: testTable, NetNSFd: ns.Fd()})
			if err != nil {
				b.Fatal(err)
			}
			m := tbl.Desired()
			nodeModel(m, n, benchPolicies)
			if _, err := tbl.Apply(context.Background()); err != nil {
				b.Fatal(err)
			}
			nftLoad(b, nsNFT, writeFile(b, m.String()))
			floor := regular("bench-floor")
			tx := &Transaction{Family: FamilyINet, Table: testTable, Ops: []Op{{Kind: OpAddChain, Name: floor.Name, Chain: floor}}}
			bt, _ := encodeBatch(tbl.family, testTable, tx, nil, 0)
			if _, _, err := tbl.send(context.Background(), bt, tx, "bench", 0, false); err != nil {
				b.Fatal(err)
			}
			bt.release()
			next := n // the next workload to add

			run := func(name string, prepare func(i int) (nftText string), verify func(st ApplyStats)) {
				b.Run(name, func(b *testing.B) {
					var nftT, floorT, uncheckedT time.Duration
					var msgs int
					for i := 0; i < b.N; i++ {
						b.StopTimer()
						text := prepare(i)
						b.StartTimer()
						st, err := tbl.Apply(context.Background())
						b.StopTimer()
						if err != nil {
							b.Fatal(err)
						}
						verify(st)
						msgs = st.Messages
						d, _ := nftLoad(b, nsNFT, writeFile(b, text))
						nftT += d
						floorT += floorBatch(b, tbl)
						uncheckedT += floorBatchOf(b, tbl, &Rule{Counter: true, Comment: "floor, not validated"})
						b.StartTimer()
					}
					b.StopTimer()
					N := float64(b.N)
					b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/N, "nftep-ms")
					b.ReportMetric(float64(nftT.Microseconds())/1e3/N, "nft-ms")
					b.ReportMetric(float64(floorT.Microseconds())/1e3/N, "floor-ms")
					b.ReportMetric(float64(uncheckedT.Microseconds())/1e3/N, "floor-unvalidated-ms")
					b.ReportMetric(b.Elapsed().Seconds()/nftT.Seconds(), "nftep/nft")
					b.ReportMetric(float64(msgs), "messages")
				})
			}
			added := []int{}
			run("add", func(int) string {
				addWorkload(m, next, benchPolicies, 0)
				added = append(added, next)
				next++
				return deltaAddText(m, next-1)
			}, func(st ApplyStats) {
				if st.Operations != 2*13+2 {
					b.Fatalf("adding an endpoint took %d operations", st.Operations)
				}
			})
			variant := 0
			run("change", func(i int) string {
				variant++
				addWorkload(m, i%n, benchPolicies, variant)
				return deltaChangeText(m, i%n)
			}, func(st ApplyStats) {
				if st.Operations != 2*13 {
					b.Fatalf("changing an endpoint took %d operations", st.Operations)
				}
			})
			run("remove", func(i int) string {
				victim := i
				if len(added) > 0 {
					victim, added = added[len(added)-1], added[:len(added)-1]
				}
				removeWorkload(m, victim)
				return deltaRemoveText(victim)
			}, func(st ApplyStats) {
				if st.Operations != 6 {
					b.Fatalf("removing an endpoint took %d operations", st.Operations)
				}
			})
		})
	}
}

// BenchmarkResync measures a resync of the node-shaped table: with the
// generation unchanged (the read is skipped), with a full read and no drift,
// and with one foreign rule added to an endpoint chain (read + repair).
func BenchmarkResync(b *testing.B) {
	netnstest.RequireRoot(b)
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("workloads=%d", n), func(b *testing.B) {
			ns := netnstest.New(b)
			tbl, err := NewTable(TableConfig{Family: FamilyINet, Name: testTable, NetNSFd: ns.Fd()})
			if err != nil {
				b.Fatal(err)
			}
			nodeModel(tbl.Desired(), n, benchPolicies)
			if _, err := tbl.Apply(context.Background()); err != nil {
				b.Fatal(err)
			}
			resync := func(b *testing.B, want func(ResyncStats) bool) {
				rs, err := tbl.Resync(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if !want(rs) {
					b.Fatalf("unexpected resync: %+v", rs)
				}
			}
			b.Run("gen-unchanged", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					resync(b, func(rs ResyncStats) bool { return rs.Skipped })
				}
			})
			b.Run("no-drift", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					tbl.genKnown = false // as after a commit by someone else
					resync(b, func(rs ResyncStats) bool { return !rs.Skipped && !rs.Drift.Any() })
				}
			})
			b.Run("one-foreign-rule", func(b *testing.B) {
				c := ns.NFTConn(b)
				ours := &nftables.Table{Name: testTable, Family: nftables.TableFamilyINet}
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					c.AddRule(&nftables.Rule{Table: ours, Chain: &nftables.Chain{Name: "filter-tw-" + workloadIface(i%n), Table: ours},
						Exprs:    []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}},
						UserData: userdata.AppendString(nil, userdata.TypeComment, "foreign")})
					if err := c.Flush(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					resync(b, func(rs ResyncStats) bool { return rs.Drift == Drift{ChainsDiffer: 1} && rs.Apply.Operations == 13 })
				}
			})
		})
	}
}

// BenchmarkModel builds the node-shaped model and reports its heap (after a
// GC) next to the allocations of building it.
func BenchmarkModel(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("workloads=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var heap float64
			for i := 0; i < b.N; i++ {
				var before, after runtime.MemStats
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&before)
				b.StartTimer()
				m := NewModel(FamilyINet, testTable)
				nodeModel(m, n, benchPolicies)
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap += float64(after.HeapAlloc) - float64(before.HeapAlloc)
				runtime.KeepAlive(m)
				b.StartTimer()
			}
			b.ReportMetric(heap/float64(b.N)/1e6, "model-heap-MB")
		})
	}
}

// BenchmarkPlan measures planning alone in a table of N workloads, with
// nothing changed and with one endpoint added: "full" compares the whole
// model (a resync's plan), "log" only what the model's change log says
// changed (every Apply's plan).
func BenchmarkPlan(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("workloads=%d", n), func(b *testing.B) {
			m := NewModel(FamilyINet, testTable)
			log := m.track()
			nodeModel(m, n, benchPolicies)
			st := newState()
			p := &planner{have: st, want: m, v: vocabularyValidator{}}
			pl, err := p.plan()
			if err != nil {
				b.Fatal(err)
			}
			st.commit(pl, m)
			log.reset()
			for _, mode := range []string{"full", "log"} {
				plan := func(b *testing.B) {
					p := &planner{have: st, want: m, v: vocabularyValidator{}}
					if mode == "log" {
						p.changed = log
					}
					if _, err := p.plan(); err != nil {
						b.Fatal(err)
					}
				}
				b.Run("noop/"+mode, func(b *testing.B) {
					b.ReportAllocs()
					for i := 0; i < b.N; i++ {
						plan(b)
					}
				})
				b.Run("add-endpoint/"+mode, func(b *testing.B) {
					b.ReportAllocs()
					addWorkload(m, n, benchPolicies, 0)
					for i := 0; i < b.N; i++ {
						plan(b)
					}
					removeWorkload(m, n)
					log.reset()
				})
			}
		})
	}
}

// BenchmarkEncode measures encoding the cold-start batch of N workloads
// (no kernel): time, allocations and garbage of turning the model into
// netlink messages.
func BenchmarkEncode(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("workloads=%d", n), func(b *testing.B) {
			m := NewModel(FamilyINet, testTable)
			nodeModel(m, n, benchPolicies)
			p := &planner{have: newState(), want: m, v: vocabularyValidator{}}
			pl, err := p.plan()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				bt, err := encodeBatch(unix.NFPROTO_INET, testTable, pl.tx, pl, 0)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(bt.size)/1e6, "batch-MB")
				bt.release()
			}
		})
	}
}

// BenchmarkValidation measures what the kernel spends validating the
// node-shaped table (nodeModel: two chains of 12 rules per workload behind
// two goto maps) at a commit that asks for it, for two layouts of the same
// chains:
//
//   - hooks=2, nftep's: each endpoint chain is reached from two base chains,
//     as in Felix (from-workload chains from forward and input, to-workload
//     chains from forward and output);
//   - hooks=1, the least any layout can do: from-workload chains reached
//     from prerouting only, to-workload chains from postrouting only.
//
// validate-ms is a commit of one accept rule (floorBatch), unvalidated-ms
// one of a counter alone: their difference is nf_tables walking every
// chain reachable from each base chain. It is the floor under any change
// that adds a verdict with a chain per endpoint, whatever nftep does.
func BenchmarkValidation(b *testing.B) {
	netnstest.RequireRoot(b)
	for _, n := range []int{1000, 10000} {
		for _, hooks := range []int{2, 1} {
			b.Run(fmt.Sprintf("workloads=%d/hooks=%d", n, hooks), func(b *testing.B) {
				ns := netnstest.New(b)
				tbl, err := NewTable(TableConfig{Family: FamilyINet, Name: testTable, NetNSFd: ns.Fd()})
				if err != nil {
					b.Fatal(err)
				}
				m := tbl.Desired()
				nodeModel(m, n, benchPolicies)
				if hooks == 1 {
					oneHookLayout(m)
				}
				// floorBatch appends to this chain, unreferenced, behind
				// the model's back: nothing applies the model again.
				m.SetChain(regular("bench-floor"))
				if _, err := tbl.Apply(context.Background()); err != nil {
					b.Fatal(err)
				}
				var validated, unvalidated []time.Duration
				for b.Loop() {
					validated = append(validated, floorBatch(b, tbl))
					unvalidated = append(unvalidated, floorBatchOf(b, tbl, &Rule{Counter: true, Comment: "floor, not validated"}))
				}
				b.ReportMetric(0, "ns/op") // both commits together: meaningless
				b.ReportMetric(float64(medianOf(validated).Microseconds())/1e3, "validate-ms")
				b.ReportMetric(float64(medianOf(unvalidated).Microseconds())/1e3, "unvalidated-ms")
			})
		}
	}
}

// oneHookLayout moves nodeModel's dispatch to one hook per direction:
// from-workload chains from prerouting, to-workload chains from postrouting.
func oneHookLayout(m *Model) {
	for _, c := range []string{"filter-input", "filter-forward", "filter-output"} {
		m.DeleteChain(c)
	}
	setFilterBase(m, "filter-prerouting", HookPrerouting,
		rule("from workloads", VMap{Key: SelIIFName, Map: "filter-from-wl"}),
		rule("unknown workload interface: drop", drop, IfName{Dir: In, Name: "cali", Wildcard: true}))
	setFilterBase(m, "filter-postrouting", HookPostrouting,
		rule("to workloads", VMap{Key: SelOIFName, Map: "filter-to-wl"}),
		rule("unknown workload interface: drop", drop, IfName{Dir: Out, Name: "cali", Wildcard: true}))
}

// medianOf is the median of ds (which it sorts).
func medianOf(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

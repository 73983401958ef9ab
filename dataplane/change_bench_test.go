package dataplane_test

// BenchmarkDriverChangeCPU: what one change from Felix costs the driver in
// CPU, on a node-shaped ruleset, including everything the change sets off
// afterwards.
//
// Setup (once per endpoint count, in a throwaway network namespace):
// RunDriver with a real kernel and a run directory, fed through a pipe as a
// real Felix would feed it: a ConfigUpdate with Felix's defaults (so ARP
// suppression is on and both the inet and the arp table exist), then the
// start-of-day snapshot and InSync. The snapshot is
//
//   - benchPolicies NetworkPolicies in tier "default" (spread over
//     benchNamespaces namespaces), each with an ingress rule (tcp to one port
//     from its own IP set) and an egress rule (udp 53);
//   - one IP set (type NET) per policy, benchSetMembers /32 members each;
//   - a kns.<namespace> and a ksa.<namespace>.default profile per namespace;
//   - N workload endpoints (one IPv4 address, a MAC, both profiles of their
//     namespace), each applying 2 to 4 of the policies in both directions.
//
// No interface exists for the endpoints: they report "down", but their
// chains, dispatch elements and ARP chains are rendered and programmed all
// the same (the setup checks one of each), which is what the changes
// exercise. Routes, neighbours and sysctls, which need the interfaces, are
// not programmed. The periodic resyncs (NftablesRefreshInterval,
// RouteRefreshInterval) are turned off: their cost is per second, not per
// change, and one landing inside a measurement would be noise.
//
// One iteration is one change, sent as Felix sends it, then a wait until
// the driver has committed it (the ruleset generation moves) and is idle
// again: at least settleAfterCommit after the commit, which is longer than
// the delay of the resync the driver's nftables subscription triggers after
// a commit (100 ms after the events, at most once a second), and then until
// a quietWindow passes with the process using less than quietCPU. So the
// figure includes the batch, the compute, the transaction(s), the status
// report and run-directory writes, and the event-driven resync with any
// table read-back it does. The sub-benchmarks alternate two kinds of
// change:
//
//   - change=policy+ipset: (1) an ActivePolicyUpdate of one policy with
//     another port, (2) an IPSetDeltaUpdate of one IP set (one member removed
//     and one added in the same message). Both touch the inet table only.
//   - change=endpoint: one workload endpoint added, then removed again.
//     Both touch the inet and the arp table.
//
// Metrics, per change (b.N changes per run):
//
//   - cpu-ms/change, user-ms/change, sys-ms/change: the process's CPU
//     (getrusage RUSAGE_SELF) over the changes and their waits, nothing
//     subtracted. The kernel's work on our netlink batches and dumps runs in
//     our threads and counts as sys.
//   - idle-cpu-ms/s: the same process, idle, over idleWindow before the
//     changes: the baseline included in the waits (about 1.3 s per change).
//   - ops/change, msgs/change: nft operations and netlink messages of the
//     transactions the change caused (the loop's "applied" log lines: the
//     change's own, plus any repair a resync committed, which should be
//     none).
//   - readbacks/change: full reads of a table (nft.Table.Resync's "table
//     read back" debug line, counting every read of a repeated one);
//     resyncs/change: resyncs of either table, read or skipped because the
//     generation was unchanged.
//
// Wall time per change is not reported (ns/op is hidden): it is mostly the
// waits. Run it as root, e.g.
//
//	go test ./dataplane -run '^$' -bench ChangeCPU -benchtime 20x -count 3 -timeout 30m
//
// (-bench 'ChangeCPU/endpoints=1000$' for one size: the patterns are
// unanchored, and endpoints=1000 matches endpoints=10000 too). Each size
// sets up one driver (about 2 s at 1,000 endpoints, 10 s at 10,000),
// shared by its sub-benchmarks and by their -count runs, which follow one
// another on it. The read-back count relies on nft.Table.Resync's debug
// lines (logReadBack, logSkipped); the setup fails if they are missing.
//
// With -short every kernel test, this one included, is skipped.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/internal/netnsutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
)

// The synthetic node.
const (
	benchPolicies   = 200
	benchNamespaces = 10
	benchSetMembers = 4
)

// Idleness (see the file comment).
const (
	// settleAfterCommit must stay above the driver's event-driven resync
	// delay: 100 ms after the last nftables event, and no sooner than 1 s
	// after the previous one.
	settleAfterCommit = 1200 * time.Millisecond
	quietWindow       = 200 * time.Millisecond
	quietCPU          = 5 * time.Millisecond
	idleWindow        = 2 * time.Second
	// commitTimeout and idleTimeout bound the waits of one change;
	// setupTimeout the cold start.
	commitTimeout = 30 * time.Second
	idleTimeout   = 60 * time.Second
	setupTimeout  = 5 * time.Minute
)

// Log lines the benchmark counts; see benchLog.
const (
	logApplied  = "applied"                                               // dataplane loop: operations, messages
	logReadBack = "nftables table read back"                              // nft.Table.Resync: reads
	logSkipped  = "nftables resync: generation unchanged, table not read" // nft.Table.Resync
)

func BenchmarkDriverChangeCPU(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			if n > 1000 && testing.Short() {
				b.Skip("10,000 endpoints: skipped in -short mode")
			}
			d := startBenchDriver(b, n)
			var mixed, eps int // changes of each kind so far, over the runs
			b.Run("change=policy+ipset", func(b *testing.B) {
				d.measure(b, &mixed, func(k int) {
					if k%2 == 0 {
						d.changePolicyPort()
					} else {
						d.changeIPSetMember()
					}
				})
			})
			b.Run("change=endpoint", func(b *testing.B) {
				d.measure(b, &eps, func(k int) {
					if k%2 == 0 {
						d.send(benchEndpoint(n, true))
					} else {
						d.send(benchEndpointRemove(n))
					}
				})
			})
		})
	}
}

// benchDriver is a driver running in its own namespace, and the fake Felix
// that feeds it.
type benchDriver struct {
	ns  *netnstest.NS
	h   *netnsutil.NS
	n   int
	w   *proto.Writer
	log *benchLog
	seq uint64
	// fatal is the benchmark that currently owns the driver (the outer
	// one during setup, then each sub-benchmark run in turn).
	fatal testing.TB

	policyPort int32    // the current port of policy 0's ingress rule
	members    []string // the current members of policy 0's IP set
	nextMember int
}

func startBenchDriver(b *testing.B, n int) *benchDriver {
	ns := netnstest.New(b) // skips without root
	h := openNS(b, ns)
	d := &benchDriver{ns: ns, h: h, n: n, log: &benchLog{}, fatal: b, policyPort: 8000}
	opts := dataplane.Options{Namespace: h, RunDir: b.TempDir(), Logger: slog.New(d.log)}

	pr, pw := io.Pipe()
	d.w = proto.NewWriter(pw)
	done := make(chan error, 1)
	go func() { done <- dataplane.RunDriver(context.Background(), opts, pr, io.Discard) }()
	b.Cleanup(func() {
		pw.Close()
		select {
		case err := <-done:
			if err != nil {
				b.Errorf("RunDriver: %v", err)
			}
		case <-time.After(time.Minute):
			b.Errorf("RunDriver did not return after EOF on its input")
		}
	})

	start := time.Now()
	cpu0 := cpuNow()
	d.send(&proto.ToDataplane{Payload: &proto.ToDataplane_ConfigUpdate{ConfigUpdate: &proto.ConfigUpdate{Config: map[string]string{
		"FelixHostname": "bench-node",
		// Per second, not per change: off, so that none lands in a
		// measurement. Everything else keeps Felix's defaults.
		dataplane.KeyNftablesRefreshInterval: "0",
		dataplane.KeyRouteRefreshInterval:    "0",
	}}}})
	d.waitFor("the static table", setupTimeout, func() bool {
		ok, _ := dataplane.TableExists(h, nft.FamilyINet, "nftep")
		return ok
	})
	gen := d.generation()
	for _, m := range benchNode(n) {
		d.send(m)
	}
	d.send(&proto.ToDataplane{Payload: &proto.ToDataplane_InSync{InSync: &proto.InSync{}}})
	d.waitCommitted(gen, setupTimeout)
	d.waitIdle(time.Now(), setupTimeout)
	cpu := cpuNow().sub(cpu0)
	b.Logf("%d endpoints, %d policies: cold start %.1f s, %.0f ms CPU (user %.0f, sys %.0f)",
		n, benchPolicies, time.Since(start).Seconds(), ms(cpu.total()), ms(cpu.user), ms(cpu.sys))

	// The counters must work, or the per-change figures would silently
	// read 0: the cold start reads the tables back at least once.
	st := d.log.take()
	for _, m := range st.problems {
		b.Logf("driver: %s", m)
	}
	if st.reads == 0 || st.applied == 0 {
		b.Fatalf("cold start: %d read-backs and %d applies logged: does nft.Table.Resync still log %q at debug level, and the loop %q?",
			st.reads, st.applied, logReadBack, logApplied)
	}
	for _, fam := range []nft.Family{nft.FamilyINet, nft.FamilyARP} {
		if ok, err := dataplane.TableExists(h, fam, "nftep"); err != nil || !ok {
			b.Fatalf("table %s nftep: exists %v, %v", fam, ok, err)
		}
	}
	if _, err := exec.LookPath("nft"); err == nil {
		// Endpoints without interfaces still get their chains.
		iface := benchIface(0)
		for _, c := range []string{"inet nftep filter-tw-" + iface, "inet nftep filter-fw-" + iface, "arp nftep filter-arp-" + iface} {
			f := strings.Fields(c)
			if out, err := ns.Output("nft", "list", "chain", f[0], f[1], f[2]); err != nil {
				b.Fatalf("chain %s not programmed: %v\n%s", c, err, out)
			}
		}
	}
	return d
}

// measure runs b.N changes (change(k) sends the k-th of its kind; *count
// is how many were sent by earlier runs) and reports their cost.
func (d *benchDriver) measure(b *testing.B, count *int, change func(k int)) {
	outer := d.fatal
	d.fatal = b
	defer func() { d.fatal = outer }()
	d.waitIdle(time.Now(), idleTimeout)

	idle0 := cpuNow()
	time.Sleep(idleWindow)
	idle := cpuNow().sub(idle0)

	d.log.take()
	cpu0 := cpuNow()
	for range b.N {
		gen := d.generation()
		change(*count)
		*count++
		committed := d.waitCommitted(gen, commitTimeout)
		d.waitIdle(committed, idleTimeout)
	}
	cpu := cpuNow().sub(cpu0)
	st := d.log.take()
	if st.applied < b.N {
		b.Fatalf("%d changes but %d applies logged (%q)", b.N, st.applied, logApplied)
	}
	for _, m := range st.problems {
		b.Logf("driver: %s", m)
	}

	n := float64(b.N)
	b.ReportMetric(0, "ns/op") // wall time: mostly the waits
	b.ReportMetric(ms(cpu.total())/n, "cpu-ms/change")
	b.ReportMetric(ms(cpu.user)/n, "user-ms/change")
	b.ReportMetric(ms(cpu.sys)/n, "sys-ms/change")
	b.ReportMetric(float64(st.ops)/n, "ops/change")
	b.ReportMetric(float64(st.msgs)/n, "msgs/change")
	b.ReportMetric(float64(st.reads)/n, "readbacks/change")
	b.ReportMetric(float64(st.resyncs)/n, "resyncs/change")
	b.ReportMetric(ms(idle.total())/idleWindow.Seconds(), "idle-cpu-ms/s")
}

// changePolicyPort sends policy 0 with another port in its ingress rule.
func (d *benchDriver) changePolicyPort() {
	d.policyPort++
	if d.policyPort > 60000 {
		d.policyPort = 9000
	}
	d.send(benchPolicy(0, d.policyPort))
}

// changeIPSetMember replaces the oldest member of policy 0's IP set with a
// new one, in one IPSetDeltaUpdate.
func (d *benchDriver) changeIPSetMember() {
	if d.members == nil {
		d.members = benchSetMembersOf(0)
	}
	d.nextMember++
	added := benchAddr(netip.AddrFrom4([4]byte{10, 201, 0, 0}), d.nextMember) + "/32"
	removed := d.members[0]
	d.members = append(d.members[1:], added)
	d.send(&proto.ToDataplane{Payload: &proto.ToDataplane_IpsetDeltaUpdate{IpsetDeltaUpdate: &proto.IPSetDeltaUpdate{
		Id: benchSetID(0), AddedMembers: []string{added}, RemovedMembers: []string{removed},
	}}})
}

func (d *benchDriver) send(env *proto.ToDataplane) {
	env.SequenceNumber = d.seq
	d.seq++
	if err := d.w.WriteMessage(env); err != nil {
		d.fatal.Fatalf("write to the driver: %v", err)
	}
}

func (d *benchDriver) generation() uint32 {
	g, err := nft.GetGeneration(context.Background(), d.ns.Fd())
	if err != nil {
		d.fatal.Fatalf("ruleset generation: %v", err)
	}
	return g
}

// waitCommitted waits until the ruleset generation is no longer gen (the
// driver committed) and returns when it saw that. Polling costs a netlink
// round trip every 5 ms, a few per change.
func (d *benchDriver) waitCommitted(gen uint32, timeout time.Duration) time.Time {
	d.waitFor("a commit", timeout, func() bool { return d.generation() != gen })
	d.log.failIfApplyFailed(d.fatal)
	return time.Now()
}

// waitIdle waits until settleAfterCommit after committed, then until the
// process used less than quietCPU during a quietWindow.
func (d *benchDriver) waitIdle(committed time.Time, timeout time.Duration) {
	time.Sleep(time.Until(committed.Add(settleAfterCommit)))
	deadline := time.Now().Add(timeout)
	for {
		c0 := cpuNow()
		time.Sleep(quietWindow)
		if cpuNow().sub(c0).total() < quietCPU {
			break
		}
		if time.Now().After(deadline) {
			d.fatal.Fatalf("the driver did not become idle within %v", timeout)
		}
	}
	d.log.failIfApplyFailed(d.fatal)
}

func (d *benchDriver) waitFor(what string, timeout time.Duration, cond func() bool) {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			d.fatal.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The synthetic objects.

// benchNode is the state of a node of n endpoints: the IP sets, policies
// and profiles they use, then the endpoints.
func benchNode(n int) []*proto.ToDataplane {
	var out []*proto.ToDataplane
	for p := range benchPolicies {
		out = append(out, &proto.ToDataplane{Payload: &proto.ToDataplane_IpsetUpdate{IpsetUpdate: &proto.IPSetUpdate{
			Id: benchSetID(p), Type: proto.IPSetUpdate_NET, Members: benchSetMembersOf(p),
		}}})
	}
	for p := range benchPolicies {
		out = append(out, benchPolicy(p, int32(8000+p)))
	}
	for k := range benchNamespaces {
		kns := fmt.Sprintf("ns-%d", k)
		out = append(out, &proto.ToDataplane{Payload: &proto.ToDataplane_ActiveProfileUpdate{ActiveProfileUpdate: &proto.ActiveProfileUpdate{
			Id:      &proto.ProfileID{Name: "kns." + kns},
			Profile: &proto.Profile{OutboundRules: []*proto.Rule{{Action: "allow", RuleId: "kns-egress-" + kns}}},
		}}}, &proto.ToDataplane{Payload: &proto.ToDataplane_ActiveProfileUpdate{ActiveProfileUpdate: &proto.ActiveProfileUpdate{
			Id: &proto.ProfileID{Name: "ksa." + kns + ".default"}, Profile: &proto.Profile{},
		}}})
	}
	for i := range n {
		out = append(out, benchEndpoint(i, false))
	}
	return out
}

func benchSetID(p int) string { return fmt.Sprintf("s:bench-%03d", p) }

func benchSetMembersOf(p int) []string {
	ms := make([]string, benchSetMembers)
	for j := range ms {
		ms[j] = benchAddr(netip.AddrFrom4([4]byte{10, 200, 0, 0}), p*benchSetMembers+j+1) + "/32"
	}
	return ms
}

func benchPolicyID(p int) *proto.PolicyID {
	return &proto.PolicyID{Name: fmt.Sprintf("bench-%03d", p), Namespace: fmt.Sprintf("ns-%d", p%benchNamespaces), Kind: "NetworkPolicy"}
}

func benchPolicy(p int, port int32) *proto.ToDataplane {
	id := benchPolicyID(p)
	return &proto.ToDataplane{Payload: &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: &proto.ActivePolicyUpdate{
		Id: id,
		Policy: &proto.Policy{
			Namespace:        id.Namespace,
			Tier:             "default",
			OriginalSelector: fmt.Sprintf("app == 'bench-%03d'", p),
			InboundRules: []*proto.Rule{{
				Action:      "allow",
				Protocol:    &proto.Protocol{NumberOrName: &proto.Protocol_Name{Name: "tcp"}},
				SrcIpSetIds: []string{benchSetID(p)},
				DstPorts:    []*proto.PortRange{{First: port, Last: port}},
				RuleId:      fmt.Sprintf("bench-%03d-in", p),
			}},
			OutboundRules: []*proto.Rule{{
				Action:   "allow",
				Protocol: &proto.Protocol{NumberOrName: &proto.Protocol_Name{Name: "udp"}},
				DstPorts: []*proto.PortRange{{First: 53, Last: 53}},
				RuleId:   fmt.Sprintf("bench-%03d-dns", p),
			}},
		},
	}}}
}

func benchIface(i int) string { return fmt.Sprintf("cali%011x", i) }

func benchEndpointID(i int) *proto.WorkloadEndpointID {
	return &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: fmt.Sprintf("ns-%d/pod-%d", i%benchNamespaces, i), EndpointId: "eth0"}
}

// benchEndpoint is endpoint i: 2 to 4 policies (distinct, policy 0 among
// those of every benchPolicies-th endpoint), in both directions.
func benchEndpoint(i int, extra bool) *proto.ToDataplane {
	refs := []int{i % benchPolicies, (i*7 + 3) % benchPolicies, (i*13 + 5) % benchPolicies, (i*31 + 11) % benchPolicies}[:2+i%3]
	var pols []*proto.PolicyID
	seen := map[int]bool{}
	for _, p := range refs {
		if !seen[p] {
			seen[p] = true
			pols = append(pols, benchPolicyID(p))
		}
	}
	ns := fmt.Sprintf("ns-%d", i%benchNamespaces)
	addr := benchAddr(netip.AddrFrom4([4]byte{10, 64, 0, 0}), i+1)
	if extra {
		addr = "10.199.0.1"
	}
	a := netip.MustParseAddr(addr).As4()
	return &proto.ToDataplane{Payload: &proto.ToDataplane_WorkloadEndpointUpdate{WorkloadEndpointUpdate: &proto.WorkloadEndpointUpdate{
		Id: benchEndpointID(i),
		Endpoint: &proto.WorkloadEndpoint{
			State:      "active",
			Name:       benchIface(i),
			Mac:        fmt.Sprintf("ee:ee:%02x:%02x:%02x:%02x", a[0], a[1], a[2], a[3]),
			ProfileIds: []string{"kns." + ns, "ksa." + ns + ".default"},
			Ipv4Nets:   []string{addr + "/32"},
			Tiers:      []*proto.TierInfo{{Name: "default", IngressPolicies: pols, EgressPolicies: pols, DefaultAction: "Deny"}},
		},
	}}}
}

func benchEndpointRemove(i int) *proto.ToDataplane {
	return &proto.ToDataplane{Payload: &proto.ToDataplane_WorkloadEndpointRemove{WorkloadEndpointRemove: &proto.WorkloadEndpointRemove{Id: benchEndpointID(i)}}}
}

// benchAddr is the k-th address after base, skipping .0 and .255.
func benchAddr(base netip.Addr, k int) string {
	b := base.As4()
	b[2] += byte(k / 250)
	b[3] = byte(1 + k%250)
	return netip.AddrFrom4(b).String()
}

// CPU time of the whole process.

type cpuTime struct{ user, sys time.Duration }

func cpuNow() cpuTime {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return cpuTime{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}

func (c cpuTime) sub(o cpuTime) cpuTime { return cpuTime{c.user - o.user, c.sys - o.sys} }
func (c cpuTime) total() time.Duration  { return c.user + c.sys }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// attrInt returns an integer log attribute's value.
func attrInt(v slog.Value) (int64, bool) {
	switch v.Kind() {
	case slog.KindInt64:
		return v.Int64(), true
	case slog.KindUint64:
		return int64(v.Uint64()), true
	}
	return 0, false
}

// benchLog is the driver's slog handler: it counts the lines the metrics
// come from and keeps warnings and errors.
type benchLog struct {
	mu sync.Mutex
	benchCounts
}

type benchCounts struct {
	applied, ops, msgs int
	reads, resyncs     int
	problems           []string
	applyFailed        string
}

func (h *benchLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *benchLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *benchLog) WithGroup(string) slog.Handler            { return h }

func (h *benchLog) Handle(_ context.Context, r slog.Record) error {
	ints := func() map[string]int {
		m := map[string]int{}
		r.Attrs(func(a slog.Attr) bool {
			if n, ok := attrInt(a.Value); ok {
				m[a.Key] = int(n)
			}
			return true
		})
		return m
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch r.Message {
	case logApplied:
		a := ints()
		h.applied++
		h.ops += a["operations"]
		h.msgs += a["messages"]
	case logReadBack:
		h.reads += ints()["reads"]
		h.resyncs++
	case logSkipped:
		h.resyncs++
	}
	if r.Level >= slog.LevelWarn {
		var sb strings.Builder
		sb.WriteString(r.Level.String() + " " + r.Message)
		r.Attrs(func(a slog.Attr) bool {
			fmt.Fprintf(&sb, " %s=%v", a.Key, a.Value)
			return true
		})
		if strings.HasPrefix(r.Message, "apply failed") && h.applyFailed == "" {
			h.applyFailed = sb.String()
		}
		if len(h.problems) < 10 {
			h.problems = append(h.problems, sb.String())
		}
	}
	return nil
}

// take returns the counts since the last take and resets them.
func (h *benchLog) take() benchCounts {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.benchCounts
	c.problems = append([]string(nil), c.problems...)
	h.benchCounts = benchCounts{applyFailed: c.applyFailed}
	return c
}

func (h *benchLog) failIfApplyFailed(tb testing.TB) {
	h.mu.Lock()
	msg := h.applyFailed
	h.mu.Unlock()
	if msg != "" {
		tb.Fatalf("the driver failed an apply: %s", msg)
	}
}

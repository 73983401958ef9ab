package dataplane_test

// BenchmarkDriverChangeCPU: what one change from Felix costs the driver in
// CPU, on a node-shaped ruleset made from a recorded Felix stream,
// including everything the change sets off afterwards. The issue's
// requirement is that this stays constant in the size of the node, with a
// recorded Felix stream, at 1,000 and 10,000 endpoints: user CPU per change
// is ours and must be; system CPU is mostly the kernel's validation of the
// whole table at each commit, which grows with the table.
//
// Setup (once per endpoint count and kind of chains, in a throwaway network
// namespace):
// RunDriver with a real kernel and a run directory, fed through a pipe as a
// real Felix would feed it, from testdata/felix/real-felix-rules.bin (see
// benchRecording): the recorded ConfigUpdate (ARP suppression on, so both
// the inet and the arp table exist), every recorded message (five
// workloads in three namespaces with their kns. and ksa. profiles, 13
// policies and 2 staged ones, six IP sets, a host endpoint), then N−5
// clones of the five recorded workloads (the same profiles and tiers,
// their own names and addresses) with the recorded IP sets holding each
// clone's addresses where they hold its template's, and InSync.
//
// No interface exists for the endpoints: they report "down", but their
// chains, dispatch elements and ARP set elements are rendered and
// programmed all the same (the setup checks one of each), which is what
// the changes exercise. Routes, neighbours and sysctls, which need the interfaces, are
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
// change, each shaped like the recording's:
//
//   - change=policy+ipset: (1) the recorded ActivePolicyUpdate of policy
//     prod/db again with another port in its first rule (as Felix sent
//     p2-only-8080 with new ports: real-felix-session.bin, frame 19), (2)
//     an IPSetDeltaUpdate of the recorded IP set of that rule (a member
//     added, and the oldest added one removed in the same message). Both
//     touch the inet table only.
//   - change=endpoint: a clone of the recorded workload prod/p3 started,
//     then stopped again, as Felix sends a pod's start and end: the
//     IPSetDeltaUpdates of the IP sets its addresses belong to, then the
//     WorkloadEndpointUpdate or WorkloadEndpointRemove
//     (real-felix-session.bin, frames 10–11 and 20–21), written as one
//     burst. Both touch the inet and the arp table.
//
// Metrics, per change (b.N changes per run):
//
//   - cpu-ms/change, user-ms/change, sys-ms/change: the process's CPU
//     (getrusage RUSAGE_SELF) over the changes and their waits, nothing
//     subtracted. The kernel's work on our netlink batches and dumps runs in
//     our threads and counts as sys.
//   - idle-cpu-ms/s: the same process, idle, over idleWindow before the
//     changes and again after them: the baseline included in the waits
//     (about 1.4 s per change). It is larger at 10,000 endpoints than at
//     1,000, and it is per second, not per change.
//   - user-net-ms/change, sys-net-ms/change: user and system CPU per
//     change less the idle rate (user and system apart, the mean of the
//     two samples) times the wall time of the changes.
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
// (-bench 'ChangeCPU/^endpoints=1000$' for one size: the patterns are
// unanchored, and endpoints=1000 alone matches endpoints=10000 too). Each
// size is measured with a chain per endpoint (chains=per-endpoint, the
// default) and with NftepSharedEndpointChains (chains=shared: identical
// endpoint chains shared, so the kernel validates a few chains, however
// many endpoints the dispatch maps hold). Each size and kind of chains
// sets up one driver (about 2 s at 1,000 endpoints, 10 s at 10,000),
// shared by its sub-benchmarks and by their -count runs, which follow one
// another on it. The read-back count relies on nft.Table.Resync's debug
// lines (logReadBack, logSkipped); the setup fails if they are missing.
//
// With -short every kernel test, this one included, is skipped.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gproto "google.golang.org/protobuf/proto"

	"github.com/nftep/nftep/dataplane"
	"github.com/nftep/nftep/internal/netnstest"
	"github.com/nftep/nftep/internal/netnsutil"
	"github.com/nftep/nftep/internal/testutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
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
		for _, shared := range []bool{false, true} {
			chains := "per-endpoint"
			if shared {
				chains = "shared"
			}
			b.Run(fmt.Sprintf("endpoints=%d/chains=%s", n, chains), func(b *testing.B) {
				if n > 1000 && testing.Short() {
					b.Skip("10,000 endpoints: skipped in -short mode")
				}
				d := startBenchDriver(b, n, shared)
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
							d.addEndpoint()
						} else {
							d.removeEndpoint()
						}
					})
				})
			})
		}
	}
}

// benchDriver is a driver running in its own namespace, and the fake Felix
// that feeds it.
type benchDriver struct {
	ns     *netnstest.NS
	h      *netnsutil.NS
	n      int
	stream *benchStream
	pw     io.Writer
	w      *proto.Writer
	log    *benchLog
	seq    uint64
	// fatal is the benchmark that currently owns the driver (the outer
	// one during setup, then each sub-benchmark run in turn).
	fatal testing.TB

	// commits are the generations of the namespace's commits, as the
	// kernel announces them (nft.WatchCommits).
	commits chan uint32

	policyPort int32    // the current port of the policy change
	members    []string // the members the member change added and not yet removed
	nextMember int
}

func startBenchDriver(b *testing.B, n int, shared bool) *benchDriver {
	ns := netnstest.New(b) // skips without root
	h := openNS(b, ns)
	d := &benchDriver{ns: ns, h: h, n: n, stream: loadBenchStream(b, n), log: &benchLog{}, fatal: b, policyPort: 8000,
		commits: make(chan uint32, 1<<10)}
	// Commits are waited for by the kernel's announcement, not by polling
	// the generation: a poll every 5 ms through a commit that takes the
	// kernel 60 ms at 10,000 endpoints cost this process (whose CPU is
	// measured) ten times what it does at 1,000.
	watchCtx, stopWatch := context.WithCancel(context.Background())
	b.Cleanup(stopWatch)
	go func() {
		err := nft.WatchCommits(watchCtx, ns.Fd(), func(c nft.Commit) {
			select {
			case d.commits <- c.Generation:
			default: // full: the waits look at the generation again
			}
		})
		if err != nil && watchCtx.Err() == nil {
			b.Errorf("watch commits: %v", err)
		}
	}()
	opts := dataplane.Options{Namespace: h, RunDir: b.TempDir(), Logger: slog.New(d.log)}

	pr, pw := io.Pipe()
	d.pw, d.w = pw, proto.NewWriter(pw)
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
	config := maps.Clone(d.stream.config)
	// Per second, not per change: off, so that none lands in a
	// measurement. Everything else is the recording's.
	config[dataplane.KeyNftablesRefreshInterval] = "0"
	config[dataplane.KeyRouteRefreshInterval] = "0"
	if shared {
		config[render.KeySharedEndpointChains] = "true"
	}
	d.send(&proto.ToDataplane{Payload: &proto.ToDataplane_ConfigUpdate{ConfigUpdate: &proto.ConfigUpdate{Config: config}}})
	d.waitFor("the static table", setupTimeout, func() bool {
		ok, _ := dataplane.TableExists(h, nft.FamilyINet, "nftep")
		return ok
	})
	gen := d.generation()
	for _, m := range d.stream.messages() {
		d.send(m)
	}
	d.send(&proto.ToDataplane{Payload: &proto.ToDataplane_InSync{InSync: &proto.InSync{}}})
	d.waitCommitted(gen, setupTimeout)
	d.waitIdle(time.Now(), setupTimeout)
	cpu := cpuNow().sub(cpu0)
	b.Logf("%d endpoints (%s and %d clones): cold start %.1f s, %.0f ms CPU (user %.0f, sys %.0f)",
		n, benchRecording, d.stream.clones, time.Since(start).Seconds(), ms(cpu.total()), ms(cpu.user), ms(cpu.sys))

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
		// Endpoints without interfaces still get their chains and their
		// ARP suppression element.
		iface := benchIface(0)
		if shared {
			// The chains are content-addressed: the dispatch maps name
			// them, and no chain is named after the interface (else the
			// setting was ignored, and this would measure a chain per
			// endpoint under the wrong name).
			for _, m := range []string{"filter-to-wl", "filter-from-wl"} {
				if out, err := ns.Output("nft", "list", "map", "inet", "nftep", m); err != nil || !strings.Contains(string(out), `"`+iface+`"`) {
					b.Fatalf("no element for %s in map inet nftep %s: %v\n%s", iface, m, err, out)
				}
			}
			if out, err := ns.Output("nft", "list", "chain", "inet", "nftep", "filter-tw-"+iface); err == nil {
				b.Fatalf("shared chains: chain filter-tw-%s exists:\n%s", iface, out)
			}
		} else {
			for _, c := range []string{"inet nftep filter-tw-" + iface, "inet nftep filter-fw-" + iface} {
				f := strings.Fields(c)
				if out, err := ns.Output("nft", "list", "chain", f[0], f[1], f[2]); err != nil {
					b.Fatalf("chain %s not programmed: %v\n%s", c, err, out)
				}
			}
		}
		if out, err := ns.Output("nft", "list", "set", "arp", "nftep", "filter-arp-own"); err != nil || !strings.Contains(string(out), `"`+iface+`"`) {
			b.Fatalf("no element for %s in set arp nftep filter-arp-own: %v\n%s", iface, err, out)
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

	idleBefore := sampleIdle()
	d.log.take()
	stopProfile := startChangeProfile(b)
	defer stopProfile() // also when a change fails the benchmark
	start, cpu0 := time.Now(), cpuNow()
	for range b.N {
		gen := d.generation()
		change(*count)
		*count++
		committed := d.waitCommitted(gen, commitTimeout)
		d.waitIdle(committed, idleTimeout)
	}
	cpu, wall := cpuNow().sub(cpu0), time.Since(start)
	stopProfile()
	st := d.log.take()
	idleAfter := sampleIdle()
	if st.applied < b.N {
		b.Fatalf("%d changes but %d applies logged (%q)", b.N, st.applied, logApplied)
	}
	for _, m := range st.problems {
		b.Logf("driver: %s", m)
	}

	// The idle process's CPU over the same wall time, from the samples
	// before and after the changes (their mean rate), is taken off for the
	// net figures.
	idleUser := (idleBefore.user + idleAfter.user) / time.Duration(2*idleWindow/time.Millisecond)
	idleSys := (idleBefore.sys + idleAfter.sys) / time.Duration(2*idleWindow/time.Millisecond)
	wallMS := float64(wall) / float64(time.Millisecond)

	n := float64(b.N)
	b.ReportMetric(0, "ns/op") // wall time: mostly the waits
	b.ReportMetric(ms(cpu.total())/n, "cpu-ms/change")
	b.ReportMetric(ms(cpu.user)/n, "user-ms/change")
	b.ReportMetric(ms(cpu.sys)/n, "sys-ms/change")
	b.ReportMetric((ms(cpu.user)-ms(idleUser)*wallMS)/n, "user-net-ms/change")
	b.ReportMetric((ms(cpu.sys)-ms(idleSys)*wallMS)/n, "sys-net-ms/change")
	b.ReportMetric(float64(st.ops)/n, "ops/change")
	b.ReportMetric(float64(st.msgs)/n, "msgs/change")
	b.ReportMetric(float64(st.reads)/n, "readbacks/change")
	b.ReportMetric(float64(st.resyncs)/n, "resyncs/change")
	b.ReportMetric((ms(idleBefore.total())+ms(idleAfter.total()))/(2*idleWindow.Seconds()), "idle-cpu-ms/s")
}

// sampleIdle returns the process's CPU over idleWindow.
func sampleIdle() cpuTime {
	c0 := cpuNow()
	time.Sleep(idleWindow)
	return cpuNow().sub(c0)
}

// changePolicyPort sends the recorded policy again with another port in
// its first inbound rule, as Felix sends a policy whose rule changed.
func (d *benchDriver) changePolicyPort() {
	d.policyPort++
	if d.policyPort > 60000 {
		d.policyPort = 9000
	}
	d.send(d.stream.policyWithPort(d.policyPort))
}

// changeIPSetMember replaces the oldest added member of the recorded IP set
// the member change uses with a new one, in one IPSetDeltaUpdate.
func (d *benchDriver) changeIPSetMember() {
	d.nextMember++
	added := benchAddr(netip.AddrFrom4([4]byte{10, 201, 0, 0}), d.nextMember) + "/32"
	delta := &proto.IPSetDeltaUpdate{Id: d.stream.memberSet, AddedMembers: []string{added}}
	d.members = append(d.members, added)
	if len(d.members) > benchExtraMembers {
		delta.RemovedMembers = []string{d.members[0]}
		d.members = d.members[1:]
	}
	d.send(&proto.ToDataplane{Payload: &proto.ToDataplane_IpsetDeltaUpdate{IpsetDeltaUpdate: delta}})
}

// addEndpoint and removeEndpoint send what Felix sends when a pod shaped
// like the template starts or goes: the deltas of the IP sets its
// addresses belong to, then the endpoint (real-felix-session.bin, frames
// 10–11 and 20–21), written together as one burst.
func (d *benchDriver) addEndpoint() {
	ep := d.stream.clone(d.stream.template, d.stream.clones)
	var msgs []*proto.ToDataplane
	for _, delta := range d.stream.deltas(d.stream.template, d.stream.clones) {
		msgs = append(msgs, &proto.ToDataplane{Payload: &proto.ToDataplane_IpsetDeltaUpdate{IpsetDeltaUpdate: &proto.IPSetDeltaUpdate{
			Id: delta.id, AddedMembers: delta.members}}})
	}
	d.sendBurst(append(msgs, &proto.ToDataplane{Payload: &proto.ToDataplane_WorkloadEndpointUpdate{WorkloadEndpointUpdate: ep}}))
}

func (d *benchDriver) removeEndpoint() {
	ep := d.stream.clone(d.stream.template, d.stream.clones)
	var msgs []*proto.ToDataplane
	for _, delta := range d.stream.deltas(d.stream.template, d.stream.clones) {
		msgs = append(msgs, &proto.ToDataplane{Payload: &proto.ToDataplane_IpsetDeltaUpdate{IpsetDeltaUpdate: &proto.IPSetDeltaUpdate{
			Id: delta.id, RemovedMembers: delta.members}}})
	}
	d.sendBurst(append(msgs, &proto.ToDataplane{Payload: &proto.ToDataplane_WorkloadEndpointRemove{WorkloadEndpointRemove: &proto.WorkloadEndpointRemove{Id: ep.Id}}}))
}

// sendBurst writes msgs in one write, as a burst Felix wrote at once
// reaches the driver.
func (d *benchDriver) sendBurst(msgs []*proto.ToDataplane) {
	var buf bytes.Buffer
	w := proto.NewWriter(&buf)
	for _, m := range msgs {
		m.SequenceNumber = d.seq
		d.seq++
		if err := w.WriteMessage(m); err != nil {
			d.fatal.Fatalf("encode: %v", err)
		}
	}
	if _, err := d.pw.Write(buf.Bytes()); err != nil {
		d.fatal.Fatalf("write to the driver: %v", err)
	}
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

// waitCommitted waits until a commit moves the ruleset generation past
// gen (the driver committed) and returns when it saw that: the kernel
// announces each commit (d.commits), so the wait costs the same whatever
// the commit takes.
func (d *benchDriver) waitCommitted(gen uint32, timeout time.Duration) time.Time {
	deadline := time.After(timeout)
	for {
		select {
		case g := <-d.commits:
			if g-gen-1 < 1<<31 { // g after gen, in serial number arithmetic
				d.log.failIfApplyFailed(d.fatal)
				return time.Now()
			}
		case <-time.After(time.Second):
			// Announcements dropped (the channel was full): look.
			if d.generation() != gen {
				d.log.failIfApplyFailed(d.fatal)
				return time.Now()
			}
		case <-deadline:
			d.fatal.Fatalf("timed out after %v waiting for a commit", timeout)
		}
	}
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

// The node, from the recorded stream.

// benchRecording is the recorded Felix stream the node and the changes
// are made from (testdata/felix/README.md): five workloads in three
// namespaces with their kns. and ksa. profiles, 13 policies and 2 staged
// ones (named ports, negations, ICMP, a namespaced NetworkPolicy), six IP
// sets of which two are named-port sets, and a host endpoint.
const benchRecording = "real-felix-rules.bin"

const (
	// benchTemplate is the recorded workload the endpoint changes clone:
	// prod/p3, a member of four of the recorded IP sets.
	benchTemplate = "prod/p3"
	// benchPolicyName is the recorded policy the policy change sends again
	// with another port.
	benchPolicyName = "db"
	// benchMemberSet is the recorded IP set the member change edits (the
	// namespace selector env == 'dev' of policy prod/db).
	benchMemberSet = "s:NVL58I0xheF81G7_VXxBoT33AbkfgKNlvFCD9A"
	// benchExtraMembers is how many members the member change keeps
	// added before it removes the oldest with each add.
	benchExtraMembers = 4
)

// benchStream is the recording, ready to scale: its messages, the recorded
// workloads as templates for clones, and the recorded IP sets with the
// clones' addresses added where the templates' addresses are.
type benchStream struct {
	config map[string]string
	// state is every recorded message but the ConfigUpdate and InSync, in
	// order; IP sets are sent scaled (see sets) in their place.
	state []*proto.ToDataplane
	// templates are the last version of each recorded workload, in the
	// order of their first update; template is the one endpoint changes
	// clone.
	templates []*proto.WorkloadEndpointUpdate
	template  *proto.WorkloadEndpointUpdate
	// sets are the recorded full IP sets, by ID.
	sets map[string]*proto.IPSetUpdate
	// policy is the recorded policy the policy change edits.
	policy *proto.ActivePolicyUpdate
	// memberSet is the IP set the member change edits.
	memberSet string
	// clones is the number of clones in the node: clone k is templates[k
	// mod len] with the k-th addresses; clone number clones is the one
	// the endpoint change adds and removes.
	clones int
}

func loadBenchStream(b *testing.B, n int) *benchStream {
	st := &benchStream{sets: map[string]*proto.IPSetUpdate{}, memberSet: benchMemberSet}
	last := map[string]*proto.WorkloadEndpointUpdate{}
	var order []string
	for _, m := range testutil.FelixMessages(b, benchRecording) {
		switch p := testutil.Payload(m).(type) {
		case *proto.ConfigUpdate:
			st.config = maps.Clone(p.Config)
			continue
		case *proto.InSync:
			continue
		case *proto.IPSetUpdate:
			st.sets[p.Id] = p
		case *proto.ActivePolicyUpdate:
			if p.Id.GetName() == benchPolicyName {
				st.policy = p
			}
		case *proto.WorkloadEndpointUpdate:
			id := p.Id.GetWorkloadId()
			if last[id] == nil {
				order = append(order, id)
			}
			last[id] = p
		}
		st.state = append(st.state, m)
	}
	for _, id := range order {
		st.templates = append(st.templates, last[id])
	}
	st.template = last[benchTemplate]
	if st.config == nil || st.template == nil || st.policy == nil || st.sets[benchMemberSet] == nil || len(st.template.Endpoint.Ipv4Nets) == 0 {
		b.Fatalf("recording %s lacks the configuration, workload %s, policy %s or IP set %s the benchmark uses", benchRecording, benchTemplate, benchPolicyName, benchMemberSet)
	}
	st.clones = max(n-len(st.templates), 0)
	return st
}

// messages is the start of day of the node: the recording's messages with
// the scaled IP sets, then the clones.
func (st *benchStream) messages() []*proto.ToDataplane {
	var out []*proto.ToDataplane
	for _, m := range st.state {
		if u := m.GetIpsetUpdate(); u != nil {
			m = &proto.ToDataplane{Payload: &proto.ToDataplane_IpsetUpdate{IpsetUpdate: st.scaledSet(u)}}
		}
		out = append(out, m)
	}
	for k := range st.clones {
		out = append(out, &proto.ToDataplane{Payload: &proto.ToDataplane_WorkloadEndpointUpdate{WorkloadEndpointUpdate: st.clone(st.templates[k%len(st.templates)], k)}})
	}
	return out
}

// clone is workload k, shaped like the recorded workload t: the same
// namespace, profiles and tiers, its own name, interface and addresses.
func (st *benchStream) clone(t *proto.WorkloadEndpointUpdate, k int) *proto.WorkloadEndpointUpdate {
	c := gproto.Clone(t).(*proto.WorkloadEndpointUpdate)
	ns, _, _ := strings.Cut(t.Id.GetWorkloadId(), "/")
	c.Id.WorkloadId = fmt.Sprintf("%s/bench-%d", ns, k)
	ep := c.Endpoint
	ep.Name = benchIface(k)
	v4, v6 := benchCloneAddrs(k)
	a := v4.As4()
	ep.Mac = fmt.Sprintf("ee:ee:%02x:%02x:%02x:%02x", a[0], a[1], a[2], a[3])
	ep.Ipv4Nets = []string{v4.String() + "/32"}
	if len(ep.Ipv6Nets) > 0 {
		ep.Ipv6Nets = []string{v6.String() + "/128"}
	}
	return c
}

// benchCloneAddrs are clone k's addresses: 10.64.0.0/16 and fd00:64::/64,
// apart from the recording's 10.65.0.0/24 and fd00:65::/64.
func benchCloneAddrs(k int) (netip.Addr, netip.Addr) {
	v4 := netip.MustParseAddr(benchAddr(netip.AddrFrom4([4]byte{10, 64, 0, 0}), k+1))
	v6 := netip.MustParseAddr(fmt.Sprintf("fd00:64::%x", k+1))
	return v4, v6
}

// scaledSet is the recorded IP set u with, for every member that holds a
// template's address, the same member for each of that template's clones
// (a selector's set holds the address of every pod it selects).
func (st *benchStream) scaledSet(u *proto.IPSetUpdate) *proto.IPSetUpdate {
	out := gproto.Clone(u).(*proto.IPSetUpdate)
	for ti, t := range st.templates {
		for k := ti; k < st.clones; k += len(st.templates) {
			out.Members = append(out.Members, cloneMembers(t, k, u.Members)...)
		}
	}
	return out
}

// benchDelta is the change of one IP set that a clone's start or end makes.
type benchDelta struct {
	id      string
	members []string
}

// deltas are the IP set members clone k of template t adds, per set, in
// the order of the set IDs.
func (st *benchStream) deltas(t *proto.WorkloadEndpointUpdate, k int) []benchDelta {
	var out []benchDelta
	for _, id := range slices.Sorted(maps.Keys(st.sets)) {
		if ms := cloneMembers(t, k, st.sets[id].Members); len(ms) > 0 {
			out = append(out, benchDelta{id: id, members: ms})
		}
	}
	return out
}

// cloneMembers returns the members of members that hold one of template
// t's addresses ("10.65.0.3/32", "10.65.0.3,tcp:9090"), with clone k's
// address of the same family in its place.
func cloneMembers(t *proto.WorkloadEndpointUpdate, k int, members []string) []string {
	v4, v6 := benchCloneAddrs(k)
	subst := map[string]string{}
	for _, n := range t.Endpoint.Ipv4Nets {
		a, _, _ := strings.Cut(n, "/")
		subst[a] = v4.String()
	}
	for _, n := range t.Endpoint.Ipv6Nets {
		a, _, _ := strings.Cut(n, "/")
		subst[a] = v6.String()
	}
	var out []string
	for _, m := range members {
		i := strings.IndexAny(m, "/,")
		if i < 0 {
			i = len(m)
		}
		if a, ok := subst[m[:i]]; ok {
			out = append(out, a+m[i:])
		}
	}
	return out
}

// policyWithPort is the recorded policy with port as the destination port
// of its first inbound rule.
func (st *benchStream) policyWithPort(port int32) *proto.ToDataplane {
	p := gproto.Clone(st.policy).(*proto.ActivePolicyUpdate)
	p.Policy.InboundRules[0].DstPorts = []*proto.PortRange{{First: port, Last: port}}
	return &proto.ToDataplane{Payload: &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: p}}
}

func benchIface(i int) string { return fmt.Sprintf("cali%011x", i) }

// The synthetic node of the foreign-edit and soak tests.

// Its size.
const (
	benchPolicies   = 200
	benchNamespaces = 10
	benchSetMembers = 4
)

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

// startChangeProfile starts a CPU profile of the changes alone (not the
// setup, which at 10,000 endpoints would swamp them) when
// NFTEP_BENCH_CPUPROFILE names a directory: one file per sub-benchmark
// run, named after it. It returns the function that stops it (once, however
// often it is called).
func startChangeProfile(b *testing.B) (stop func()) {
	dir := os.Getenv("NFTEP_BENCH_CPUPROFILE")
	if dir == "" {
		return func() {}
	}
	name := strings.NewReplacer("/", "_", "=", "-").Replace(b.Name())
	f, err := os.CreateTemp(dir, name+"-*.prof")
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatal(err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				b.Error(err)
			}
		})
	}
}

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

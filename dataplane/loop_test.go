package dataplane

// Unit tests of the event loop with a fake kernel: start-of-day order,
// batching, retries, status delivery and the state-file source.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/routes"
)

// fakeFelix is a fake Felix: it writes ToDataplane frames to the driver and
// collects what the driver writes back.
type fakeFelix struct {
	t    *testing.T
	w    *proto.Writer
	pw   *io.PipeWriter
	out  *syncBuffer
	done chan error
	seq  uint64
	idle *idleWatch
}

// startDriver runs the driver on k with opts; retries come after
// milliseconds, not seconds, so that tests see several. With a fake clock
// in opts, the driver's timers follow it.
func startDriver(t *testing.T, k *fakeKernel, opts Options) *fakeFelix {
	t.Helper()
	pr, pw := io.Pipe()
	f := &fakeFelix{t: t, w: proto.NewWriter(pw), pw: pw, out: &syncBuffer{}, done: make(chan error, 1)}
	opts.Kernel = k
	if opts.test.retryMin == 0 {
		opts.test.retryMin, opts.test.retryMax = 5*time.Millisecond, 20*time.Millisecond
	}
	clk, _ := opts.test.clock.(*fakeClock)
	f.idle = watchIdle(&opts, clk)
	go func() { f.done <- RunDriver(context.Background(), opts, pr, f.out) }()
	t.Cleanup(func() { pw.Close() })
	return f
}

func (f *fakeFelix) send(env *proto.ToDataplane) {
	f.t.Helper()
	env.SequenceNumber = f.seq
	f.seq++
	if err := f.w.WriteMessage(env); err != nil {
		f.t.Fatal(err)
	}
}

// waitIdle waits until the driver has handled every frame sent so far (and
// every timer its fake clock fired) and has nothing pending.
func (f *fakeFelix) waitIdle() {
	f.t.Helper()
	f.idle.wait(f.t, int(f.seq))
}

// waitHandled waits until the driver has handled every frame sent so far
// (and every timer its fake clock fired), though it may wait for a timer.
func (f *fakeFelix) waitHandled() {
	f.t.Helper()
	f.idle.waitHandled(f.t, int(f.seq))
}

// close ends Felix's stream and returns the driver's result.
func (f *fakeFelix) close() error {
	f.t.Helper()
	f.pw.Close()
	select {
	case err := <-f.done:
		return err
	case <-time.After(5 * time.Second):
		f.t.Fatal("the driver did not exit after EOF")
		return nil
	}
}

func configUpdate(kv map[string]string) *proto.ToDataplane {
	return &proto.ToDataplane{Payload: &proto.ToDataplane_ConfigUpdate{ConfigUpdate: &proto.ConfigUpdate{Config: kv}}}
}

func inSync() *proto.ToDataplane {
	return &proto.ToDataplane{Payload: &proto.ToDataplane_InSync{InSync: &proto.InSync{}}}
}

func wepUpdate(workload, iface, ip string) *proto.ToDataplane {
	return &proto.ToDataplane{Payload: &proto.ToDataplane_WorkloadEndpointUpdate{WorkloadEndpointUpdate: &proto.WorkloadEndpointUpdate{
		Id:       &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: workload, EndpointId: "eth0"},
		Endpoint: &proto.WorkloadEndpoint{State: "active", Name: iface, Ipv4Nets: []string{ip + "/32"}},
	}}}
}

func wepRemove(workload string) *proto.ToDataplane {
	return &proto.ToDataplane{Payload: &proto.ToDataplane_WorkloadEndpointRemove{WorkloadEndpointRemove: &proto.WorkloadEndpointRemove{
		Id: &proto.WorkloadEndpointID{OrchestratorId: "k8s", WorkloadId: workload, EndpointId: "eth0"},
	}}}
}

// TestDriverStartOfDay follows Felix's start of day: the static table goes
// in as soon as the configuration is known; the snapshot is only recorded
// until InSync, which programs it in one apply; statuses go out after it.
func TestDriverStartOfDay(t *testing.T) {
	k := newFakeKernel()
	k.ifaces = upIface("cali1", 5)
	f := startDriver(t, k, Options{})

	// 1. ConfigUpdate: the static table, fail closed, before anything else.
	f.send(configUpdate(map[string]string{"FelixHostname": "node1"}))
	require.Eventually(t, func() bool { return k.table("inet nftep").applies == 1 }, waitLimit, pollTick, "the static table")
	static := k.table("inet nftep").programmed
	if !strings.Contains(static, `drop comment "Unknown interface"`) {
		t.Errorf("the first apply lacks the unknown-interface drop:\n%s", static)
	}

	// 2. The snapshot: recorded, not applied.
	f.send(wepUpdate("default/p1", "cali1", "10.65.0.1"))
	f.waitIdle()
	if got := k.table("inet nftep"); got.applies != 1 || strings.Contains(got.programmed, "cali1") {
		t.Errorf("applied before InSync: %d applies", got.applies)
	}
	if got := statusLines(f.out.frames(t)); len(got) != 0 {
		t.Errorf("statuses before InSync: %v", got)
	}

	// 3. InSync: everything at once.
	f.send(inSync())
	require.Eventually(t, func() bool {
		return strings.Contains(k.table("inet nftep").programmed, `"cali1" comment "endpoint k8s/default/p1/eth0" : goto filter-tw-cali1`)
	}, waitLimit, pollTick, "the endpoint programmed")
	require.Eventually(t, func() bool { return slices.Contains(statusLines(f.out.frames(t)), "default/p1=up") }, waitLimit, pollTick, "p1's status")
	if got := k.routeTargets("cali1"); len(got) != 1 || got[0].CIDR.String() != "10.65.0.1/32" {
		t.Errorf("routes of cali1 = %v", got)
	}

	// 4. An incremental update, then Felix goes away: exit cleanly.
	f.send(wepRemove("default/p1"))
	if err := f.close(); err != nil {
		t.Fatalf("driver: %v", err)
	}
	if strings.Contains(k.table("inet nftep").programmed, "cali1") {
		t.Errorf("the last batch before EOF was not applied")
	}
	ms := f.out.frames(t)
	if diff := cmp.Diff([]string{"default/p1=up", "default/p1=removed"}, statusLines(ms)); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if _, ok := ms[0].GetPayload().(*proto.FromDataplane_ProcessStatusUpdate); !ok {
		t.Errorf("first frame to Felix is %T, want a ProcessStatusUpdate", ms[0].GetPayload())
	}
	for i, m := range ms {
		if m.GetSequenceNumber() != uint64(i) {
			t.Errorf("frame %d has sequence number %d", i, m.GetSequenceNumber())
		}
	}
}

// TestDriverKeepsExistingTable: a table a previous driver left is not
// touched until InSync (the static table would cut every endpoint off).
func TestDriverKeepsExistingTable(t *testing.T) {
	k := newFakeKernel()
	k.exist(nft.FamilyINet, "nftep")
	f := startDriver(t, k, Options{})
	f.send(configUpdate(nil))
	f.send(wepUpdate("default/p1", "cali1", "10.65.0.1"))
	f.waitIdle()
	if n := k.table("inet nftep").applies; n != 0 {
		t.Errorf("%d applies before InSync over an existing table, want 0", n)
	}
	f.send(inSync())
	require.Eventually(t, func() bool { return k.table("inet nftep").applies == 1 }, waitLimit, pollTick, "the apply at InSync")
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
}

func TestDriverProtocolErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		write   func(f *fakeFelix)
		wantErr string
	}{
		{"update before config", func(f *fakeFelix) { f.send(wepUpdate("a/b", "cali1", "10.0.0.1")) }, "before the first ConfigUpdate"},
		{"InSync before config", func(f *fakeFelix) { f.send(inSync()) }, "InSync before the first ConfigUpdate"},
		{"truncated frame", func(f *fakeFelix) { f.pw.Write([]byte{9, 0, 0, 0, 0, 0, 0, 0, 1}) }, "read from Felix (fd 3), frame 0"},
		{"bad config", func(f *fakeFelix) { f.send(configUpdate(map[string]string{"VXLANPort": "x"})) }, `felix configuration: VXLANPort="x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startDriver(t, newFakeKernel(), Options{})
			tc.write(f)
			err := f.close()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("driver error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestDriverConfigUnknownAndMalformed: Felix sends its whole
// configuration, so keys nftep does not use are ignored; a malformed value
// of one it uses stops the driver at start (the error names the key:
// TestDriverProtocolErrors) and, in a later ConfigUpdate, is reported and
// the running configuration kept.
func TestDriverConfigUnknownAndMalformed(t *testing.T) {
	var logged syncBuffer
	k := newFakeKernel()
	f := startDriver(t, k, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	f.send(configUpdate(map[string]string{"InterfacePrefix": "cali", "NoSuchFelixKey": "1", "AnotherUnknownKey": "{not: valid"}))
	f.send(inSync())
	f.send(wepUpdate("ns/a", "cali1", "10.0.0.1"))
	f.waitIdle()
	f.send(configUpdate(map[string]string{"InterfacePrefix": "cali", "VXLANPort": "x"}))
	f.send(wepUpdate("ns/b", "cali2", "10.0.0.2"))
	f.waitIdle()
	if err := f.close(); err != nil {
		t.Fatalf("driver stopped: %v", err)
	}
	if !strings.Contains(logged.String(), `msg="Felix sent a configuration nftep cannot read; keeping the running configuration" error="VXLANPort=\"x\": not a port"`) {
		t.Errorf("the malformed update is not reported with its key:\n%s", logged.String())
	}
	table := k.nft.DumpTable(nft.FamilyINet, "nftep")
	for _, iface := range []string{`"cali1"`, `"cali2"`} {
		if !strings.Contains(table, iface) {
			t.Errorf("endpoint on %s not programmed:\n%s", iface, table)
		}
	}
}

// TestDriverBatching: a burst of updates is one transaction, not one per
// message.
func TestDriverBatching(t *testing.T) {
	k := newFakeKernel()
	clk := newFakeClock()
	opts := Options{BatchDelay: 20 * time.Millisecond, MaxBatchDelay: time.Second}
	opts.test.clock = clk
	f := startDriver(t, k, opts)
	f.send(configUpdate(nil))
	f.send(inSync())
	// The static table at ConfigUpdate, then the apply at InSync.
	f.waitIdle()
	before := k.commits("inet nftep")
	// The burst arrives within the batch delay (the fake clock stands
	// still while it is sent, whatever the machine's load).
	for i := range 50 {
		f.send(wepUpdate("default/p"+string(rune('a'+i%26))+string(rune('a'+i/26)), "cali"+string(rune('a'+i%26))+string(rune('a'+i/26)), "10.65.1.1"))
	}
	f.waitHandled()
	clk.Advance(20 * time.Millisecond)
	f.waitIdle()
	if !strings.Contains(k.table("inet nftep").programmed, "calixb") {
		t.Fatalf("the burst is not applied after the batch delay")
	}
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
	if n := k.commits("inet nftep") - before; n != 1 {
		t.Errorf("a burst of 50 updates took %d transactions, want 1", n)
	}
}

// TestDriverAppliesWhenInputDrained: with the default batch delay, the
// driver applies as soon as Felix's input holds no further frame, as
// Felix's own dataplane does, without waiting for the batch timer (the fake
// clock stands still throughout); a burst that arrives in one write is
// still one transaction.
func TestDriverAppliesWhenInputDrained(t *testing.T) {
	k := newFakeKernel()
	clk := newFakeClock()
	opts := Options{}
	opts.test.clock = clk
	f := startDriver(t, k, opts)
	f.send(configUpdate(nil))
	f.send(inSync())
	f.waitIdle()

	// 1. One message: applied at once.
	before := k.commits("inet nftep")
	f.send(wepUpdate("default/p1", "cali1", "10.65.0.1"))
	f.waitIdle()
	require.Contains(t, k.table("inet nftep").programmed, `"cali1"`, "one message is not applied without the batch timer")
	assert.Equal(t, 1, k.commits("inet nftep")-before, "transactions for one message")

	// 2. A burst in one write: one transaction.
	var burst bytes.Buffer
	w := proto.NewWriter(&burst)
	for i := range 20 {
		m := wepUpdate(fmt.Sprintf("default/q%d", i), fmt.Sprintf("caliq%d", i), fmt.Sprintf("10.65.1.%d", i+1))
		m.SequenceNumber = f.seq
		f.seq++
		require.NoError(t, w.WriteMessage(m))
	}
	before = k.commits("inet nftep")
	_, err := f.pw.Write(burst.Bytes())
	require.NoError(t, err)
	f.waitIdle()
	require.Contains(t, k.table("inet nftep").programmed, `"caliq19"`, "the burst is not applied without the batch timer")
	assert.Equal(t, 1, k.commits("inet nftep")-before, "transactions for a burst written at once")
	require.NoError(t, f.close())
}

// TestDriverRetriesFailedApply: a refused transaction is retried with
// backoff, starting with a full resync; statuses wait for the success.
func TestDriverRetriesFailedApply(t *testing.T) {
	k := newFakeKernel()
	k.ifaces = upIface("cali1", 5)
	f := startDriver(t, k, Options{})
	f.send(configUpdate(nil))
	require.Eventually(t, func() bool {
		return k.table("inet nftep").applies == 1 && k.table("arp nftep").applies == 1
	}, waitLimit, pollTick, "the static tables")
	k.failNext(3)
	f.send(wepUpdate("default/p1", "cali1", "10.65.0.1"))
	f.send(inSync())
	require.Eventually(t, func() bool {
		// applies counts successes once the call has returned, after
		// programmed changed: the static table's apply and this one.
		t := k.table("inet nftep")
		return strings.Contains(t.programmed, "cali1") && t.applies >= 2
	}, waitLimit, pollTick, "the retries to succeed")
	got := k.table("inet nftep")
	if got.failures != 3 || got.resyncs < 3 {
		t.Errorf("failures %d, resyncs %d: want 3 failures, each retry a resync", got.failures, got.resyncs)
	}
	require.Eventually(t, func() bool { return slices.Contains(statusLines(f.out.frames(t)), "default/p1=up") }, waitLimit, pollTick, "p1's status")
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
}

// TestDriverInterfaceEvents: interface events from the monitor reach the
// endpoint manager (status up) after InSync, batched like Felix's messages.
func TestDriverInterfaceEvents(t *testing.T) {
	k := newFakeKernel()
	k.watch = make(chan any)
	f := startDriver(t, k, Options{})
	f.send(configUpdate(nil))
	f.send(wepUpdate("default/p1", "cali1", "10.65.0.1"))
	f.send(inSync())
	require.Eventually(t, func() bool { return slices.Contains(statusLines(f.out.frames(t)), "default/p1=down") }, waitLimit, pollTick, "p1 down")
	for _, u := range upIface("cali1", 7) {
		k.watch <- u
	}
	require.Eventually(t, func() bool { return slices.Contains(statusLines(f.out.frames(t)), "default/p1=up") }, waitLimit, pollTick, "p1 up")
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
}

// TestStatusFileWrittenOnce: an apply that reports statuses writes
// status.json at once when the file was out of date anyway (the daemon's
// first apply); the status timer then has nothing left to write, and an
// idle daemon does not rewrite the file. Statuses that change later are
// written within StatusFileInterval.
func TestStatusFileWrittenOnce(t *testing.T) {
	k := newFakeKernel()
	k.watch = make(chan any)
	dir := t.TempDir()
	f := startDriver(t, k, Options{RunDir: dir, StatusFileInterval: 20 * time.Millisecond})
	f.send(configUpdate(nil))
	f.send(wepUpdate("default/p1", "cali1", "10.65.0.1"))
	f.send(inSync())
	require.Eventually(t, func() bool { return slices.Contains(statusLines(f.out.frames(t)), "default/p1=down") }, waitLimit, pollTick, "p1 down")
	statusFile := filepath.Join(dir, StatusFileName)
	inode := func() uint64 {
		fi, err := os.Stat(statusFile)
		if err != nil {
			return 0
		}
		return fi.Sys().(*syscall.Stat_t).Ino // each write renames a new file into place
	}
	// The status frames go out before the same apply writes the file:
	// wait for the apply to finish.
	f.waitHandled()
	st, err := ReadStatus(statusFile)
	require.NoError(t, err, "status.json written by the first apply")
	require.Len(t, st.Endpoints, 1, "status.json written by the first apply")
	first := inode()
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, first, inode(), "status.json rewritten while nothing changed")

	for _, u := range upIface("cali1", 7) {
		k.watch <- u
	}
	require.Eventually(t, func() bool {
		st, err := ReadStatus(statusFile)
		return err == nil && len(st.Endpoints) == 1 && st.Endpoints[0].Status == "up"
	}, waitLimit, pollTick, "p1 up in status.json")
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
}

const goodState = `
config:
  InterfacePrefix: cali
updates:
  - activeProfileUpdate:
      id: {name: allow}
      profile:
        inboundRules: [{action: allow}]
        outboundRules: [{action: allow}]
  - workloadEndpointUpdate:
      id: {orchestratorId: k8s, workloadId: ns/a, endpointId: eth0}
      endpoint: {state: active, name: cali-a, ipv4Nets: [10.65.0.1/32], profileIds: [allow]}
`

// TestRunStateFile follows a state file through good, bad and changed
// versions: a bad one changes nothing and is reported; a good one is
// applied incrementally; a new configuration rebuilds the state, and a
// renamed table replaces the old one.
func TestRunStateFile(t *testing.T) {
	k := newFakeKernel()
	k.ifaces = upIface("cali-a", 5)
	dir := t.TempDir()
	path := filepath.Join(dir, "node.yaml")
	write := func(s string) {
		t.Helper()
		// Through a rename, as editors do: a new inode each time.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(goodState)
	runDir := filepath.Join(dir, "run")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Kernel: k, RunDir: runDir, PollInterval: 5 * time.Millisecond}, path, nil)
	}()
	status := func() *Status {
		s, err := ReadStatus(filepath.Join(runDir, StatusFileName))
		if err != nil {
			return &Status{}
		}
		return s
	}

	// 1. The good file.
	require.Eventually(t, func() bool { return strings.Contains(k.table("inet nftep").programmed, `"cali-a"`) }, waitLimit, pollTick, "the file applied")
	require.Eventually(t, func() bool {
		s := status()
		return len(s.Endpoints) == 1 && s.Endpoints[0].Status == "up" && s.LastError == ""
	}, waitLimit, pollTick, "status up")
	good := k.table("inet nftep")

	// 2. A bad version: reported, nothing applied.
	write(strings.Replace(goodState, "10.65.0.1/32", "10.65.0.1/33", 1))
	require.Eventually(t, func() bool { return strings.Contains(status().LastError, "endpoint.ipv4Nets[0]") }, waitLimit, pollTick, "the error reported")
	if got := k.table("inet nftep"); got.programmed != good.programmed {
		t.Errorf("a bad state file changed the programmed table")
	}

	// 3. A good change: a second endpoint, applied incrementally.
	write(goodState + `
  - workloadEndpointUpdate:
      id: {orchestratorId: k8s, workloadId: ns/b, endpointId: eth0}
      endpoint: {state: active, name: cali-b, ipv4Nets: [10.65.0.2/32], profileIds: [allow]}
`)
	require.Eventually(t, func() bool { return strings.Contains(k.table("inet nftep").programmed, `"cali-b"`) }, waitLimit, pollTick, "cali-b applied")
	require.Eventually(t, func() bool { return status().LastError == "" && len(status().Endpoints) == 2 }, waitLimit, pollTick, "the error cleared")

	// 4. A new table name: a new engine, and the old table deleted.
	write(strings.Replace(goodState, "InterfacePrefix: cali", "InterfacePrefix: cali\n  NftepTableName: other", 1))
	require.Eventually(t, func() bool { return strings.Contains(k.table("inet other").programmed, `"cali-a"`) }, waitLimit, pollTick, "the renamed table")
	require.Eventually(t, func() bool { return k.table("inet nftep").deleted && k.table("arp nftep").deleted }, waitLimit, pollTick, "the old table deleted")
	if strings.Contains(k.table("inet other").programmed, "cali-b") {
		t.Errorf("cali-b survived the new configuration")
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestRunBadFileAtStartFailsClosed: with no valid state yet, the node gets
// the static table (unknown workload interfaces dropped), never nothing.
func TestRunBadFileAtStartFailsClosed(t *testing.T) {
	k := newFakeKernel()
	path := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(path, []byte("updates: [{}]"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, Options{Kernel: k, PollInterval: 5 * time.Millisecond}, path, nil) }()
	require.Eventually(t, func() bool {
		return strings.Contains(k.table("inet nftep").programmed, `drop comment "Unknown interface"`)
	}, waitLimit, pollTick, "the static table")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestMonitorFailureIsFatal: without interface events statuses and routes
// would go stale unnoticed, so a monitor that cannot run stops the daemon.
func TestMonitorFailureIsFatal(t *testing.T) {
	k := newFakeKernel()
	k.watchErr = errors.New("interface monitor: subscribe to link updates: permission denied")
	path := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(path, []byte(goodState), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Run(context.Background(), Options{Kernel: k}, path, nil)
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("Run = %v, want the monitor's error", err)
	}
}

// TestDriverBatchArrivingTogetherIsOneTransaction: Felix moves a pod
// between IP sets with a removal and an add sent together. They must land
// in one transaction: applied apart, the pod would be in neither set for
// the time between the two commits. Here a periodic resync comes due
// between the two messages, which arrive within the batch delay; it must
// wait for the batch instead of applying its first half.
func TestDriverBatchArrivingTogetherIsOneTransaction(t *testing.T) {
	k := newFakeKernel()
	k.ifaces = upIface("cali1", 5)
	clk := newFakeClock()
	opts := Options{BatchDelay: 150 * time.Millisecond, MaxBatchDelay: time.Second}
	opts.test.clock = clk
	f := startDriver(t, k, opts)
	f.send(configUpdate(map[string]string{"NftablesRefreshInterval": "0.005"}))
	pid := &proto.PolicyID{Name: "allow-set", Kind: "GlobalNetworkPolicy"}
	f.send(&proto.ToDataplane{Payload: &proto.ToDataplane_IpsetUpdate{IpsetUpdate: &proto.IPSetUpdate{
		Id: "s:web", Type: proto.IPSetUpdate_NET, Members: []string{"10.65.0.1/32"}}}})
	f.send(&proto.ToDataplane{Payload: &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: &proto.ActivePolicyUpdate{
		Id: pid, Policy: &proto.Policy{Tier: "default", InboundRules: []*proto.Rule{{Action: "allow", SrcIpSetIds: []string{"s:web"}}}}}}})
	wep := wepUpdate("default/p1", "cali1", "10.65.0.9")
	wep.GetWorkloadEndpointUpdate().Endpoint.Tiers = []*proto.TierInfo{{Name: "default", IngressPolicies: []*proto.PolicyID{pid}}}
	f.send(wep)
	f.send(inSync())
	f.waitIdle()
	if !strings.Contains(k.table("inet nftep").programmed, "10.65.0.1") {
		t.Fatalf("the set is not programmed after InSync:\n%s", k.table("inet nftep").programmed)
	}
	before := len(k.table("inet nftep").history)

	f.send(&proto.ToDataplane{Payload: &proto.ToDataplane_IpsetDeltaUpdate{IpsetDeltaUpdate: &proto.IPSetDeltaUpdate{
		Id: "s:web", RemovedMembers: []string{"10.65.0.1/32"}}}})
	f.waitHandled()
	for range 10 { // periodic resyncs come due meanwhile
		clk.Advance(5 * time.Millisecond)
		f.waitHandled()
	}
	f.send(&proto.ToDataplane{Payload: &proto.ToDataplane_IpsetDeltaUpdate{IpsetDeltaUpdate: &proto.IPSetDeltaUpdate{
		Id: "s:web", AddedMembers: []string{"10.65.0.2/32"}}}})
	f.waitHandled()
	if got := len(k.table("inet nftep").history); got != before {
		t.Errorf("%d transactions before the batch delay passed, want none", got-before)
	}
	clk.Advance(150 * time.Millisecond)
	f.waitIdle()
	if !strings.Contains(k.table("inet nftep").programmed, "10.65.0.2") {
		t.Fatalf("the new member is not programmed after the batch delay:\n%s", k.table("inet nftep").programmed)
	}

	changes := k.table("inet nftep").history[before:]
	for i, text := range changes {
		if !strings.Contains(text, "10.65.0.1") && !strings.Contains(text, "10.65.0.2") {
			t.Errorf("transaction %d of the move left the set empty:\n%s", i+1, text)
		}
	}
	if len(changes) != 1 {
		t.Errorf("the removal and the add took %d transactions, want 1", len(changes))
	}
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
}

// TestPeriodicWorkSharesWakeups: an idle daemon's periodic work falls due
// together: the sysctl read-back rides on the nftables refresh's ticker,
// on one grid that starts with the engine, so that a tick that comes late
// does not shift it (each wakeup of an idle daemon costs tens of the
// runtime's own), and no other timer wakes the daemon in between.
func TestPeriodicWorkSharesWakeups(t *testing.T) {
	k := newFakeKernel()
	k.ifaces = upIface("cali1", 5)
	clk := newFakeClock()
	start := clk.Now()
	opts := Options{}
	opts.test.clock = clk
	f := startDriver(t, k, opts)
	f.send(configUpdate(map[string]string{"RouteRefreshInterval": "90", "NftablesRefreshInterval": "180"}))
	f.send(wepUpdate("default/p1", "cali1", "10.65.0.9"))
	f.send(inSync())
	f.waitIdle()
	clk.Advance(time.Second) // the resync our own commit's events ask for
	f.waitIdle()
	const proxyARP = "/proc/sys/net/ipv4/conf/cali1/proxy_arp"
	if v, _ := k.sys.Value(proxyARP); v != "1" {
		t.Fatalf("%s = %q after InSync, want 1", proxyARP, v)
	}
	checkDue := func(want time.Time) {
		t.Helper()
		// Within a few seconds: the resync that the table watch's own
		// events ask for (it notifies once subscribed, whenever that is).
		var due []time.Time
		for _, at := range clk.armedWithin(time.Hour) {
			if at.Sub(clk.Now()) > 5*time.Second {
				due = append(due, at)
			}
		}
		if len(due) == 0 {
			t.Fatalf("no periodic timer armed, want the refresh's at %v", want.Sub(start))
		}
		for _, at := range due {
			if !at.Equal(want) {
				t.Errorf("a timer is due %v after the start, want every periodic one at %v (due: %v)",
					at.Sub(start), want.Sub(start), due)
			}
		}
	}
	checkDue(start.Add(180 * time.Second))

	// Someone rewrites a sysctl; the timers fire half a second late.
	k.sys.Preset(proxyARP, "0")
	clk.Advance(180*time.Second + 500*time.Millisecond - clk.Now().Sub(start))
	f.waitIdle()
	if v, _ := k.sys.Value(proxyARP); v != "1" {
		t.Fatalf("%s = %q after the read-back, want it repaired to 1", proxyARP, v)
	}
	checkDue(start.Add(360 * time.Second))

	k.sys.Preset(proxyARP, "0")
	clk.Advance(start.Add(360 * time.Second).Sub(clk.Now()))
	f.waitIdle()
	if v, _ := k.sys.Value(proxyARP); v != "1" {
		t.Errorf("%s = %q after the second read-back, want 1", proxyARP, v)
	}
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
}

// TestDriverRunDirectory: a daemon answers `show` and `status` on its
// control socket and does not rewrite the run directory after every
// apply: ruleset.nft is written when it stops, status.json when what it
// says changes (a policy change reports no endpoint status).
func TestDriverRunDirectory(t *testing.T) {
	k := newFakeKernel()
	k.ifaces = upIface("cali1", 5)
	dir := t.TempDir()
	f := startDriver(t, k, Options{RunDir: dir})
	f.send(configUpdate(nil))
	f.send(wepUpdate("default/p1", "cali1", "10.65.0.1"))
	f.send(inSync())
	require.Eventually(t, func() bool { return slices.Contains(statusLines(f.out.frames(t)), "default/p1=up") }, waitLimit, pollTick, "p1's status")

	// ReadProgrammed asks the daemon like this, then the kernel whether
	// the tables exist (not here: the kernel is a fake).
	live, err := askDaemon(dir, controlRuleset)
	if err != nil {
		t.Fatal(err)
	}
	for path, mode := range map[string]os.FileMode{filepath.Join(dir, ControlSocketName): 0o600, dir: 0o700} {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, mode, fi.Mode().Perm(), "mode of %s", path)
	}
	if want := k.table("inet nftep").programmed; !strings.HasPrefix(string(live), want) {
		t.Errorf("live ruleset does not start with the programmed inet table:\n%s", cmp.Diff(want, string(live)))
	}
	if _, err := os.Stat(filepath.Join(dir, RulesetFileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ruleset.nft written while the daemon runs: %v", err)
	}
	st, err := LiveStatus(dir)
	if err != nil || len(st.Endpoints) != 1 || st.Endpoints[0].Status != "up" || !st.InSync {
		t.Fatalf("live status = %+v, %v", st, err)
	}

	statusFile := filepath.Join(dir, StatusFileName)
	fi, err := os.Stat(statusFile)
	if err != nil {
		t.Fatal(err)
	}
	applies := k.table("inet nftep").applies
	f.send(&proto.ToDataplane{Payload: &proto.ToDataplane_ActivePolicyUpdate{ActivePolicyUpdate: &proto.ActivePolicyUpdate{
		Id: &proto.PolicyID{Name: "p", Kind: "GlobalNetworkPolicy"}, Policy: &proto.Policy{Tier: "default"}}}})
	require.Eventually(t, func() bool { return k.table("inet nftep").applies > applies }, waitLimit, pollTick, "the policy applied")
	if fi2, err := os.Stat(statusFile); err != nil || !fi2.ModTime().Equal(fi.ModTime()) {
		t.Errorf("status.json rewritten after a change that reported no status (%v)", err)
	}

	if err := f.close(); err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile(filepath.Join(dir, RulesetFileName))
	if err != nil || string(rec) != string(live) {
		t.Errorf("ruleset.nft after stopping (%v):\n%s", err, cmp.Diff(string(live), string(rec)))
	}
	if _, err := askDaemon(dir, controlRuleset); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after stopping, the control socket: %v; want none", err)
	}
}

// TestDriverNoRoutesBeforeInSync: the static table goes in at once, but
// routes are not programmed before Felix's state is known: the route table
// would remove routes it does not want yet (those of an earlier nftep that
// it adopted, given no grace period), cutting pods off until InSync.
func TestDriverNoRoutesBeforeInSync(t *testing.T) {
	k := newFakeKernel()
	f := startDriver(t, k, Options{})
	f.send(configUpdate(nil))
	require.Eventually(t, func() bool { return k.table("inet nftep").applies >= 1 }, waitLimit, pollTick, "the static table")
	k.mu.Lock()
	before := k.routes.applies
	k.mu.Unlock()
	if before != 0 {
		t.Errorf("routes programmed %d times before InSync", before)
	}
	f.send(inSync())
	require.Eventually(t, func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.routes.applies > 0
	}, waitLimit, pollTick, "routes programmed after InSync")
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
}

// TestRunSeesFileChangesAtOnce: with polling all but off, an edited state
// file (written in place, or replaced through a rename) is still applied
// promptly: the directory is watched with inotify.
func TestRunSeesFileChangesAtOnce(t *testing.T) {
	k := newFakeKernel()
	k.ifaces = upIface("cali-a", 5)
	dir := t.TempDir()
	path := filepath.Join(dir, "node.yaml")
	if err := os.WriteFile(path, []byte(goodState), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Kernel: k, RunDir: filepath.Join(dir, "run"), PollInterval: time.Hour}, path, nil)
	}()
	require.Eventually(t, func() bool { return strings.Contains(k.table("inet nftep").programmed, `"cali-a"`) }, waitLimit, pollTick, "the file applied")

	withB := goodState + `
  - workloadEndpointUpdate:
      id: {orchestratorId: k8s, workloadId: ns/b, endpointId: eth0}
      endpoint: {state: active, name: cali-b, ipv4Nets: [10.65.0.2/32], profileIds: [allow]}
`
	// Replaced through a rename.
	if err := os.WriteFile(path+".tmp", []byte(withB), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	require.Eventually(t, func() bool { return strings.Contains(k.table("inet nftep").programmed, `"cali-b"`) }, waitLimit, pollTick, "cali-b applied without a poll")
	// Written in place.
	if err := os.WriteFile(path, []byte(goodState), 0o644); err != nil {
		t.Fatal(err)
	}
	require.Eventually(t, func() bool { return !strings.Contains(k.table("inet nftep").programmed, `"cali-b"`) }, waitLimit, pollTick, "cali-b removed without a poll")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestRunWatchesAgainAfterTheDirectoryWent: by default `run` does not poll
// a state file whose directory inotify watches; when that directory is
// removed and made again (the watch ends with it), the file is checked
// every second until the new directory is watched, and changes are seen
// again.
func TestRunWatchesAgainAfterTheDirectoryWent(t *testing.T) {
	k := newFakeKernel()
	k.ifaces = upIface("cali-a", 5)
	root := t.TempDir()
	dir := filepath.Join(root, "state")
	path := filepath.Join(dir, "node.yaml")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(goodState), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Kernel: k, RunDir: filepath.Join(root, "run")}, path, nil)
	}()
	require.Eventually(t, func() bool { return strings.Contains(k.table("inet nftep").programmed, `"cali-a"`) }, waitLimit, pollTick, "the file applied")

	withB := goodState + `
  - workloadEndpointUpdate:
      id: {orchestratorId: k8s, workloadId: ns/b, endpointId: eth0}
      endpoint: {state: active, name: cali-b, ipv4Nets: [10.65.0.2/32], profileIds: [allow]}
`
	// The directory goes, and comes back with another version.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(withB), 0o644); err != nil {
		t.Fatal(err)
	}
	require.Eventually(t, func() bool { return strings.Contains(k.table("inet nftep").programmed, `"cali-b"`) }, waitLimit, pollTick, "cali-b applied from the new directory")
	// Watched again: a change is seen at once (well within the poll's
	// second once the watch is back, which the first poll sets up).
	time.Sleep(1500 * time.Millisecond)
	if err := os.WriteFile(path, []byte(goodState), 0o644); err != nil {
		t.Fatal(err)
	}
	require.Eventually(t, func() bool { return !strings.Contains(k.table("inet nftep").programmed, `"cali-b"`) }, 300*time.Millisecond, pollTick, "cali-b removed through the new watch")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestDriverSysctlFailureStatus: the sysctls are written beside the
// nftables transaction (program), after the endpoint manager computed the
// statuses; an endpoint whose interface's sysctls fail goes out as down,
// never up first, and one whose writes succeed as up.
func TestDriverSysctlFailureStatus(t *testing.T) {
	k := newFakeKernel()
	k.ifaces = append(upIface("cali1", 5), upIface("cali2", 6)...)
	k.sys.SetError("/proc/sys/net/ipv4/conf/cali1/route_localnet", syscall.EACCES)
	f := startDriver(t, k, Options{})
	f.send(configUpdate(nil))
	f.send(wepUpdate("default/p1", "cali1", "10.65.0.1"))
	f.send(wepUpdate("default/p2", "cali2", "10.65.0.2"))
	f.send(inSync())
	require.Eventually(t, func() bool { return len(statusLines(f.out.frames(t))) >= 2 }, waitLimit, pollTick, "two statuses")
	got := statusLines(f.out.frames(t))
	assert.Equal(t, []string{"default/p1=down", "default/p2=up"}, got[:2])
	v, _ := k.sys.Value("/proc/sys/net/ipv4/conf/cali2/forwarding")
	assert.Equal(t, "1", v, "cali2's sysctls written")

	// The write succeeds on a retry: p1 comes up.
	k.sys.SetError("/proc/sys/net/ipv4/conf/cali1/route_localnet", nil)
	require.Eventually(t, func() bool { return slices.Contains(statusLines(f.out.frames(t)), "default/p1=up") }, waitLimit, pollTick, "p1 up after the retry")
	require.NoError(t, f.close())
}

// TestListedRepeats: the monitor's first report of an interface is dropped
// when it repeats the listing the loop recorded; a change, an interface
// the listing did not have, and everything after the first report go to
// the loop.
func TestListedRepeats(t *testing.T) {
	listed := append(upIface("cali1", 5, "10.65.0.1"), upIface("cali2", 6)...)
	r := newListedRepeats(listed)
	a1 := []netip.Addr{netip.MustParseAddr("10.65.0.1")}
	for _, c := range []struct {
		u    any
		drop bool
	}{
		{routes.InterfaceStateUpdate{Name: "cali1", State: routes.IfaceUp, Index: 5}, true},
		{routes.InterfaceAddrsUpdate{Name: "cali1", Addrs: a1}, true},
		{routes.InterfaceStateUpdate{Name: "cali1", State: routes.IfaceUp, Index: 5}, false},   // not the first
		{routes.InterfaceStateUpdate{Name: "cali2", State: routes.IfaceDown, Index: 6}, false}, // changed
		{routes.InterfaceAddrsUpdate{Name: "cali2", Addrs: a1}, false},                         // changed
		{routes.InterfaceStateUpdate{Name: "cali3", State: routes.IfaceUp, Index: 7}, false},   // new
		{routes.InterfaceAddrsUpdate{Name: "cali3", Addrs: []netip.Addr{}}, false},
	} {
		assert.Equal(t, c.drop, r.drop(c.u), "%+v", c.u)
	}
	// The listing's empty address set is repeated by an empty one, not by
	// the nil that says the interface is gone.
	r = newListedRepeats(upIface("cali4", 8))
	assert.False(t, r.drop(routes.InterfaceAddrsUpdate{Name: "cali4"}))
	r = newListedRepeats(upIface("cali4", 8))
	assert.True(t, r.drop(routes.InterfaceAddrsUpdate{Name: "cali4", Addrs: []netip.Addr{}}))
}

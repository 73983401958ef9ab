package dataplane

// Tests of what the loop tells its Observer, and of Health: liveness from
// the heartbeat, readiness from the applies.

import (
	"errors"
	"maps"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/routes"
)

// recorder is an Observer that keeps everything it is told.
type recorder struct {
	mu         sync.Mutex
	beats      int
	idles      int
	idle       bool
	messages   map[string]int
	unhandled  map[string]int
	events     int
	applies    []ApplyReport
	routes     routes.Stats
	sysctls    int
	state      *StateReport
	lastBeatAt time.Time
	missing    []string
}

func newRecorder() *recorder {
	return &recorder{messages: map[string]int{}, unhandled: map[string]int{}}
}

func (r *recorder) Heartbeat(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.beats++
	r.lastBeatAt = now
	r.idle = false
}
func (r *recorder) Idle(time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.idles++
	r.idle = true
}
func (r *recorder) Message(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.messages[kind]++
}
func (r *recorder) KernelFeatureMissing(feature string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.missing = append(r.missing, feature)
}
func (r *recorder) Unhandled(kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unhandled[kind]++
}
func (r *recorder) TableEvent() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events++
}
func (r *recorder) Applied(a *ApplyReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applies = append(r.applies, *a)
}
func (r *recorder) RoutesWritten(s routes.Stats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.routes.Programmed += s.Programmed
	r.routes.Removed += s.Removed
	r.routes.Repaired += s.Repaired
}
func (r *recorder) SysctlsFailed(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sysctls += n
}
func (r *recorder) State(s *StateReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state = s
}

func (r *recorder) snapshot() *recorder {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := recorder{beats: r.beats, events: r.events, routes: r.routes, sysctls: r.sysctls, state: r.state, lastBeatAt: r.lastBeatAt, idles: r.idles, idle: r.idle}
	c.applies = append([]ApplyReport(nil), r.applies...)
	c.messages = maps.Clone(r.messages)
	c.unhandled = maps.Clone(r.unhandled)
	return &c
}

func ipSetUpdate(id string, members ...string) *proto.ToDataplane {
	return &proto.ToDataplane{Payload: &proto.ToDataplane_IpsetUpdate{IpsetUpdate: &proto.IPSetUpdate{
		Id: id, Type: proto.IPSetUpdate_IP, Members: members}}}
}

// TestObserverDriverSession follows a driver session: the messages by
// type, the static apply (not in sync) and the full one, the state it
// leaves, a refused transaction and its retry, routes and sysctls.
func TestObserverDriverSession(t *testing.T) {
	k := newFakeKernel()
	k.ifaces = upIface("cali1", 5)
	rec := newRecorder()
	health := NewHealth(time.Minute)
	f := startDriver(t, k, Options{Observer: Observers(rec, health)})

	// 1. ConfigUpdate: the static table, not in sync, not ready.
	f.send(configUpdate(nil))
	require.Eventually(t, func() bool { return len(rec.snapshot().applies) == 1 }, waitLimit, pollTick, "the static apply")
	if got := rec.snapshot().applies[0]; got.InSync || got.Err != nil || len(got.Tables) != 2 || got.Tables[0].Family != "inet" || got.Tables[1].Family != "arp" {
		t.Errorf("static apply report = %+v", got)
	}
	if err := health.Ready(); err == nil {
		t.Error("ready before InSync")
	}

	// 2. A snapshot and InSync: one full apply of both messages.
	f.send(wepUpdate("default/p1", "cali1", "10.65.0.1"))
	f.send(ipSetUpdate("s:a", "10.0.0.1", "10.0.0.2", "2001:db8::1"))
	f.send(inSync())
	f.waitIdle() // the apply and all it reports
	got := rec.snapshot()
	if a := got.applies[1]; !a.InSync || a.Err != nil || a.Updates != 2 || a.Tables[0].Messages == 0 && a.Tables[0].Operations == 0 {
		t.Errorf("full apply report = %+v", a)
	}
	wantMsgs := map[string]int{"ConfigUpdate": 1, "WorkloadEndpointUpdate": 1, "IPSetUpdate": 1, "InSync": 1}
	if diff := cmp.Diff(wantMsgs, got.messages); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	wantState := &StateReport{Endpoints: map[EndpointClass]int{{"workload", "up"}: 1}, IPSets: 1, IPSetMembers: 3}
	if diff := cmp.Diff(wantState, got.state); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	if err := health.Ready(); err != nil {
		t.Errorf("not ready after the full apply: %v", err)
	}

	// 3. The kernel refuses the next transaction: a refused failure, not
	// ready; the retry succeeds and it is ready again. The route table's
	// writes are reported with the apply.
	k.failNext(1)
	k.mu.Lock()
	k.routes.stats = routes.Stats{Programmed: 2, Repaired: 1}
	k.mu.Unlock()
	f.send(wepUpdate("default/p2", "cali2", "10.65.0.2"))
	require.Eventually(t, func() bool {
		as := rec.snapshot().applies
		return len(as) >= 4 && as[len(as)-1].Err == nil
	}, waitLimit, pollTick, "the failed apply and its retry")
	got = rec.snapshot()
	failed := got.applies[2]
	if failed.Failure != FailureRefused || failed.Err == nil || failed.Tables[len(failed.Tables)-1].Family != "inet" {
		t.Errorf("failed apply report = %+v", failed)
	}
	if diff := cmp.Diff(routes.Stats{Programmed: 2, Repaired: 1}, got.routes); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
	if err := health.Ready(); err != nil {
		t.Errorf("not ready after the retry succeeded: %v", err)
	}
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
}

// TestObserverSysctlFailures: an interface whose sysctls cannot be written
// is reported, once per failed attempt.
func TestObserverSysctlFailures(t *testing.T) {
	k := newFakeKernel()
	k.ifaces = upIface("cali1", 5)
	k.sys.SetError("/proc/sys/net/ipv4/conf/cali1/route_localnet", syscall.EACCES)
	rec := newRecorder()
	f := startDriver(t, k, Options{Observer: rec})
	f.send(configUpdate(nil))
	f.send(wepUpdate("default/p1", "cali1", "10.65.0.1"))
	f.send(inSync())
	require.Eventually(t, func() bool { return rec.snapshot().sysctls >= 1 }, waitLimit, pollTick, "a sysctl failure")
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
}

// TestObserverIdle: an idle loop says it waits (Idle), and does not wake
// up only to report heartbeats; the next message wakes it (Heartbeat).
func TestObserverIdle(t *testing.T) {
	k := newFakeKernel()
	rec := newRecorder()
	f := startDriver(t, k, Options{Observer: rec})
	f.send(configUpdate(nil))
	require.Eventually(t, func() bool { return len(rec.snapshot().applies) == 1 }, waitLimit, pollTick, "the static apply")
	require.Eventually(t, func() bool { return rec.snapshot().idle }, waitLimit, pollTick, "idle after the apply")
	beats := rec.snapshot().beats
	time.Sleep(50 * time.Millisecond)
	if got := rec.snapshot(); got.beats != beats || !got.idle {
		t.Errorf("an idle loop beat %d times in 50 ms (idle %v)", got.beats-beats, got.idle)
	}
	f.send(wepUpdate("default/p1", "cali1", "10.65.0.1"))
	require.Eventually(t, func() bool { return rec.snapshot().beats > beats }, waitLimit, pollTick, "a heartbeat for the message")
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
}

// TestHealthIdleLoopStaysLive: an idle loop waits for work, so it stays
// live for longer than the limit without a heartbeat.
func TestHealthIdleLoopStaysLive(t *testing.T) {
	k := newFakeKernel()
	clk := newFakeClock()
	health := NewHealth(100 * time.Millisecond)
	opts := Options{Observer: health}
	opts.test.clock = clk
	f := startDriver(t, k, opts)
	f.send(configUpdate(nil))
	f.send(inSync())
	f.waitIdle()
	if err := health.Ready(); err != nil {
		t.Fatalf("not ready after InSync: %v", err)
	}
	for range 30 { // idle for longer than the limit
		clk.Advance(5 * time.Millisecond)
		f.waitIdle()
	}
	if err := health.Live(clk.Now()); err != nil {
		t.Fatalf("an idle loop is not live: %v", err)
	}
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
}

// TestHealthStuckLoop: a loop stuck in a transaction stops its heartbeat
// and Live fails after the limit; once the kernel answers, it is live again.
func TestHealthStuckLoop(t *testing.T) {
	k := newFakeKernel()
	k.ifaces = upIface("cali1", 5)
	health := NewHealth(100 * time.Millisecond)
	f := startDriver(t, k, Options{Observer: health})
	f.send(configUpdate(nil))
	f.send(inSync())
	require.Eventually(t, func() bool { return health.Ready() == nil }, waitLimit, pollTick, "ready")

	block := make(chan struct{})
	k.mu.Lock()
	k.tables["inet nftep"].block = block
	k.mu.Unlock()
	f.send(wepUpdate("default/p1", "cali1", "10.65.0.1"))
	require.Eventually(t, func() bool { return health.Live(time.Now()) != nil }, waitLimit, pollTick, "not live")
	if err := health.Live(time.Now()); !strings.Contains(err.Error(), "stuck") {
		t.Errorf("Live = %v", err)
	}
	close(block)
	require.Eventually(t, func() bool { return health.Live(time.Now()) == nil }, waitLimit, pollTick, "live again")
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
}

// TestHealthDecisions pins Health's rules without a loop.
func TestHealthDecisions(t *testing.T) {
	h := NewHealth(time.Second)
	now := time.Now()
	if err := h.Live(now); err != nil {
		t.Errorf("new Health not live: %v", err)
	}
	if err := h.Live(now.Add(2 * time.Second)); err == nil {
		t.Error("live 2 s after the last heartbeat with a 1 s limit")
	}
	h.Heartbeat(now.Add(2 * time.Second))
	if err := h.Live(now.Add(2500 * time.Millisecond)); err != nil {
		t.Errorf("not live 0.5 s after a heartbeat: %v", err)
	}
	// Waiting for work is not being stuck, however long it lasts; the
	// next heartbeat starts the clock again.
	h.Idle(now.Add(3 * time.Second))
	if err := h.Live(now.Add(time.Hour)); err != nil {
		t.Errorf("not live an hour into an idle wait: %v", err)
	}
	h.Heartbeat(now.Add(time.Hour))
	if err := h.Live(now.Add(time.Hour + 2*time.Second)); err == nil {
		t.Error("live 2 s after the heartbeat that ended the wait, with a 1 s limit")
	}

	if err := h.Ready(); err == nil || !strings.Contains(err.Error(), "no full apply yet") {
		t.Errorf("Ready at start = %v", err)
	}
	h.Applied(&ApplyReport{InSync: false})
	if h.Ready() == nil {
		t.Error("ready after the static apply")
	}
	h.Applied(&ApplyReport{InSync: true})
	if err := h.Ready(); err != nil {
		t.Errorf("not ready after a full apply: %v", err)
	}
	bad := &nft.Error{Table: "inet nftep", Summary: "test", Err: syscall.EINVAL}
	h.Applied(&ApplyReport{InSync: true, Err: bad, Failure: ClassifyFailure(bad)})
	if err := h.Ready(); err == nil || !strings.Contains(err.Error(), "(refused)") {
		t.Errorf("Ready after a refused transaction = %v", err)
	}
	h.Applied(&ApplyReport{InSync: true})
	if err := h.Ready(); err != nil {
		t.Errorf("not ready after the retry: %v", err)
	}
}

func TestClassifyFailure(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Failure
	}{
		{nil, ""},
		{&nft.Error{Table: "inet nftep", Summary: "test", Err: syscall.EINVAL}, FailureRefused},
		{syscall.ENOBUFS, FailureStateUnknown},
		{nft.ErrInvalid, FailureInvalid},
		{errors.New("other"), FailureRefused},
	} {
		if got := ClassifyFailure(c.err); got != c.want {
			t.Errorf("ClassifyFailure(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

package dataplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	gproto "google.golang.org/protobuf/proto"

	"github.com/nftep/nftep/internal/gcidle"
	"github.com/nftep/nftep/internal/netnsutil"
	"github.com/nftep/nftep/nft"
	"github.com/nftep/nftep/proto"
	"github.com/nftep/nftep/render"
	"github.com/nftep/nftep/routes"
)

// Defaults of Options' timings.
const (
	// DefaultBatchDelay is how long the loop waits for a burst of updates
	// to settle before computing and applying them: the cost of a
	// transaction barely depends on its size, so coalescing pays. The
	// driver does not wait for it when Felix's input is drained (see
	// evDrained), unless Options.BatchDelay is set.
	DefaultBatchDelay = 5 * time.Millisecond
	// DefaultMaxBatchDelay bounds the wait under a steady stream.
	DefaultMaxBatchDelay = 100 * time.Millisecond
	// DefaultPollInterval is how often `run` checks the state file when
	// inotify cannot watch its directory.
	DefaultPollInterval = time.Second
	// DefaultInotifyPollInterval is how often `run` checks the state file
	// while inotify watches its directory on a network or FUSE file
	// system, where inotify misses the changes made elsewhere (another
	// host, the file system's server). On a local file system inotify
	// sees every change and `run` does not poll at all: each wake of an
	// idle process costs several context switches, and an idle daemon
	// should not wake for nothing.
	DefaultInotifyPollInterval = time.Minute
	// DefaultProcessStatusInterval is the period of the driver's
	// ProcessStatusUpdate to Felix: that of Felix's own dataplane driver
	// (ReportingIntervalSecs, 30 s by default; the datastore keeps each
	// report for ReportingTTLSecs, 90 s). Felix's felix/proto/doc.go asks
	// for one every 10 s; each costs an idle driver about three wakeups,
	// and at 10 s that was 18 of its budget of 60 a minute.
	DefaultProcessStatusInterval = 30 * time.Second
	// DefaultStatusFileInterval bounds how often a daemon rewrites
	// status.json for endpoint status changes: the file lists every
	// endpoint, so writing it for each change would cost every change time
	// in proportion to the node. A daemon answers `nftep status` live on its
	// control socket; errors and in-sync are written at once.
	DefaultStatusFileInterval = 5 * time.Second
)

// Resyncs on nftables events (see watchTables): a resync comes
// watchSettle after the last event of a burst, and at most once per
// watchMinInterval (also under a steady stream of events).
const (
	watchSettle      = 100 * time.Millisecond
	watchMinInterval = time.Second
)

// The backoff after a failed apply: the first retry comes after
// defaultRetryMin, each next one after twice as long, up to defaultRetryMax.
const (
	defaultRetryMin = 250 * time.Millisecond
	defaultRetryMax = 30 * time.Second
)

// Options says where and how the dataplane works. The zero value works in
// the caller's network namespace, with the default table name and no run
// directory.
type Options struct {
	// Table overrides the table name (Felix key NftepTableName, default
	// "nftep"); empty keeps the configuration's.
	Table string
	// Namespace is the network namespace to program; nil means the
	// caller's.
	Namespace *netnsutil.NS
	// RunDir receives status.json (see StatusFileName) and ruleset.nft
	// and holds a daemon's control socket (ControlSocketName); empty
	// writes nothing.
	RunDir string
	// Logger receives the loop's log; nil discards.
	Logger *slog.Logger
	// Kernel replaces the real kernel (tests); nil means
	// NewKernel(Namespace, Logger).
	Kernel Kernel

	// BatchDelay, MaxBatchDelay, PollInterval, ProcessStatusInterval and
	// StatusFileInterval override the defaults of the same names when
	// positive (a positive PollInterval makes `run` check the state file
	// that often whatever inotify can watch; see watchStateFile). A
	// positive BatchDelay also makes the driver wait for it after Felix's
	// last message even when its input is drained, where by default it
	// applies at once.
	BatchDelay, MaxBatchDelay, PollInterval, ProcessStatusInterval, StatusFileInterval time.Duration

	// Observer is told what the loop does (metrics, Health); nil tells
	// nobody.
	Observer Observer
	// MTUFile is where the pod MTU goes for the Calico CNI plugin (Felix's
	// /var/lib/calico/mtu, cluster-networking spec §9); empty writes none.
	// The nftep binary sets it; tests point it into a temporary directory.
	MTUFile string
	// Full makes Apply compute the whole node and repair everything it
	// programs, ignoring the record of the last apply (`nftep apply
	// --full`).
	Full bool
	// Config holds Felix settings from the config file and the environment
	// (see LoadSettings): they override the state file's `config:`, as
	// Felix's environment and config file override its datastore.
	Config map[string]string

	// test holds what only tests set.
	test testKnobs
}

// testKnobs are Options only tests set (this package's directly, the
// external test package's through export_test.go).
type testKnobs struct {
	// clock replaces the real clock of the loop's timers; nil is the real
	// one.
	clock clock
	// idle, when set, is called by the loop each time it has handled
	// every queued event and waits for what comes next; the report says
	// whether it has nothing pending (idle: see loop.pending) or is only
	// waiting for a timer it armed. While it is set, readFelix wakes the
	// loop after counting each frame, so that the report catches up.
	idle func(idleReport)
	// retryMin and retryMax override defaultRetryMin and defaultRetryMax
	// when positive.
	retryMin, retryMax time.Duration
}

// idleReport is what the loop tells testKnobs.idle before it waits.
type idleReport struct {
	// Pending says the loop has work coming without any new event (see
	// loop.pending); false means it is idle.
	Pending bool
	// Frames counts the frames from Felix read and handled (or ignored)
	// so far: all of the first Frames frames have had their effect.
	Frames int64
	// Timers counts the timer and ticker firings the loop handled.
	Timers int64
}

func (o *Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

func (o *Options) kernel() Kernel {
	if o.Kernel != nil {
		return o.Kernel
	}
	k := NewKernel(o.Namespace, o.logger())
	k.(*realKernel).mtuFile = o.MTUFile
	return k
}

func (o *Options) clock() clock {
	if o.test.clock != nil {
		return o.test.clock
	}
	return realClock{}
}

func (o *Options) namespaceName() string {
	if o.Namespace == nil {
		return ""
	}
	return o.Namespace.Name
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Events the sources send to the loop besides Felix messages and interface
// updates.
type (
	// evSnapshot is a new, fully validated version of the state file;
	// changes, when base is not nil, are the messages that lead from the
	// version base to it (computed by the validator, see fileValidator).
	evSnapshot struct {
		snap    *Snapshot
		base    *Snapshot
		changes []gproto.Message
	}
	// evFileError is a state file that was rejected.
	evFileError struct{ err error }
	// evEOF is the end of Felix's stream: exit cleanly.
	evEOF struct{}
	// evFatal ends the loop with an error (a broken pipe to Felix).
	evFatal struct{ err error }
	// evWake only wakes the loop (tests: see testKnobs.idle).
	evWake struct{}
	// evDrained follows a Felix message when readFelix holds no further
	// complete frame: the burst is over as far as anyone can tell, so the
	// driver applies it once the events queued before are handled, without
	// waiting for the batch timer (Felix's own dataplane applies when its
	// input channel is empty).
	evDrained struct{}
	// evUnknownPayload is a Felix frame whose payload felix.proto does
	// not declare (a service or WireGuard update, say): fields are its
	// unknown field numbers.
	evUnknownPayload struct{ fields []int }
)

// loop is the dataplane's event loop: the one goroutine that owns the
// managers and the kernel objects. Sources (the Felix pipe, the state file,
// the interface monitor) send it events; it records them, computes the
// desired state once a burst has settled, applies it and reports statuses.
type loop struct {
	opts   Options
	mode   string
	source string
	kernel Kernel
	log    *slog.Logger
	events chan any

	eng    *engine
	ifaces *ifaceCache
	// inSync is false until Felix's InSync (driver) or the first valid
	// state file: before it messages are only recorded (Felix's graceful
	// restart: nothing is removed from the kernel until the whole state is
	// known).
	inSync bool
	// dirty means messages were recorded since the last compute.
	dirty bool
	// drained says Felix's input was drained (evDrained) since the last
	// time the loop found its queue empty.
	drained bool
	// resyncPending is a resync asked for (periodic, nftables events)
	// while a batch was settling: the batch's flush does it, so that the
	// resync does not apply half of a batch that arrived together.
	resyncPending bool
	// daemon is true in run and driver modes: ruleset.nft is written when
	// the loop stops (and served live on the control socket meanwhile),
	// not after every apply as in apply mode.
	daemon bool
	// gc keeps a daemon's collector asleep while the loop is idle (nil:
	// not a daemon).
	gc *gcidle.Pacer
	// gcIdle fires gcIdleDelay after the loop last went idle with the
	// collector busy (nil: not armed).
	gcIdle <-chan time.Time
	// statusWritten says status.json has been written since the last
	// change of what it reports other than timestamps.
	statusWritten bool
	// nftFailed means the last table transaction failed: the next one
	// starts with a full resync.
	nftFailed bool
	failures  int
	lastSnap  *Snapshot
	lastApply time.Time
	// fileErr is the last rejected state file (until a good one comes);
	// applyErr the last failed apply (until one succeeds); computeErr the
	// last failed compute (until one succeeds: Apply reports it).
	fileErr, applyErr, computeErr error
	// routesErr is the route table's last error (retried meanwhile).
	routesErr error
	// stopped is when run returned.
	stopped time.Time
	// retired is an engine replaced by a new configuration, whose tables
	// are deleted once the new ones are programmed if their names differ.
	retired *engine

	// watch makes the loop subscribe to nftables events for its tables
	// (run and driver modes): a change someone else makes to them is
	// repaired within about a second instead of at the next periodic
	// resync. watching tells whether the current engine's tables are
	// subscribed, stopWatch ends those subscriptions; tableEvents
	// receives their notifications (coalesced: capacity 1); watchTimer
	// fires the resync they call for, watchBurst is when the pending burst
	// of events began and lastWatchResync when that resync last ran.
	watch           bool
	watching        bool
	stopWatch       func()
	tableEvents     chan struct{}
	watchTimer      timer
	watchBurst      time.Time
	lastWatchResync time.Time
	// readBack is set by an apply that read a table back (see the
	// watch timer in run).
	readBack bool
	// rulesetWritten: the last apply wrote the ruleset files already
	// (writeRulesetBeside), writeStatus need not.
	rulesetWritten bool

	// clock makes the timers below and tells the time.
	clock      clock
	batchStart time.Time
	batch      timer
	retry      timer
	retryArmed bool
	resync     ticker
	routeTimer timer
	// statusTimer writes status.json when endpoint statuses changed
	// (StatusFileInterval after the first change it has not written).
	statusTimer timer
	statusArmed bool
	// sysVerifyDue is when interface sysctls are next read back
	// (verifySysctls, from the nftables refresh or, without one, the route
	// timer; zero: never).
	sysVerifyDue time.Time
	// eventsAt is when the interface monitor last subscribed to the
	// kernel's route and neighbour events (zero: not subscribed, or the
	// subscription lost events since).
	eventsAt time.Time

	// frames counts the frames readFelix has read and handed over (or
	// ignored); timers the timer firings handled (both for testKnobs.idle).
	frames atomic.Int64
	timers int64

	// sink receives endpoint status reports after a successful apply.
	sink func(gproto.Message)

	// obs is Options.Observer (never nil); updates counts the messages
	// recorded since the last apply; observed is the engine whose state
	// obs last heard.
	obs Observer
	// lastState is the last state report (see observeApply).
	lastState *StateReport
	updates   int
	observed  *engine
	// warnedKeys are the state file's settings already warned about
	// (lower case; see warnConfigKeys).
	warnedKeys map[string]bool
	// unhandled are the Felix message kinds no manager takes, already
	// logged (see reportUnhandled).
	unhandled map[string]bool
	// takeover removes Calico's leftovers (see takeover.go).
	takeover takeoverState
}

func newLoop(opts Options, mode, source string) *loop {
	c := opts.clock()
	l := &loop{
		opts:        opts,
		mode:        mode,
		source:      source,
		kernel:      opts.kernel(),
		log:         opts.logger(),
		events:      make(chan any, 4096),
		ifaces:      newIfaceCache(),
		clock:       c,
		batch:       stoppedTimer(c),
		retry:       stoppedTimer(c),
		routeTimer:  stoppedTimer(c),
		statusTimer: stoppedTimer(c),
		resync:      c.NewTicker(time.Hour),
		stopWatch:   func() {},
		tableEvents: make(chan struct{}, 1),
		watchTimer:  stoppedTimer(c),
		obs:         opts.observer(),
	}
	l.resync.Stop()
	return l
}

// send hands an event to the loop; it gives up when ctx is done.
func (l *loop) send(ctx context.Context, ev any) {
	select {
	case l.events <- ev:
	case <-ctx.Done():
	}
}

// run handles events and timers until ctx is done (nil), Felix's stream
// ends (nil) or a fatal error. The tables stay programmed when it returns:
// a node is never left open because nftep stopped.
func (l *loop) run(ctx context.Context) error {
	defer func() {
		l.batch.Stop()
		l.retry.Stop()
		l.resync.Stop()
		l.routeTimer.Stop()
		l.statusTimer.Stop()
		l.unwatchTables()
		l.takeoverStop()
		l.watchTimer.Stop()
		if l.eng != nil {
			l.eng.close()
		}
		l.stopped = l.clock.Now()
		l.writeStatus(true)
	}()
	if l.daemon {
		defer l.serveControl(ctx)()
	}
	for {
		l.obs.Heartbeat(l.clock.Now())
		frames := l.frames.Load() // before the queue is seen empty
		select {
		case <-ctx.Done():
			l.log.Info("stopping: the programmed ruleset stays in place")
			return nil
		case ev := <-l.events:
			done, err := l.handle(ctx, ev)
			if done || err != nil {
				return err
			}
			// Under a steady stream of events the timers below are not
			// reached: a batch past its MaxBatchDelay is applied here.
			if l.settling() && l.clock.Now().Sub(l.batchStart) >= orDefault(l.opts.MaxBatchDelay, DefaultMaxBatchDelay) {
				l.stopBatch()
				l.flush(ctx)
			}
			continue
		default:
		}
		if l.drained {
			// Felix's input is drained and every queued event handled: the
			// burst is complete, apply it now rather than at its timer.
			l.drained = false
			if l.settling() && l.opts.BatchDelay <= 0 {
				l.stopBatch()
				l.flush(ctx)
				continue
			}
		}
		if l.opts.test.idle != nil {
			l.opts.test.idle(idleReport{Frames: frames, Timers: l.timers, Pending: l.pending()})
		}
		// Events first: a timer must not act on half of the events that
		// have already arrived (Go's select picks at random among ready
		// cases), so every queued event is handled before any timer.
		//
		// The loop waits here without a deadline of its own: an idle
		// daemon wakes only for work (the observer is told it is idle,
		// and each case tells it the loop is busy again).
		if !l.pending() && l.gc.NeedsIdle() && l.gcIdle == nil {
			// After a second of rest: switching the collector off
			// waits for a collection in progress, which the work
			// just done may have started.
			l.gcIdle = time.After(gcIdleDelay)
		}
		l.obs.Idle(l.clock.Now())
		select {
		case <-ctx.Done():
			l.log.Info("stopping: the programmed ruleset stays in place")
			return nil
		case ev := <-l.events:
			l.woke()
			done, err := l.handle(ctx, ev)
			if done || err != nil {
				return err
			}
		case <-l.batch.C():
			l.woke()
			l.timers++
			l.batchStart = time.Time{}
			l.flush(ctx)
		case <-l.retry.C():
			l.woke()
			l.timers++
			l.retryArmed = false
			if l.settling() {
				continue // the batch's flush retries, with the resync
			}
			l.log.Info("retrying the failed apply")
			l.flush(ctx)
		case <-l.resync.C():
			l.woke()
			l.timers++
			l.periodicResync(ctx)
		case <-l.tableEvents:
			l.woke()
			l.onTableEvent()
		case <-l.watchTimer.C():
			l.woke()
			l.timers++
			l.watchBurst = time.Time{}
			// Only a resync that read a table counts against
			// watchMinInterval: the one our own commit's events set
			// off finds our generation and reads nothing, and must not
			// delay the repair of the next foreign change.
			l.readBack = false
			now := l.clock.Now()
			l.resyncNow(ctx)
			if l.readBack {
				l.lastWatchResync = now
			}
		case <-l.statusTimer.C():
			l.woke()
			l.timers++
			l.statusArmed = false
			l.statusWritten = false
			l.writeStatus(false)
		case <-l.gcIdle:
			// Not a timer of the loop's clock (nor counted as one): it
			// is about the runtime, not about what is programmed.
			l.gcIdle = nil
			if !l.pending() {
				if n := l.gc.Idle(); n > 0 {
					l.log.Debug("resting: returned the memory of the last burst of work to the system", "MB", n>>20)
				}
			}
		case <-l.routeTimer.C():
			l.woke()
			l.timers++
			l.routesDue()
		}
	}
}

// woke tells the observer that the loop, which waited (Observer.Idle),
// took an event or a timer: it is busy until it waits again.
func (l *loop) woke() { l.obs.Heartbeat(l.clock.Now()) }

// pending reports whether the loop has work coming without any new event:
// a batch settling (with any resync it holds back), a retry scheduled, or
// changes recorded in sync and not yet computed. Neither the periodic
// timers (resyncs, routes) nor the resync nftables events
// asked for count: the kernel sends those events when it likes, so
// nothing could wait for them reliably anyway.
func (l *loop) pending() bool {
	return l.settling() || l.retryArmed || l.dirty && l.inSync && l.eng != nil
}

// settling reports whether a batch of updates is waiting for its batch
// timer.
func (l *loop) settling() bool { return !l.batchStart.IsZero() }

// stopBatch cancels the batch timer: the caller flushes now.
func (l *loop) stopBatch() {
	l.batch.Stop()
	l.batchStart = time.Time{}
}

// handle processes one event; done means the loop should end.
func (l *loop) handle(ctx context.Context, ev any) (done bool, err error) {
	l.observeMessage(ev)
	switch ev := ev.(type) {
	case evEOF:
		// Felix is going away; what it sent last is still its wish, so
		// the pending batch is applied before exiting.
		if l.dirty {
			l.stopBatch()
			l.flush(ctx)
		}
		l.log.Info("Felix closed the update stream (fd 3): exiting; the programmed ruleset stays in place")
		return true, nil
	case evFatal:
		return true, ev.err
	case evWake:
	case evDrained:
		l.drained = true
	case evUnknownPayload:
		for _, f := range ev.fields {
			l.reportUnhandled(fmt.Sprintf("field %d", f))
		}
	case evControl:
		l.onControl(ev)
	case routes.KernelEventsSubscribed, routes.KernelEventsLost:
		// Whether the route table may trust the events instead of
		// relisting the kernel every RouteRefreshInterval: kept for
		// engines to come, and told to this one even before InSync.
		l.eventsAt = time.Time{}
		if ev, ok := ev.(routes.KernelEventsSubscribed); ok {
			l.eventsAt = ev.At
		}
		if l.eng != nil && l.eng.kernelEvent(ev) && l.inSync {
			l.markDirty()
		}
	case routes.RouteEvent, routes.NeighEvent, routes.LinkEvent:
		// Someone changed a route, neighbour, FDB entry or tunnel device:
		// repaired by the next apply if it disagrees with what nftep
		// wants (our own writes come back as events that agree).
		if l.eng != nil && l.inSync && l.eng.kernelEvent(ev) {
			l.markDirty()
		}
	case evSnapshot:
		l.onSnapshot(ctx, ev.snap, ev.base, ev.changes)
	case evFileError:
		l.onFileError(ctx, ev.err)
	case *proto.ConfigUpdate:
		return false, l.onConfigUpdate(ctx, ev)
	case *proto.InSync:
		if l.eng == nil {
			return true, errors.New("felix protocol: InSync before the first ConfigUpdate")
		}
		if !l.inSync {
			l.log.Info("Felix is in sync: programming its state")
			l.statusWritten = false
		}
		l.inSync = true
		l.dirty = true
		l.stopBatch()
		l.flush(ctx)
	default:
		if l.ifaces.record(ev) {
			if l.eng != nil {
				l.eng.update(ev)
				l.markDirty()
			}
			return false, nil
		}
		if l.eng == nil {
			return true, fmt.Errorf("felix protocol: %T before the first ConfigUpdate", ev)
		}
		if !l.eng.update(ev) {
			l.reportUnhandled(messageKind(ev))
			return false, nil
		}
		l.markDirty()
	}
	return false, nil
}

// reportUnhandled logs, once per kind, a Felix message that no manager
// takes, and counts every one: nothing Felix sends vanishes without a word.
// Such a message changes nothing, so it starts no apply.
func (l *loop) reportUnhandled(kind string) {
	l.obs.Unhandled(kind)
	if l.unhandled[kind] {
		return
	}
	if l.unhandled == nil {
		l.unhandled = map[string]bool{}
	}
	l.unhandled[kind] = true
	l.log.Warn("Felix sent a message nftep does not handle; ignoring it (logged once per kind, counted in nftep_felix_messages_unhandled_total)", "kind", kind)
}

// messageKind names a message as Felix's metrics do
// ("WorkloadEndpointUpdate").
func messageKind(msg any) string {
	if m, ok := msg.(gproto.Message); ok {
		return string(m.ProtoReflect().Descriptor().Name())
	}
	return fmt.Sprintf("%T", msg)
}

// markDirty notes recorded messages and arms the batch timer: a burst is
// applied once no message came for BatchDelay, or MaxBatchDelay after its
// first message.
func (l *loop) markDirty() {
	l.dirty = true
	l.updates++
	now := l.clock.Now()
	if l.batchStart.IsZero() {
		l.batchStart = now
	}
	deadline := now.Add(orDefault(l.opts.BatchDelay, DefaultBatchDelay))
	if limit := l.batchStart.Add(orDefault(l.opts.MaxBatchDelay, DefaultMaxBatchDelay)); deadline.After(limit) {
		deadline = limit
	}
	l.batch.Reset(deadline.Sub(now))
}

// onConfigUpdate starts the engine on Felix's first ConfigUpdate. Felix
// restarts itself (and its driver) for any setting it cannot apply live,
// so a later ConfigUpdate that changes nftep's configuration is only logged.
func (l *loop) onConfigUpdate(ctx context.Context, m *proto.ConfigUpdate) error {
	l.gc.Busy()
	cfg, err := ParseConfig(m.GetConfig(), l.opts.Table)
	if l.eng != nil {
		switch {
		case err != nil:
			// The running configuration was valid; a later one that is
			// not cannot open the node, so it is reported, not fatal.
			l.log.Warn("Felix sent a configuration nftep cannot read; keeping the running configuration", "error", err)
		case !cfg.Equal(l.eng.cfg):
			l.log.Warn("Felix sent a configuration change that needs a restart of nftep; keeping the running configuration")
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("felix configuration: %w", err)
	}
	return l.startEngine(ctx, cfg)
}

// startEngine builds the first engine and makes sure the node is closed to
// unknown workloads at once: if the kernel has no table yet, the static
// table (dispatch with its unknown-interface drop, no endpoints) is applied
// now; if a previous nftep left one, it stays untouched until the whole
// state is known.
func (l *loop) startEngine(ctx context.Context, cfg Config) error {
	eng, err := newEngine(cfg, l.kernel, l.log, l.ownedRoutes())
	if err != nil {
		return err
	}
	l.eng = eng
	l.takeoverStart(cfg)
	for _, u := range l.ifaces.replay() {
		eng.update(u)
	}
	l.tellKernelEvents(eng)
	l.armResync()
	l.unwatchTables()
	exists, err := l.kernel.TableExists(ctx, nft.FamilyINet, cfg.Render.TableName)
	if err != nil {
		l.log.Warn("cannot tell whether the table exists; programming the static table to be safe", "error", err)
	}
	if exists {
		l.log.Info("table exists already: keeping its ruleset until the full state is known", "table", "inet "+cfg.Render.TableName)
		return nil
	}
	l.log.Info("programming the static table first (unknown workload interfaces are dropped)", "table", "inet "+cfg.Render.TableName)
	if err := eng.compute(); err != nil {
		return err
	}
	l.dirty = false
	l.apply(ctx, false)
	return nil
}

// onSnapshot applies a new version of the state file: incrementally when
// the configuration is unchanged, through a new engine otherwise (whose
// first apply reads the table back and reconciles it in one transaction).
//
// base and changes, when base is not nil, are the messages that lead from
// the version base to snap: when base is the version applied last, they
// replace the Diff.
func (l *loop) onSnapshot(ctx context.Context, snap, base *Snapshot, changes []gproto.Message) {
	l.gc.Busy()
	l.warnConfigKeys(snap.Config)
	cfg, err := l.opts.parseConfig(snap.Config)
	if err != nil { // validated by the source; kept as a guard
		l.onFileError(ctx, err)
		return
	}
	var msgs []gproto.Message
	if l.eng == nil || !cfg.Equal(l.eng.cfg) {
		eng, err := newEngine(cfg, l.kernel, l.log, l.ownedRoutes())
		if err != nil {
			l.onFileError(ctx, err)
			return
		}
		if l.eng != nil {
			l.log.Info("configuration changed: rebuilding the dataplane state")
			l.retired = l.eng
		}
		l.eng = eng
		l.takeoverStart(cfg)
		for _, u := range l.ifaces.replay() {
			eng.update(u)
		}
		l.tellKernelEvents(eng)
		l.armResync() // the same instant: one grid (verifySysctls)
		msgs = snap.Messages()
		l.unwatchTables()
	} else if base != nil && base == l.lastSnap {
		msgs = changes
	} else {
		msgs = Diff(l.lastSnap, snap)
	}
	for _, m := range msgs {
		l.eng.update(m)
	}
	l.updates += len(msgs)
	l.log.Info("state file loaded", "file", l.source, "contents", snap.Counts(), "changes", len(msgs))
	l.lastSnap = snap
	if l.fileErr != nil || !l.inSync {
		l.statusWritten = false
	}
	l.fileErr = nil
	l.inSync = true
	l.dirty = true
	l.stopBatch()
	l.flush(ctx)
}

// onFileError reports a rejected state file. The running ruleset stays as
// it was; at start-up, with nothing running yet, the static table is
// programmed (if no table exists) so that the node is not open meanwhile.
func (l *loop) onFileError(ctx context.Context, err error) {
	l.fileErr = err
	l.statusWritten = false
	l.log.Error("state file rejected: the programmed ruleset stays as it was", "error", err)
	if l.eng == nil {
		cfg, cerr := l.opts.parseConfig(nil)
		if cerr == nil {
			cerr = l.startEngine(ctx, cfg)
		}
		if cerr != nil {
			l.log.Error("cannot program the static table", "error", cerr)
		}
	}
	l.writeStatus(false)
}

// flush computes what was recorded and applies it, or retries a failed
// apply. Before in-sync it does nothing: messages are only recorded.
func (l *loop) flush(ctx context.Context) {
	if l.eng == nil || !l.inSync {
		return
	}
	l.retry.Stop()
	l.retryArmed = false
	if l.dirty || l.eng.sysctlsFailing() {
		l.gc.Busy() // changes: the collector paces their garbage
		if err := l.eng.compute(); err != nil {
			l.computeErr = err
			l.log.Error("computing the desired state failed; nothing applied", "error", err)
			l.scheduleRetry()
			return
		}
		l.computeErr = nil
		l.dirty = false
	}
	l.apply(ctx, l.nftFailed || l.resyncPending)
}

// apply programs the kernel and handles the outcome: on failure it logs the
// consequence and schedules a retry with backoff (a full resync first); on
// success it delivers statuses. It writes status.json when what it reports
// changed (endpoint statuses, the error, in-sync), not after every apply:
// the file lists every endpoint, and a change that reports no status (a
// policy, an IP set) should cost the same whatever the number of endpoints.
func (l *loop) apply(ctx context.Context, resync bool) {
	start := l.clock.Now()
	hadErr := l.applyErr != nil
	if resync {
		l.resyncPending = false
	}
	l.takeoverBeforeApply(ctx)
	l.rulesetWritten = false
	if !l.daemon && l.opts.RunDir != "" {
		l.eng.afterCommit = l.writeRulesetBeside
	}
	res, err := l.eng.program(ctx, resync, l.inSync)
	l.takeoverAfterApply(ctx, err)
	if l.eng.takeRecompute() {
		l.markDirty()
	}
	if err != nil {
		l.nftFailed = true
		l.applyErr = err
		l.statusWritten = false
		delay := l.scheduleRetry()
		what := "the kernel refused the transaction: nothing changed, the previous ruleset stays enforced"
		if nft.IsStateUnknown(err) {
			what = "the transaction's outcome is unknown"
		} else if nft.IsInvalid(err) {
			what = "the desired state is invalid (a bug): nothing was sent, the previous ruleset stays enforced"
		}
		l.log.Error("apply failed: "+what+"; retrying with a full resync", "in", delay, "error", err)
		l.observeApply(start, res, err, false)
		l.writeStatus(false)
		return
	}
	l.nftFailed = false
	l.applyErr = nil
	l.lastApply = l.clock.Now()
	if l.watch && !l.watching && l.inSync {
		l.watchTables(ctx)
	}
	l.takeoverKeep(ctx)
	for _, tr := range res.tables {
		l.readBack = l.readBack || tr.Read
	}
	if res.resynced && res.drift.Any() {
		l.log.Info("resync repaired the table: someone else changed it", "drift", res.drift.String())
	}
	if res.inet.Operations > 0 || res.arp.Operations > 0 {
		l.log.Info("applied", "operations", res.inet.Operations+res.arp.Operations,
			"messages", res.inet.Messages+res.arp.Messages, "took", l.clock.Now().Sub(start).Round(time.Microsecond))
	}
	retry := false
	l.routesErr = res.routesErr
	if res.routesErr != nil {
		l.log.Warn("some routes failed; retrying", "error", res.routesErr)
		retry = true
	}
	if l.eng.sysctlsFailing() {
		l.log.Warn("some interface sysctls failed; their endpoints are down until a retry succeeds")
		retry = true
	}
	if retry {
		l.scheduleRetry()
	} else {
		l.failures = 0
	}
	for _, f := range l.eng.takeMissing() {
		l.obs.KernelFeatureMissing(f)
		l.statusWritten = false
	}
	statuses := l.eng.takeStatuses()
	if l.sink != nil {
		for _, m := range statuses {
			l.sink(m)
		}
	}
	if l.retired != nil {
		l.retireOld(ctx)
	}
	l.armRoutes()
	switch {
	case hadErr || l.routesErr != nil:
		l.statusWritten = false
	case len(statuses) > 0 && l.daemon && l.opts.RunDir != "":
		if !l.statusArmed {
			l.statusArmed = true
			l.statusTimer.Reset(orDefault(l.opts.StatusFileInterval, DefaultStatusFileInterval))
		}
	case len(statuses) > 0:
		l.statusWritten = false
	}
	l.observeApply(start, res, nil, len(statuses) > 0)
	l.writeStatus(!l.daemon)
	l.releaseMemory(res)
}

// releaseAfterOps is the size of an apply (operations) after which a
// daemon returns the memory it freed to the system at once.
const releaseAfterOps = 10000

// releaseMemory returns freed memory to the system after a large apply (a
// cold start, a repair) or one that read a table back, in a daemon. Left
// to the runtime's background scavenger, the hundreds of megabytes a cold
// start of 10,000 endpoints frees go back a little at a time for minutes,
// each step a wakeup of an otherwise idle process; one full collection
// now costs a fraction of what the apply did.
func (l *loop) releaseMemory(res applyResult) {
	if !l.daemon {
		return
	}
	big := res.inet.Operations+res.arp.Operations >= releaseAfterOps
	for _, tr := range res.tables {
		big = big || tr.Read
	}
	if big {
		debug.FreeOSMemory()
	}
}

// retireOld deletes the tables of a replaced engine that the new one does
// not use (a renamed table, ARP suppression turned off).
func (l *loop) retireOld(ctx context.Context) {
	old := l.retired
	l.retired = nil
	defer old.close()
	keep := func(t, now Table) bool {
		return now != nil && t.Desired().Name == now.Desired().Name
	}
	for _, t := range []struct{ old, now Table }{{old.inet, l.eng.inet}, {old.arp, l.eng.arp}} {
		if t.old == nil || keep(t.old, t.now) {
			continue
		}
		name := fmt.Sprintf("%s %s", t.old.Desired().Family, t.old.Desired().Name)
		if err := t.old.Delete(ctx); err != nil {
			l.log.Warn("cannot delete the table the old configuration used; `nftep cleanup` removes it", "table", name, "error", err)
		} else {
			l.log.Info("deleted the table the old configuration used", "table", name)
		}
	}
}

// scheduleRetry arms the retry timer with exponential backoff and returns
// the delay.
func (l *loop) scheduleRetry() time.Duration {
	l.failures++
	d := orDefault(l.opts.test.retryMin, defaultRetryMin) << min(l.failures-1, 10)
	d = min(d, orDefault(l.opts.test.retryMax, defaultRetryMax))
	l.retry.Reset(d)
	l.retryArmed = true
	return d
}

// periodicResync reads the tables back and repairs any drift
// (NftablesRefreshInterval), and reads a slice of the interface sysctls
// back when that falls due within coalesceSlack (see verifySysctls).
func (l *loop) periodicResync(ctx context.Context) {
	l.resyncNow(ctx)
	if v := l.sysVerifyDue; l.eng != nil && l.inSync && !v.IsZero() && !v.After(l.clock.Now().Add(coalesceSlack)) {
		l.verifySysctls()
	}
}

// resyncNow resyncs the tables (nft.Table.Resync: the read is skipped when
// nobody committed anything since our last commit) with any recorded
// changes. While a batch is settling, the batch's flush does the resync.
func (l *loop) resyncNow(ctx context.Context) {
	if l.eng == nil || !l.inSync {
		return
	}
	if l.settling() {
		l.resyncPending = true
		return
	}
	if l.dirty {
		if err := l.eng.compute(); err != nil {
			l.log.Error("computing the desired state failed", "error", err)
			return
		}
		l.dirty = false
	}
	l.apply(ctx, true)
}

// watchTables subscribes to nftables events for the current engine's
// tables (those that can: the real ones). apply calls it after the
// engine's first successful apply in sync: while anyone listens, the kernel
// builds an event for every object a commit touches, which would make the
// cold start's large commit much slower (see nft.Table.Watch); Watch
// notifies once subscribed, so a change in between is repaired too. The
// subscriptions only post to tableEvents: the tables are used from the
// loop alone.
func (l *loop) watchTables(ctx context.Context) {
	l.unwatchTables()
	l.watching = true
	type watcher interface {
		Watch(ctx context.Context, notify func())
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	notify := func() {
		select {
		case l.tableEvents <- struct{}{}:
		default:
		}
	}
	for _, t := range []Table{l.eng.inet, l.eng.arp} {
		if w, ok := t.(watcher); ok {
			wg.Go(func() { w.Watch(wctx, notify) })
		}
	}
	l.stopWatch = func() {
		cancel()
		wg.Wait()
	}
}

// unwatchTables ends the subscriptions of watchTables (a new engine's
// tables are subscribed after its first apply).
func (l *loop) unwatchTables() {
	l.stopWatch()
	l.stopWatch = func() {}
	l.watching = false
}

// onTableEvent schedules the resync an nftables event on our tables calls
// for: watchSettle after the last event, but no later than watchMinInterval
// after the first of a burst, and no sooner than watchMinInterval after the
// previous one. Our own commits cause events too; the resync they trigger
// skips the read and sends nothing (see nft.Table.Watch).
func (l *loop) onTableEvent() {
	l.obs.TableEvent()
	now := l.clock.Now()
	if l.watchBurst.IsZero() {
		l.watchBurst = now
	}
	at := now.Add(watchSettle)
	if limit := l.watchBurst.Add(watchMinInterval); at.After(limit) {
		at = limit
	}
	if next := l.lastWatchResync.Add(watchMinInterval); at.Before(next) {
		at = next
	}
	l.watchTimer.Reset(at.Sub(now))
}

func (l *loop) armResync() {
	l.resync.Stop()
	if d := l.eng.cfg.NftablesRefresh; d > 0 {
		l.resync.Reset(d)
	}
}

// armRoutes sets the route timer for the route table's next deadline (its
// periodic resync, the end of a grace period).
func (l *loop) armRoutes() {
	l.routeTimer.Stop()
	dl := l.eng.routeDeadline()
	// With an nftables refresh, its ticker does the read-back
	// (periodicResync): one timer, one wakeup.
	if v := l.sysVerifyDue; !v.IsZero() && !l.eng.cfg.sysctlsOnRefresh() && (dl.IsZero() || v.Before(dl)) {
		dl = v
	}
	if !dl.IsZero() {
		l.routeTimer.Reset(max(dl.Sub(l.clock.Now()), time.Millisecond))
	}
}

// tellKernelEvents tells a new engine what the loop knows of the kernel
// event subscription, and starts its sysctl read-backs.
func (l *loop) tellKernelEvents(eng *engine) {
	if !l.eventsAt.IsZero() {
		eng.kernelEvent(routes.KernelEventsSubscribed{At: l.eventsAt})
	}
	l.sysVerifyDue = time.Time{}
	if d := eng.cfg.sysctlVerifyPeriod(); eng.sys != nil && d > 0 {
		l.sysVerifyDue = l.clock.Now().Add(d)
	}
}

// gcIdleDelay is how long the loop rests before it puts the collector to
// sleep (see gcidle).
const gcIdleDelay = time.Second

// sysctlVerifyBatch is how many interfaces' sysctls each periodic
// read-back checks at most (sysctl.Interfaces.VerifySome): 800 reads, tens
// of milliseconds. An idle daemon's wakeup costs tens of context switches
// of the Go runtime's own however little it does (the first system call
// wakes its monitor, which polls every 20 µs, then backs off to 10 ms,
// until nothing runs), and more the longer it lasts: each read that stays
// in the kernel past the monitor's tick starts its 20 µs polling again.
// At 10,000 workloads a read-back of 200 interfaces cost 80 to 170
// switches (BenchmarkE2EIdle, perf sched_switch), against a budget of 60
// a minute; so one refresh every 180 s takes 100, a whole round of 10,000
// 100 refreshes (5 hours at the default NftablesRefreshInterval); up to
// 100 workloads, every refresh reads them all. Felix itself never reads
// them back.
const sysctlVerifyBatch = 100

func (l *loop) routesDue() {
	if l.eng == nil || l.eng.routes == nil || !l.inSync {
		return
	}
	if err := errors.Join(l.eng.applyDevices(), l.eng.routes.Apply()); err != nil {
		l.log.Warn("some routes failed; retrying", "error", err)
		l.scheduleRetry()
	}
	if l.eng.takeRecompute() {
		l.markDirty()
	}
	if v := l.sysVerifyDue; !v.IsZero() && !l.clock.Now().Before(v) {
		l.verifySysctls()
	}
	l.observeRoutes()
	l.armRoutes()
}

// coalesceSlack is how close two pieces of periodic work must fall due to
// be done in one wakeup. Each wakeup of an idle daemon costs tens of the
// runtime's own (its monitor polls every 20 µs while anything runs, see
// sysctlVerifyBatch), whatever little it does.
const coalesceSlack = time.Second

// verifySysctls reads a slice of the interface sysctls back and repairs
// those someone rewrote: a sysctl write makes no event. The read-backs
// ride on the nftables refresh (Config.sysctlVerifyPeriod): its ticker
// does them (periodicResync; the route timer only when there is no
// refresh), the next a period later on the grid that started with the
// engine at the same instant as the ticker (tellKernelEvents, armResync),
// so that a late tick does not shift them.
func (l *loop) verifySysctls() {
	now, period := l.clock.Now(), l.eng.cfg.sysctlVerifyPeriod()
	if period <= 0 {
		l.sysVerifyDue = time.Time{}
		return
	}
	for !l.sysVerifyDue.After(now.Add(coalesceSlack)) {
		l.sysVerifyDue = l.sysVerifyDue.Add(period)
	}
	if s := l.eng.sys; len(s.VerifySome(sysctlVerifyBatch)) > 0 {
		if failed := s.Apply(); len(failed) > 0 {
			l.scheduleRetry()
		}
	}
}

// status returns the loop's current status report.
func (l *loop) status() *Status {
	s := &Status{
		Mode:      l.mode,
		Source:    l.source,
		Table:     l.opts.Table,
		Namespace: l.opts.namespaceName(),
		PID:       os.Getpid(),
		Updated:   l.clock.Now().UTC(),
		InSync:    l.inSync,
	}
	if !l.lastApply.IsZero() {
		s.LastApply = l.lastApply.UTC()
	}
	if !l.stopped.IsZero() {
		s.Stopped = l.stopped.UTC()
	}
	if err := cmpOr(l.applyErr, l.fileErr); err != nil {
		s.LastError = err.Error()
	}
	s.Takeover = l.takeoverReport()
	if l.eng != nil {
		s.Table = l.eng.cfg.Render.TableName
		s.Endpoints = convertStatuses(l.eng.eps.Statuses())
		s.Overlay = l.eng.overlayStatus()
	} else if s.Table == "" {
		s.Table = render.DefaultTableName
	}
	return s
}

// ownedRoutes returns the workload interfaces nftep wanted routes on last:
// the running engine's, or at start those the run directory records.
func (l *loop) ownedRoutes() map[string]int {
	if l.eng != nil && l.eng.routes != nil {
		return l.eng.routes.Owned()
	}
	return readRoutesRecord(l.opts.RunDir)
}

// writeStatus writes status.json into the run directory unless it already
// says what the loop would write (but for timestamps), and with record
// ruleset.nft too (apply mode, and a daemon that stops). A failure is only
// logged, since status files never decide what is enforced.
func (l *loop) writeStatus(record bool) {
	if l.opts.RunDir == "" || l.statusWritten && !record {
		return
	}
	var models []*nft.Model
	if record && l.eng != nil && !l.lastApply.IsZero() && !l.nftFailed {
		models = l.eng.models()
	}
	err := writeStatus(l.opts.RunDir, l.status(), "", nil)
	if err == nil && models != nil && !l.rulesetWritten {
		err = writeRulesetFiles(l.opts.RunDir, models)
	}
	if err != nil {
		l.log.Warn("cannot write the status file", "error", err)
		return
	}
	l.statusWritten = true
	if l.statusArmed {
		// The file now holds every endpoint's status: the write the
		// status timer waits for would only repeat it (after a daemon's
		// first apply of a large node, a whole status file rewritten
		// for nothing 5 s into an idle minute).
		l.statusTimer.Stop()
		l.statusArmed = false
	}
	if models != nil && l.eng.routes != nil {
		if err := writeRoutesRecord(l.opts.RunDir, l.eng.routes.Owned()); err != nil {
			l.log.Warn("cannot write the routes record", "error", err)
		}
	}
}

// writeRulesetBeside starts writing the ruleset files of the engine's
// models (the engine's afterCommit in apply mode): at 10,000 endpoints
// printing them takes about a second, which the route writes that follow
// the commit hide. It returns what waits for the files.
func (l *loop) writeRulesetBeside() (wait func()) {
	models := l.eng.models()
	done := make(chan error, 1)
	go func() { done <- writeRulesetFiles(l.opts.RunDir, models) }()
	return func() {
		err := <-done
		l.rulesetWritten = err == nil
		if err != nil {
			l.log.Warn("cannot write the ruleset files", "error", err)
		}
	}
}

// cmpOr returns the first non-nil error.
func cmpOr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

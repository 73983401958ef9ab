// Package gcidle keeps the garbage collector of an idle daemon asleep, and
// that of a short burst of work that ends the process (Pause); and it keeps
// the heap of a one-shot process that computes a whole node small while it
// is small (Frugal).
//
// Go's runtime collects at least every two minutes, whatever was
// allocated: at 10,000 workloads a daemon's live heap is hundreds of
// megabytes, and each of those forced collections marks all of it, tens
// of wakeups and a tenth of a CPU second on a node where nothing changed.
// While the daemon is idle, Idle turns the proportional collector off
// (which also turns the forced one off) and bounds the heap instead with a
// soft memory limit, the memory in use now plus as much again as was live
// at the last collection (at least 64 MiB): the few allocations of
// periodic checks never reach it, and if they did the collector would run
// as usual. Busy restores the collector as it was before the daemon
// started work. Both are cheap (no stop of the world) and do nothing when
// the state does not change, but Idle waits for a collection in progress
// to finish: the daemon calls it after a moment of rest.
//
// Without collections, the garbage of the daemon's last work would stay
// resident for as long as it rests. That matters after a burst: at 10,000
// workloads a cold start, and the relisting of 10,000 interfaces that may
// follow it, leave hundreds of megabytes. So when at least releaseAtLeast
// was allocated since the daemon last went idle, and at least as much is
// in use but not live, Idle first collects and returns the free memory to
// the system (one full collection, which the next forced one would have
// done). A stream of small changes never allocates that much between two
// rests, and pays nothing for it.
//
// An operator's GOGC or GOMEMLIMIT wins: with either set, the Pacer does
// nothing.
package gcidle

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// minHeadroom is the least room the idle memory limit leaves.
const minHeadroom = 64 << 20

// releaseAtLeast is the burst, and the memory in use but not live, from
// which Idle returns memory before it rests (see the package
// documentation).
const releaseAtLeast = 64 << 20

// Pacer switches the collector between busy and idle. It is not safe for
// concurrent use: the daemon's loop owns it.
type Pacer struct {
	enabled bool
	idle    bool
	percent int // the GC percent to restore (GOGC's default, 100)
	samples []metrics.Sample
	// allocated is the heap allocated in total when the daemon last went
	// idle (or started): what it allocated since is the burst Idle weighs.
	allocated uint64
	// releases counts the collections Idle made to return memory (for tests).
	releases int
}

// New returns a Pacer for a daemon, disabled when the environment sets
// GOGC or GOMEMLIMIT.
func New() *Pacer {
	p := &Pacer{enabled: !operatorSet(), percent: 100}
	p.samples = []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/gc/heap/allocs:bytes"},
	}
	return p
}

// read returns the live heap at the last collection, the memory the
// process holds from the system, and the heap allocated in total.
func (p *Pacer) read() (live, inUse, allocated uint64) {
	metrics.Read(p.samples)
	s := p.samples
	return s[0].Value.Uint64(), s[1].Value.Uint64() - s[2].Value.Uint64(), s[3].Value.Uint64()
}

// Idle turns the proportional collector off and sets the memory limit
// that stands in for it, until Busy. After a burst it first returns free
// memory to the system (see the package documentation): a full collection,
// a few hundred milliseconds of this goroutine at 10,000 workloads. It
// returns how much less the process holds after that (0 without it).
func (p *Pacer) Idle() (released uint64) {
	if p == nil || !p.enabled || p.idle {
		return 0
	}
	live, inUse, allocated := p.read()
	if allocated-p.allocated >= releaseAtLeast && inUse >= live+releaseAtLeast {
		// After a burst: collect and return what is free now, or it
		// stays resident while the daemon rests.
		debug.FreeOSMemory()
		p.releases++
		before := inUse
		live, inUse, allocated = p.read()
		if inUse < before {
			released = before - inUse
		}
	}
	p.allocated = allocated
	limit := inUse + max(live, minHeadroom)
	if limit > math.MaxInt64 {
		return released
	}
	debug.SetMemoryLimit(int64(limit))
	p.percent = debug.SetGCPercent(-1)
	p.idle = true
	return released
}

// Busy restores the collector the daemon had before Idle.
func (p *Pacer) Busy() {
	if p == nil || !p.idle {
		return
	}
	debug.SetGCPercent(p.percent)
	debug.SetMemoryLimit(math.MaxInt64)
	p.idle = false
}

// Pause turns the proportional collector off for a short burst of work
// that ends the process, with a soft memory limit of limit bytes standing
// in for it, and returns what turns it back on. A one-shot `nftep apply`
// that programs only what changed allocates tens of megabytes at 10,000
// workloads and exits within a fifth of a second: collections there
// (15 ms of its 200 at 10,000) free memory the exit frees anyway. The
// limit bounds the heap should the work turn out larger than expected: the
// collector runs whenever the heap reaches it. An operator's GOGC or
// GOMEMLIMIT wins: with either set, Pause does nothing.
func Pause(limit int64) (resume func()) {
	if operatorSet() {
		return func() {}
	}
	prevLimit := debug.SetMemoryLimit(limit)
	prevPercent := debug.SetGCPercent(-1)
	return func() {
		debug.SetGCPercent(prevPercent)
		debug.SetMemoryLimit(prevLimit)
	}
}

// frugalPercent is the GC percent Frugal starts with: the heap grows by a
// quarter of what is live between collections rather than doubling.
const frugalPercent = 25

// Frugal runs the collector at GOGC=25 until the live heap passes until
// bytes, then as before, and returns what restores it. It is for a
// one-shot process that computes a whole node (a cold `nftep apply`):
// there the collector's headroom is most of the process's peak memory, and
// on a small node (1,000 workloads, a live heap of about 15 MB) GOGC=100
// makes the peak twice as large as it needs to be. On a large node the
// extra collections would cost seconds (a 10,000-workload cold apply took
// 1.4x as long at GOGC=25), so past until the collector is itself again.
// The live heap is checked after each collection (a finalizer on a
// sentinel, rearmed each cycle). An operator's GOGC or GOMEMLIMIT wins.
func Frugal(until uint64) (restore func()) {
	if operatorSet() {
		return func() {}
	}
	f := &frugal{until: until, live: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	f.prev = debug.SetGCPercent(frugalPercent)
	f.arm()
	return f.restore
}

type frugal struct {
	until uint64
	live  []metrics.Sample // used by the finalizer goroutine only

	mu   sync.Mutex
	prev int  // the GC percent before Frugal
	done bool // restored, or past until
}

// sentinel is what the collector frees each cycle. It holds a pointer, so
// that it is not tiny-allocated (finalizers of tiny objects may never run).
type sentinel struct{ f *frugal }

func (f *frugal) arm() {
	runtime.SetFinalizer(&sentinel{f}, func(s *sentinel) { s.f.cycle() })
}

// cycle runs after each collection: past until, the collector goes back to
// its GC percent; below it, the sentinel is rearmed.
func (f *frugal) cycle() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return
	}
	metrics.Read(f.live)
	if f.live[0].Value.Uint64() > f.until {
		debug.SetGCPercent(f.prev)
		f.done = true
		return
	}
	f.arm()
}

func (f *frugal) restore() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.done {
		debug.SetGCPercent(f.prev)
		f.done = true
	}
}

// operatorSet reports whether the environment sets GOGC or GOMEMLIMIT: the
// operator's choice, which every function of this package leaves alone.
func operatorSet() bool { return os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" }

// NeedsIdle reports whether Idle would switch the collector off.
func (p *Pacer) NeedsIdle() bool { return p != nil && p.enabled && !p.idle }

// Idling reports whether the collector is off (for tests).
func (p *Pacer) Idling() bool { return p != nil && p.idle }

package dataplane

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeClock is a clock whose time moves only when the test advances it;
// its timers fire then, in the order of their deadlines.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	// delivered counts the values sent on timer channels and not taken
	// back by Stop or Reset: once the loop reports as many timer firings
	// handled, none is on its way.
	delivered int64
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) timer { return c.add(d, 0) }

func (c *fakeClock) NewTicker(d time.Duration) ticker { return fakeTicker{c.add(d, d)} }

func (c *fakeClock) add(d, period time.Duration) *fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	ft := &fakeTimer{c: c, ch: make(chan time.Time, 1), period: period}
	c.timers = append(c.timers, ft)
	ft.arm(d)
	return ft
}

// Advance moves the clock forward by d, firing the timers that come due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	end := c.now.Add(d)
	for {
		var next *fakeTimer
		for _, ft := range c.timers {
			if ft.armed && !ft.when.After(end) && (next == nil || ft.when.Before(next.when)) {
				next = ft
			}
		}
		if next == nil {
			break
		}
		c.now = next.when
		next.fire()
	}
	c.now = end
}

// armedWithin returns when each armed timer or ticker of c fires next, of
// those that fire within d from now, in order.
func (c *fakeClock) armedWithin(d time.Duration) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var due []time.Time
	for _, ft := range c.timers {
		if ft.armed && !ft.when.After(c.now.Add(d)) {
			due = append(due, ft.when)
		}
	}
	slices.SortFunc(due, time.Time.Compare)
	return due
}

func (c *fakeClock) deliveredCount() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.delivered
}

// fakeTimer is a timer or (with a period) a ticker of a fakeClock.
type fakeTimer struct {
	c      *fakeClock
	ch     chan time.Time
	period time.Duration
	when   time.Time
	armed  bool
}

// arm and fire and drain are called with c.mu held.
func (ft *fakeTimer) arm(d time.Duration) {
	ft.drain()
	ft.when, ft.armed = ft.c.now.Add(d), true
	if d <= 0 {
		ft.fire()
	}
}

func (ft *fakeTimer) fire() {
	select {
	case ft.ch <- ft.c.now:
		ft.c.delivered++
	default: // a ticker whose last tick is still unread drops this one
	}
	if ft.period > 0 {
		ft.when = ft.when.Add(ft.period)
	} else {
		ft.armed = false
	}
}

func (ft *fakeTimer) drain() {
	select {
	case <-ft.ch:
		ft.c.delivered--
	default:
	}
}

func (ft *fakeTimer) C() <-chan time.Time { return ft.ch }

func (ft *fakeTimer) Reset(d time.Duration) bool {
	ft.c.mu.Lock()
	defer ft.c.mu.Unlock()
	was := ft.armed
	ft.arm(d)
	return was
}

func (ft *fakeTimer) Stop() bool {
	ft.c.mu.Lock()
	defer ft.c.mu.Unlock()
	was := ft.armed
	ft.armed = false
	ft.drain()
	return was
}

// fakeTicker is a ticker of a fakeClock.
type fakeTicker struct{ *fakeTimer }

func (ft fakeTicker) Reset(d time.Duration) {
	ft.c.mu.Lock()
	defer ft.c.mu.Unlock()
	ft.period = d
	ft.arm(d)
}

func (ft fakeTicker) Stop() { ft.fakeTimer.Stop() }

// idleWatch records what the loop's idle hook reports, so that a test can
// wait until the loop has handled what it was sent and has nothing pending
// before checking that something did not happen.
type idleWatch struct {
	clk  *fakeClock // nil with the real clock
	mu   sync.Mutex
	last idleReport
	seen bool
}

// watchIdle sets opts' idle hook (and clk, when not nil, as its clock) and
// returns the watch.
func watchIdle(opts *Options, clk *fakeClock) *idleWatch {
	w := &idleWatch{clk: clk}
	opts.test.idle = w.report
	if clk != nil {
		opts.test.clock = clk
	}
	return w
}

func (w *idleWatch) report(r idleReport) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last, w.seen = r, true
}

// wait waits until the loop has handled the first frames frames from Felix
// and every timer the fake clock fired, and has nothing pending.
func (w *idleWatch) wait(t testing.TB, frames int) {
	t.Helper()
	w.waitFor(t, frames, true)
}

// waitHandled is wait that accepts a loop waiting for a timer it armed (a
// batch settling, a retry), for a test that moves the fake clock itself.
func (w *idleWatch) waitHandled(t testing.TB, frames int) {
	t.Helper()
	w.waitFor(t, frames, false)
}

func (w *idleWatch) waitFor(t testing.TB, frames int, idle bool) {
	t.Helper()
	what := "the loop to handle what it was sent"
	if idle {
		what = "the loop idle"
	}
	require.Eventually(t, func() bool {
		w.mu.Lock()
		r, seen := w.last, w.seen
		w.mu.Unlock()
		if !seen || r.Frames < int64(frames) || idle && r.Pending {
			return false
		}
		// Timers handled never exceed those delivered: equal means none
		// is on its way to, or being handled by, the loop.
		return w.clk == nil || r.Timers >= w.clk.deliveredCount()
	}, waitLimit, pollTick, what)
}

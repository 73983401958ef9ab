package gcidle

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// TestIdleAndBusy: Idle turns the proportional collector off and sets a
// memory limit above what is in use; Busy restores both. An allocation far
// beyond the limit's headroom still makes the collector run while idle.
func TestIdleAndBusy(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	p := New()
	if !p.NeedsIdle() {
		t.Fatal("a new Pacer does not need Idle")
	}
	p.Idle()
	defer p.Busy()
	if !p.Idling() || p.NeedsIdle() {
		t.Fatal("Idle did not switch")
	}
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GC percent while idle = %d, want -1 (off)", got)
	}
	limit := debug.SetMemoryLimit(-1)
	if limit == math.MaxInt64 || limit < minHeadroom {
		t.Errorf("memory limit while idle = %d, want a finite limit of at least %d", limit, minHeadroom)
	}
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var keep [][]byte
	for range 3 * (limit / (1 << 20)) / 2 { // 1.5× the limit in garbage
		keep = append(keep[:0], make([]byte, 1<<20))
	}
	_ = keep
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if after.NumGC == before.NumGC {
		t.Errorf("no collection while idle after allocating 1.5× the memory limit")
	}
	p.Busy()
	if p.Idling() {
		t.Fatal("Busy did not switch")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent after Busy = %d, want 100", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit after Busy = %d, want none", got)
	}
}

// TestOperatorWins: with GOGC set the Pacer leaves the collector alone.
func TestOperatorWins(t *testing.T) {
	t.Setenv("GOGC", "200")
	p := New()
	p.Idle()
	if p.Idling() {
		t.Error("Idle switched although GOGC is set")
	}
}

// TestPause: Pause turns the collector off under a memory limit, which
// still makes it run when the heap reaches it, and its resume restores
// both; with GOGC set it does nothing.
func TestPause(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	const limit = 64 << 20
	percent := debug.SetGCPercent(100) // the test binary's GOGC, whatever it is
	debug.SetGCPercent(percent)
	resume := Pause(limit)
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GC percent while paused = %d, want -1 (off)", got)
	}
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Errorf("memory limit while paused = %d, want %d", got, limit)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var keep [][]byte
	for range 2 * limit / (1 << 20) { // twice the limit in garbage
		keep = append(keep[:0], make([]byte, 1<<20))
	}
	_ = keep
	runtime.ReadMemStats(&after)
	if after.NumGC == before.NumGC {
		t.Error("no collection while paused after allocating twice the memory limit")
	}
	resume()
	if got := debug.SetGCPercent(percent); got != percent {
		t.Errorf("GC percent after resume = %d, want %d", got, percent)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit after resume = %d, want none", got)
	}

	t.Setenv("GOGC", "200")
	Pause(limit)()
	if got := debug.SetGCPercent(percent); got != percent {
		t.Errorf("GC percent after a Pause with GOGC set = %d, want it untouched (%d)", got, percent)
	}
}

// TestFrugal: Frugal sets GOGC=25 and restores the GC percent when asked;
// a live heap past its bound restores it on its own after a collection.
func TestFrugal(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)

	restore := Frugal(math.MaxUint64)
	if got := gcPercent(); got != frugalPercent {
		t.Errorf("GC percent under Frugal = %d, want %d", got, frugalPercent)
	}
	runtime.GC()
	runtime.GC()
	if got := gcPercent(); got != frugalPercent {
		t.Errorf("GC percent under Frugal after collections below its bound = %d, want %d", got, frugalPercent)
	}
	restore()
	if got := gcPercent(); got != 100 {
		t.Errorf("GC percent after restore = %d, want 100", got)
	}

	restore = Frugal(1 << 20)
	defer restore()
	live := make([][]byte, 8) // 8 MiB live, past the 1 MiB bound
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	for range 100 {
		runtime.GC()
		if gcPercent() == 100 {
			break
		}
		time.Sleep(10 * time.Millisecond) // the finalizer runs on its own goroutine
	}
	runtime.KeepAlive(live)
	if got := gcPercent(); got != 100 {
		t.Errorf("GC percent under Frugal with a live heap past its bound = %d, want 100", got)
	}
	restore() // a second restore changes nothing
	if got := gcPercent(); got != 100 {
		t.Errorf("GC percent after restore = %d, want 100", got)
	}
}

// TestFrugalOperatorWins: with GOMEMLIMIT set, Frugal leaves the collector
// alone.
func TestFrugalOperatorWins(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "1GiB")
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	defer Frugal(math.MaxUint64)()
	if got := gcPercent(); got != 100 {
		t.Errorf("GC percent under Frugal with GOMEMLIMIT set = %d, want 100", got)
	}
}

func gcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// TestIdleReleasesAfterABurst: going idle after allocating releaseAtLeast
// or more, with as much in use but not live, collects and returns it to
// the system first; going idle again without a new burst does not; nor
// does a small burst, however much garbage is in use.
func TestIdleReleasesAfterABurst(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	// garbage allocates n MiB that nothing keeps, with the collector off
	// so that it stays in use until something collects it.
	garbage := func(n int) {
		prev := debug.SetGCPercent(-1)
		defer debug.SetGCPercent(prev)
		var keep []byte
		for range n {
			keep = make([]byte, 1<<20)
		}
		runtime.KeepAlive(keep)
	}
	const burst = 2 * releaseAtLeast >> 20 // MiB

	debug.FreeOSMemory()
	p := New()
	garbage(burst)
	_, before, _ := p.read()
	p.Idle()
	_, after, _ := p.read()
	if p.releases != 1 {
		t.Fatalf("releases after a burst of %d MiB = %d, want 1", burst, p.releases)
	}
	if after > before-releaseAtLeast {
		t.Errorf("in use after the release: %d MiB, before %d MiB: want at least %d MiB less", after>>20, before>>20, releaseAtLeast>>20)
	}
	if limit := debug.SetMemoryLimit(-1); limit >= int64(before) {
		t.Errorf("idle memory limit = %d MiB, want it below what was in use before the release (%d MiB)", limit>>20, before>>20)
	}
	p.Busy()

	// No burst since: no release.
	p.Idle()
	p.Busy()
	if p.releases != 1 {
		t.Errorf("releases after going idle again without a burst = %d, want 1", p.releases)
	}

	// A small burst on top of much garbage (the last of many small
	// changes): no release.
	garbage(burst)
	_, _, allocated := p.read()
	p.allocated = allocated - 1<<20
	p.Idle()
	p.Busy()
	if p.releases != 1 {
		t.Errorf("releases after a burst of 1 MiB = %d, want 1", p.releases)
	}
}

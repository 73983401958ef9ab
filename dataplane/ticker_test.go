package dataplane

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestFdTicker: fn runs every period, and not after Stop.
func TestFdTicker(t *testing.T) {
	const period = 20 * time.Millisecond
	var n atomic.Int64
	ticks := make(chan struct{}, 10)
	start := time.Now()
	tk := newFdTicker(period, func() {
		n.Add(1)
		select {
		case ticks <- struct{}{}:
		default:
		}
	})
	for range 3 {
		select {
		case <-ticks:
		case <-time.After(time.Second):
			t.Fatal("no tick within a second")
		}
	}
	if took := time.Since(start); took < 3*period-5*time.Millisecond {
		t.Errorf("3 ticks in %v, want at least %v", took, 3*period)
	}
	tk.Stop()
	stopped := n.Load()
	time.Sleep(5 * period)
	if got := n.Load(); got != stopped {
		t.Errorf("%d ticks after Stop", got-stopped)
	}
}

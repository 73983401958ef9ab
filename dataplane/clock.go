package dataplane

import "time"

// clock is the loop's source of time: the real one in production, a fake
// in tests, which then drive batch delays, retries and resyncs by moving
// it forward instead of sleeping.
type clock interface {
	Now() time.Time
	NewTimer(d time.Duration) timer
	NewTicker(d time.Duration) ticker
}

// timer is a time.Timer behind an interface (with Go 1.23's semantics: a
// value sent before Stop or Reset is never received after it).
type timer interface {
	C() <-chan time.Time
	Reset(d time.Duration) bool
	Stop() bool
}

// ticker is a time.Ticker behind an interface.
type ticker interface {
	C() <-chan time.Time
	Reset(d time.Duration)
	Stop()
}

type realClock struct{}

func (realClock) Now() time.Time                   { return time.Now() }
func (realClock) NewTimer(d time.Duration) timer   { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.Timer.C }

type realTicker struct{ *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.Ticker.C }

// stoppedTimer returns a timer of c that is not armed.
func stoppedTimer(c clock) timer {
	t := c.NewTimer(time.Hour)
	t.Stop()
	return t
}

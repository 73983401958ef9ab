package dataplane

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fdTicker calls a function periodically from a goroutine of its own, woken
// by a timerfd that Go's poller watches rather than by the runtime's
// timers: it is for a daemon's periodic work while idle (the driver's
// ProcessStatusUpdate).
//
// Why: when an idle Go process's next wake is a runtime timer, the
// runtime's monitor thread (sysmon) sleeps until that deadline too, wakes
// with it, and polls every few microseconds until the poller's thread has
// run the timer; the goroutine the timer's channel then wakes may start
// another thread as well. That is about a dozen context switches per
// tick (measured on Go 1.26), where a file descriptor read by the
// goroutine that does the work costs about five. Every few seconds, that
// difference is most of what an idle driver costs.
type fdTicker struct {
	stop func()
}

// newFdTicker calls fn every d (d > 0) until Stop. Where no timerfd can be
// made, a time.Ticker drives it.
func newFdTicker(d time.Duration, fn func()) *fdTicker {
	done := make(chan struct{})
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err == nil {
		spec := unix.ItimerSpec{Interval: unix.NsecToTimespec(int64(d)), Value: unix.NsecToTimespec(int64(d))}
		if err = unix.TimerfdSettime(fd, 0, &spec, nil); err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		t := time.NewTicker(d)
		quit := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-quit:
					return
				case <-t.C:
					fn()
				}
			}
		}()
		return &fdTicker{stop: func() {
			t.Stop()
			close(quit)
			<-done
		}}
	}
	f := os.NewFile(uintptr(fd), "timerfd") // non-blocking: reads park in Go's poller
	go func() {
		defer close(done)
		var expirations [8]byte
		for {
			if _, err := f.Read(expirations[:]); err != nil {
				return // closed by Stop
			}
			fn()
		}
	}()
	return &fdTicker{stop: func() {
		f.Close()
		<-done
	}}
}

// Stop ends the calls: none starts once it returns (it waits for one
// under way).
func (t *fdTicker) Stop() { t.stop() }

package dataplane

import "testing"

// WatchIdle sets opts' idle hook for the external tests and returns a
// function that waits until the loop has handled the first frames frames
// from Felix and has nothing pending (see testKnobs.idle).
func WatchIdle(opts *Options) (wait func(t testing.TB, frames int)) {
	return watchIdle(opts, nil).wait
}

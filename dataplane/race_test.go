//go:build race

package dataplane

// raceDetector is true in a -race build, whose instrumentation makes the
// largest tests take minutes.
const raceDetector = true

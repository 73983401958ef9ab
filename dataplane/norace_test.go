//go:build !race

package dataplane

// raceDetector is true in a -race build (see race_test.go).
const raceDetector = false

//go:build !race

package thriftbuf

// raceDetector is whether the tests run with the race detector (see race_on_test.go).
const raceDetector = false

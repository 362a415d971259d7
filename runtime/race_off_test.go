//go:build !race

package runtime_test

// raceDetector is whether the tests run with the race detector (see race_on_test.go).
const raceDetector = false

//go:build race

package thriftbuf

// raceDetector is whether the tests run with the race detector, which drops sync.Pool items
// at random: allocation counts then vary from run to run.
const raceDetector = true

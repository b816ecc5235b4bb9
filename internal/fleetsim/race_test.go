//go:build race

package fleetsim

// raceDetector reports whether the race detector is on: it makes the
// scheduler pick among ready goroutines at random.
const raceDetector = true

//go:build race

package steady

// raceEnabled reports a build with the race detector.
const raceEnabled = true

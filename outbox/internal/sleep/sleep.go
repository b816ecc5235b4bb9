// Package sleep is the library's one interruptible wait: the relay's, the
// stores' and writers' retries, the generation relay's polls and the
// embedded backends' latencies all wait through For, so a wait that
// ignores its caller's end cannot creep in anywhere. It imports only the
// standard library, so the core may use it and stay free of other
// dependencies. The lab and the CLI, outside outbox/, wait through their
// own copy (internal/sleep): Go's internal rule keeps them out of this one,
// and the library imports nothing from the repository's internal/, where
// the lab lives (docs/development.md, "What ships and what tests").
package sleep

import "time"

// For waits for d on the time package's clock (the wall clock, or a
// testing/synctest bubble's) or until done closes, and reports false when
// done closed first. A d <= 0 returns true at once, without looking at
// done. A nil done waits the full d.
func For(d time.Duration, done <-chan struct{}) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}

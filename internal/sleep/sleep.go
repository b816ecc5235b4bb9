// Package sleep is the lab's and the CLI's interruptible wait: the
// simulations' latencies, stalls and backoffs and the CLI drain's retries
// wait through For, so a wait that ignores its caller's end cannot creep
// in. It is the library's (outbox/internal/sleep) on this side of the
// ship/test line: the library imports nothing from the repository's
// internal/, and Go's internal rule keeps the lab out of the library's
// internals (docs/development.md, "What ships and what tests").
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

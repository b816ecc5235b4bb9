package outbox_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

func TestRelayKeepAhead(t *testing.T) {
	// KeepsTheMarginAfterARoundThatRunsLate: with the default timings
	// the store leaves a lease with 15 s or more left unrenewed. A pending
	// probe throttled for 4.5 s just before the 10 s round (the relay is not
	// publishing: nothing renews in flight) makes that round run at 13.5 s,
	// when the lease claimed at 0 still has 16.5 s and is left unrenewed. The
	// next round is then due when the lease is down to the margin
	// (LeaseDuration − 2 × LeaseRenewInterval, 10 s), at 20 s, not a renew
	// interval after the late round: the commits from 21 s on are published
	// with at least the margin left, never the 8.5 s a round at 23.5 s would
	// leave.
	t.Run("KeepsTheMarginAfterARoundThatRunsLate", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, func(c *outbox.RelayConfig) {
				c.Options.Mode = outbox.ModeHold
				c.Options.BacklogInterval = -1
			})
			const margin = 10 * time.Second // lease.KeepMargin at the default timings
			throttled := false
			e.store.beforePending = func() {
				now := e.clock.Now()
				if !throttled && now.Sub(t0) >= 9*time.Second {
					throttled = true
					time.Sleep(4500 * time.Millisecond)
				}
				if now.Sub(t0) >= 21*time.Second && e.store.pending() == 0 && len(e.pub.sent()) < 3 {
					e.store.add(0, "k")
				}
			}
			var left []time.Duration
			e.pub.onPublish = func([]outbox.Message) {
				l := e.store.mem.Lease(0)
				left = append(left, l.ExpiresAt.Sub(e.clock.Now()))
			}
			res := e.run(t, outbox.RunInput{Deadline: t0.Add(40 * time.Second)})
			if res.Published != 3 || len(left) != 3 {
				t.Fatalf("published %d in %d batches, want 3", res.Published, len(left))
			}
			for i, d := range left {
				if d < margin {
					t.Errorf("publish %d started with %v of the lease left, less than the %v margin", i, d, margin)
				}
			}
		})
	})
}

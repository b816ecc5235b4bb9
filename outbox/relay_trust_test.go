package outbox_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

func TestRelayTrust(t *testing.T) {
	// IdleExitTakesNoClaimOnInference: a drain-mode relay that is
	// about to stop finds a commit in bucket 2, whose holder's lease lapsed at
	// 1.5 s and whose holder wrote a heartbeat at 1.9 s: by the claiming rule
	// that peer's round would be claiming the bucket. The idle-exit decision
	// does not rely on that inference: the relay takes part in the next round,
	// claims the bucket and publishes the commit instead of stopping and
	// leaving it to the schedule.
	t.Run("IdleExitTakesNoClaimOnInference", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 4, nil)
			e.store.heartbeat("peer", false)
			e.store.hold(2, "peer", t0.Add(1500*time.Millisecond))
			e.store.add(2, "k")
			go func() {
				time.Sleep(1900 * time.Millisecond)
				e.store.heartbeat("peer", false)
			}()
			res := e.run(t, outbox.RunInput{Deadline: t0.Add(time.Minute)})
			if res.Published != 1 || e.store.pending() != 0 {
				t.Fatalf("published %d, %d pending, reason %s; want the commit published before the relay stops", res.Published, e.store.pending(), res.Reason)
			}
		})
	})
}

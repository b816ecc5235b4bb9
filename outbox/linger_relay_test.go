package outbox_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

func TestRelayLinger(t *testing.T) {
	// A relay woken for one message at a time lingers IdleTimeout until its
	// last 8 runs (this one included) found work at most a quarter of
	// MaxIdleTimeout apart (the runs last about 3 s here), then MaxIdleTimeout;
	// a long pause brings the short linger back.
	t.Run("LingersLongerUnderSteadyTraffic", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			const maxIdle = 20 * time.Second
			e := newRelayEnv(t, 2, func(c *outbox.RelayConfig) { c.Options.MaxIdleTimeout = maxIdle })
			runOne := func() time.Duration {
				t.Helper()
				e.store.add(0, "k")
				res := e.run(t, outbox.RunInput{})
				if res.Reason != outbox.StopDrained || res.Published != 1 {
					t.Fatalf("reason %s, published %d; want drained after 1", res.Reason, res.Published)
				}
				return res.Ended.Sub(res.Started)
			}
			for i := range 7 {
				if d := runOne(); d < outbox.DefaultIdleTimeout || d >= maxIdle {
					t.Fatalf("run %d lasted %v, want the short linger (%v)", i, d, outbox.DefaultIdleTimeout)
				}
			}
			if d := runOne(); d < maxIdle {
				t.Fatalf("8th run, about 3 s after each of the 7 before, lasted %v, want at least %v", d, maxIdle)
			}
			time.Sleep(time.Minute) // a lull: the bubble's clock moves on
			if d := runOne(); d >= maxIdle {
				t.Fatalf("run after a minute's pause lasted %v, want the short linger", d)
			}
		})
	})
}

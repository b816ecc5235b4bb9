package outbox_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// staleProbes observes a store (outboxtest.ObservedStore) so that its
// next head probes (after arm) answer from before the latest commits:
// nothing pending, as an eventually consistent read may. Fetches stay
// consistent.
type staleProbes struct {
	mu     sync.Mutex
	stale  int
	missed int
}

func (s *staleProbes) arm(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stale = n
}

func (s *staleProbes) observe(store outbox.Store) outbox.Store {
	return outboxtest.Observe(outboxtest.ObservedStore{Store: store, PendingBucketsFunc: s.pendingBuckets})
}

func (s *staleProbes) pendingBuckets(ctx context.Context, buckets []int, next func(context.Context, []int) ([]int, error)) ([]int, error) {
	s.mu.Lock()
	if s.stale > 0 {
		s.stale--
		s.missed++
		s.mu.Unlock()
		_, err := next(ctx, buckets) // counted like any probe
		return nil, err
	}
	s.mu.Unlock()
	return next(ctx, buckets)
}

// holdRelay runs a hold-mode relay with TargetLatency target in the
// background for a minute; the returned func waits for its result, and
// published receives each message's publish time.
func holdRelay(t *testing.T, target time.Duration, wrap func(outbox.Store) outbox.Store) (e *relayEnv, wait func() outbox.RunResult, published <-chan time.Time) {
	t.Helper()
	at := make(chan time.Time, 100)
	e = newRelayEnv(t, 2, func(c *outbox.RelayConfig) {
		c.Options.Mode = outbox.ModeHold
		c.Options.TargetLatency = target
		if wrap != nil {
			c.Store = wrap(c.Store)
		}
	})
	e.pub.onPublish = func(msgs []outbox.Message) {
		for range msgs {
			at <- time.Now()
		}
	}
	var res outbox.RunResult
	done := make(chan struct{})
	go func() {
		defer close(done)
		res = e.run(t, outbox.RunInput{Deadline: t0.Add(time.Minute)})
	}()
	return e, func() outbox.RunResult { <-done; return res }, at
}

func TestRelayTarget(t *testing.T) {
	// A busy bucket is probed every TargetLatency: a message committed after
	// the bucket's first one is found within the target instead of at the next
	// poll; a quiet bucket is probed at the poll only.
	t.Run("ProbesBusyBucketsEveryTargetLatency", func(t *testing.T) {
		for _, tc := range []struct {
			target time.Duration
			// wait is the second message's commit → publish time: the
			// commit comes 333 ms after the first publish (at the 1 s poll).
			wait time.Duration
		}{
			{target: 100 * time.Millisecond, wait: 67 * time.Millisecond},
			{target: 250 * time.Millisecond, wait: 167 * time.Millisecond},
			{target: time.Second, wait: 667 * time.Millisecond},
		} {
			t.Run(tc.target.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					e, wait, published := holdRelay(t, tc.target, nil)
					time.Sleep(500 * time.Millisecond)
					e.store.add(0, "k")
					first := <-published
					time.Sleep(333 * time.Millisecond)
					committed := time.Now()
					e.store.add(0, "k")
					if got := (<-published).Sub(committed); got != tc.wait {
						t.Errorf("second message published %v after its commit, want %v (first at %v)", got, tc.wait, first.Sub(t0))
					}
					// 12 s without work: bucket 0 is quiet again and both
					// buckets are probed once a second, one request each.
					time.Sleep(12250 * time.Millisecond) // off the poll ticks
					before := e.store.count("pending")
					time.Sleep(5 * time.Second)
					if n := e.store.count("pending") - before; n != 5 {
						t.Errorf("%d probes in 5 quiet seconds, want 5 (one per poll)", n)
					}
					if res := wait(); res.Published != 2 {
						t.Errorf("published %d, want 2", res.Published)
					}
				})
			})
		}
	})

	// An eventually consistent probe that misses a message only delays it: the
	// next probe finds it, the consistent fetch returns it with everything
	// before it, and the key's order holds. The probes decide only when a
	// bucket is fetched.
	t.Run("StaleProbeDelaysButNeitherLosesNorReorders", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var stale *staleProbes
			e, wait, published := holdRelay(t, 100*time.Millisecond, func(s outbox.Store) outbox.Store {
				stale = &staleProbes{}
				return stale.observe(s)
			})
			var want []string
			add := func(key string) {
				want = append(want, string(e.store.add(0, key).Value))
			}
			add("a")
			<-published
			time.Sleep(50 * time.Millisecond)
			stale.arm(2)
			add("a")
			add("b")
			time.Sleep(150 * time.Millisecond) // the first stale probe has passed
			add("a")
			for range 3 {
				<-published
			}
			wait()
			var got []string
			for _, m := range e.pub.sent() {
				got = append(got, string(m.Value))
			}
			if !slices.Equal(got, want) {
				t.Errorf("published %q, want %q", got, want)
			}
			if stale.missed != 2 {
				t.Errorf("%d probes missed the messages, want 2", stale.missed)
			}
			if e.store.pending() != 0 {
				t.Errorf("%d messages left in the store", e.store.pending())
			}
		})
	})
}

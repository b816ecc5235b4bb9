package outbox_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// strandingStore counts messages beyond the bucket count
// (outbox.StrandedCounter) beside a store it observes
// (outboxtest.ObservedStore) so that its backlog samples report pending
// messages.
type strandingStore struct {
	mu      sync.Mutex
	calls   int
	counts  outbox.Stranded
	pending int64
}

// store is inner, observed, with s's count.
func (s *strandingStore) store(inner outbox.Store) outbox.Store {
	observed := outboxtest.Observe(outboxtest.ObservedStore{Store: inner,
		BacklogFunc: func(context.Context, func(context.Context) (outbox.Backlog, error)) (outbox.Backlog, error) {
			return outbox.Backlog{Pending: s.pending}, nil
		}})
	return struct {
		outbox.Store
		outbox.Quarantine
		outbox.StrandedCounter
	}{observed, observed.(outbox.Quarantine), s}
}

func (s *strandingStore) Stranded(context.Context) (outbox.Stranded, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return s.counts, nil
}

func TestRelayStranded(t *testing.T) {
	// The holder of bucket 0 counts the stranded messages with a backlog
	// sample that found messages pending, every StrandedEvery-th interval
	// from its creation, and reports the count.
	run := func(t *testing.T, budget time.Duration, store func(outbox.Store) outbox.Store) *relayEnv {
		e := newRelayEnv(t, 2, func(c *outbox.RelayConfig) {
			c.Options.Mode, c.Options.BacklogInterval = outbox.ModeHold, time.Second
			c.Options.StopMargin = time.Second
			c.Store = store(c.Store)
		})
		if _, err := e.relay.Run(t.Context(), outbox.RunInput{Deadline: time.Now().Add(budget)}); err != nil {
			t.Fatal(err)
		}
		return e
	}
	t.Run("CountsEveryTenthBacklogInterval_AndReportsIt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var s *strandingStore
			e := run(t, 36*time.Second, func(m outbox.Store) outbox.Store {
				s = &strandingStore{counts: outbox.Stranded{Messages: 3, Buckets: []int{2, 3}}, pending: 7}
				return s.store(m)
			})
			// Counts at 10 s, 20 s and 30 s of a 35 s budget.
			if n, sum := e.obs.count("stranded"); n != 3 || sum != 9 || s.calls != 3 {
				t.Fatalf("%d reports of %d stranded messages after %d counts; want 3 reports of 3", n, sum, s.calls)
			}
			if n, _ := e.obs.count("backlog"); n < 30 {
				t.Fatalf("%d backlog samples, want one a second", n)
			}
		})
	})
	t.Run("NoCountBeforeTheTenthInterval", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var s *strandingStore
			e := run(t, 9*time.Second, func(m outbox.Store) outbox.Store {
				s = &strandingStore{pending: 7}
				return s.store(m)
			})
			if n, _ := e.obs.count("stranded"); n != 0 || s.calls != 0 {
				t.Fatalf("%d reports, %d counts within the first 10 intervals; want none", n, s.calls)
			}
		})
	})
	// An idle outbox pays nothing for the count.
	t.Run("NoCountWhileNothingIsPending", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var s *strandingStore
			e := run(t, 36*time.Second, func(m outbox.Store) outbox.Store {
				s = &strandingStore{}
				return s.store(m)
			})
			if n, _ := e.obs.count("stranded"); n != 0 || s.calls != 0 {
				t.Fatalf("%d reports, %d counts with nothing pending; want none", n, s.calls)
			}
		})
	})
	t.Run("AStoreThatCannotCountReportsNothing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := run(t, 25*time.Second, func(m outbox.Store) outbox.Store { return m })
			if n, _ := e.obs.count("stranded"); n != 0 {
				t.Fatalf("%d reports from a store without StrandedCounter", n)
			}
		})
	})
}

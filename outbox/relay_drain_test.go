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

// cuttingStore observes a store (outboxtest.ObservedStore) so that every
// batch ends after cut messages with outbox.ErrBatchCut when the bucket
// holds more, as a table store does before a transaction its limit would
// split; while empty is set it answers every fetch with no message and the
// sentinel. It records when each fetch was answered.
type cuttingStore struct {
	cut int

	mu      sync.Mutex
	empty   bool
	fetched []time.Time
}

func (s *cuttingStore) observe(store outbox.Store) outbox.Store {
	return outboxtest.Observe(outboxtest.ObservedStore{Store: store, FetchBatchFunc: s.fetchBatch})
}

func (s *cuttingStore) fetchBatch(ctx context.Context, bucket, max int, next func(context.Context, int, int) ([]outbox.Message, error)) ([]outbox.Message, error) {
	s.mu.Lock()
	s.fetched = append(s.fetched, time.Now())
	empty := s.empty
	s.mu.Unlock()
	if empty {
		return nil, outbox.ErrBatchCut
	}
	ms, err := next(ctx, bucket, max)
	if err == nil && len(ms) > s.cut {
		return ms[:s.cut], outbox.ErrBatchCut
	}
	return ms, err
}

func (s *cuttingStore) fetches() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.fetched)
}

func TestRelayDrain(t *testing.T) {
	// A short batch without the sentinel says the bucket held nothing more,
	// and the relay waits for its next probe; one the store cut short has
	// messages behind it, and the relay fetches again at once.
	t.Run("ABatchTheStoreCutShort_IsFollowedAtOnce_InKeyOrder", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var cs *cuttingStore
			e := newRelayEnv(t, 1, func(c *outbox.RelayConfig) {
				cs = &cuttingStore{cut: 7}
				c.Store = cs.observe(c.Store)
			})
			var want []int64
			for range 30 {
				m := e.store.add(0, "k")
				want = append(want, m.Sequence())
			}
			res := e.run(t, outbox.RunInput{})
			if res.Deleted != 30 {
				t.Fatalf("deleted %d, want 30", res.Deleted)
			}
			var got []int64
			for _, m := range e.pub.sent() {
				got = append(got, m.Sequence())
			}
			if !slices.Equal(got, want) {
				t.Fatalf("published %v, want %v", got, want)
			}
			// Batches of 7, 7, 7, 7 and 2, fetched at the instant the run
			// began, with no wait for a probe between them.
			fetched := cs.fetches()
			if len(fetched) < 5 || !fetched[4].Equal(t0) {
				t.Fatalf("fetches at %v, want the first five at %v", fetched, t0)
			}
		})
	})

	// An empty answer waits for the next probe whatever error comes with
	// it: a transaction still committing at the bucket's head must not
	// make the relay spin on the store.
	t.Run("ACutWithNoMessage_WaitsForTheNextProbe", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var cs *cuttingStore
			e := newRelayEnv(t, 1, func(c *outbox.RelayConfig) {
				cs = &cuttingStore{cut: 10, empty: true}
				c.Store = cs.observe(c.Store)
			})
			e.store.add(0, "k")
			go func() {
				time.Sleep(time.Second)
				cs.mu.Lock()
				cs.empty = false
				cs.mu.Unlock()
			}()
			res := e.run(t, outbox.RunInput{})
			if res.Deleted != 1 || res.Errors != 0 {
				t.Fatalf("deleted %d with %d failed cycles, want 1 and none: an empty batch is no failure", res.Deleted, res.Errors)
			}
			// One fetch per probe while the head commits: a TargetLatency
			// apart, so at most a handful in the second it took.
			within := 0
			for _, at := range cs.fetches() {
				if at.Before(t0.Add(time.Second)) {
					within++
				}
			}
			if limit := int(time.Second/outbox.DefaultTargetLatency) + 1; within > limit {
				t.Fatalf("%d fetches in the second the head was committing, want at most %d (one per probe)", within, limit)
			}
		})
	})
}

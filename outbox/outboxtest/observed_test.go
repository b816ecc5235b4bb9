package outboxtest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxmem"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestObservedStore(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) *outboxmem.Store {
		t.Helper()
		s, err := outboxmem.New(outboxmem.Options{BucketCount: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"a", "b", "c"} {
			if _, err := s.Enqueue(t.Context(), outbox.Message{ID: outbox.NewMessageID(), Topic: "t", Key: []byte(k), Value: []byte(k)}); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}

	// ServesWhatTheStoreServes: the observed store is a Quarantine, a
	// CoverageReader and a LeaseReader exactly when the store it is given
	// is; narrowing the store hides them.
	t.Run("ServesWhatTheStoreServes", func(t *testing.T) {
		t.Parallel()
		mem := setup(t)
		for _, c := range []struct {
			name            string
			store           outbox.Store
			quarantine, cov bool
		}{
			{"outboxmem", mem, true, false},
			{"narrowed", struct{ outbox.Store }{mem}, false, false},
			{"with readers", struct {
				outbox.Store
				outbox.CoverageReader
				outbox.LeaseReader
			}{mem, readers{}, readers{}}, false, true},
			{"with everything", struct {
				*outboxmem.Store
				outbox.CoverageReader
				outbox.LeaseReader
			}{mem, readers{}, readers{}}, true, true},
		} {
			s := outboxtest.Observe(outboxtest.ObservedStore{Store: c.store})
			_, q := s.(outbox.Quarantine)
			_, cr := s.(outbox.CoverageReader)
			_, lr := s.(outbox.LeaseReader)
			_, gate := s.(outbox.GenerationGate)
			if q != c.quarantine || cr != c.cov || lr != c.cov || gate {
				t.Errorf("%s: quarantine %v, coverage %v, leases %v, gate %v; want %v, %v, %v, false", c.name, q, cr, lr, gate, c.quarantine, c.cov, c.cov)
			}
		}
	})

	// CallRunsAroundTheFuncs: Call sees every call with its method and
	// bucket and runs the call's Func inside it, which may rewrite what
	// the call returns.
	t.Run("CallRunsAroundTheFuncs", func(t *testing.T) {
		t.Parallel()
		var seen []string
		s := outboxtest.Observe(outboxtest.ObservedStore{
			Store: setup(t),
			Call: func(ctx context.Context, c outboxtest.StoreCall, next func(context.Context) error) error {
				seen = append(seen, fmt.Sprintf("%s@%d", c.Method, c.Bucket))
				return next(ctx)
			},
			FetchBatchFunc: func(ctx context.Context, bucket, max int, next func(context.Context, int, int) ([]outbox.Message, error)) ([]outbox.Message, error) {
				seen = append(seen, "fetch func")
				msgs, err := next(ctx, bucket, max)
				return msgs[:min(len(msgs), 1)], err
			},
		})
		ctx := t.Context()
		pending, err := s.PendingBuckets(ctx, []int{0, 1})
		if err != nil || len(pending) == 0 {
			t.Fatalf("pending: %v, %v", pending, err)
		}
		msgs, err := s.FetchBatch(ctx, pending[0], 10)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("fetch: %d messages, %v; want the Func's one", len(msgs), err)
		}
		want := []string{"PendingBuckets@-1", fmt.Sprintf("FetchBatch@%d", pending[0]), "fetch func"}
		if !slices.Equal(seen, want) {
			t.Fatalf("seen %q, want %q", seen, want)
		}
	})

	// RefusedAndLostCallsReturnZeroResults: a call Call refuses never
	// reaches the store; a call whose answer Call loses reached it, and
	// returns Call's error with zero results; an error that wraps the
	// call's own keeps them.
	t.Run("RefusedAndLostCallsReturnZeroResults", func(t *testing.T) {
		t.Parallel()
		mem := setup(t)
		crashed := errors.New("crashed")
		var mode string
		s := outboxtest.Observe(outboxtest.ObservedStore{
			Store: mem,
			Call: func(ctx context.Context, c outboxtest.StoreCall, next func(context.Context) error) error {
				switch mode {
				case "refuse":
					return crashed
				case "lose":
					_ = next(ctx)
					return crashed
				}
				return next(ctx)
			},
		})
		ctx := t.Context()
		now := time.Now()
		claim := []lease.Write{{Bucket: 0, Now: now, Expiry: now.Add(30 * time.Second)}}
		mode = "refuse"
		if acc, _, err := s.WriteLeases(ctx, "relay-a", lease.OpClaim, claim); !errors.Is(err, crashed) || acc != nil || mem.Lease(0).Owner != "" {
			t.Fatalf("refused claim: %v, %v, lease %+v; want nothing sent", acc, err, mem.Lease(0))
		}
		mode = "lose"
		if acc, _, err := s.WriteLeases(ctx, "relay-a", lease.OpClaim, claim); !errors.Is(err, crashed) || acc != nil || mem.Lease(0).Owner != "relay-a" {
			t.Fatalf("lost claim: %v, %v, lease %+v; want the claim made and no answer", acc, err, mem.Lease(0))
		}
		mode = ""
		if msgs, err := s.FetchBatch(ctx, 0, 10); err != nil || len(msgs)+len(mem.Pending(1)) != 3 {
			t.Fatalf("plain fetch: %d, %v", len(msgs), err)
		}
	})
}

// readers serves the trust check's reads, answering nothing.
type readers struct{}

func (readers) ReadCoverage(context.Context, []int) (lease.Coordination, bool, error) {
	return lease.Coordination{}, false, nil
}

func (readers) ReadLeases(context.Context, []int) ([]lease.State, error) { return nil, nil }

package steady

import (
	"context"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// env is what the ledger tracks of one execution environment of the relay
// function (lab.RelayFunction builds it, with the real relay handler, and
// keeps it warm for the rest of the run): its relay id, and what its relay
// believes it owns while an invocation runs.
type env struct {
	relayID string

	// Guarded by ledger.mu: whether an invocation runs and what its relay
	// believes it owns since leaseAt.
	running bool
	owned   []int
	leaseAt time.Time

	// renewal is the start of a renewal whose writes were accepted and
	// whose heartbeat is to come; renewing says one is.
	mu       sync.Mutex
	renewal  time.Time
	renewing bool
}

func (e *env) renewalStarted(start time.Time) {
	e.mu.Lock()
	e.renewal, e.renewing = start, true
	e.mu.Unlock()
}

func (e *env) renewalEnded() (start time.Time, renewing bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	start, renewing = e.renewal, e.renewing
	e.renewing = false
	return start, renewing
}

// envOf returns the ledger's record of a relay function's environment.
func envOf(re *lab.RelayEnv) *env { return re.State.(*env) }

// newEnvStore is the relay function's store hook: environment re's store
// (an outboxtest.ObservedStore) names the store call in the context of its
// requests (for the classifier) and tells the ledger of the relay's
// renewals and releases; its rounds reach the ledger through the relay's
// hook (roundHook). It serves the outboxddb.Store's trust-check reads
// (outbox.CoverageReader, outbox.LeaseReader) as the relay function's
// store does, so a trust check reads what it reads when deployed.
func (s *sim) newEnvStore(re *lab.RelayEnv, store *outboxddb.Store) outbox.Store {
	e := &env{relayID: re.RelayID}
	re.State = e
	return outboxtest.Observe(outboxtest.ObservedStore{
		Store: struct {
			outbox.Store
			outbox.CoverageReader
			outbox.LeaseReader
		}{store, store, store},
		Call: func(ctx context.Context, c outboxtest.StoreCall, next func(context.Context) error) error {
			if m, ok := storeMethods[c.Method]; ok {
				ctx = withMethod(ctx, m)
			}
			return next(ctx)
		},
		WriteLeasesFunc: func(ctx context.Context, relayID string, op lease.Op, writes []lease.Write, next func(context.Context, string, lease.Op, []lease.Write) ([]int, []int, error)) ([]int, []int, error) {
			if op != lease.OpRenew {
				return next(ctx, relayID, op, writes)
			}
			start := s.clock.Now()
			accepted, refused, err := next(withMethod(ctx, methodRenew), relayID, op, writes)
			if err != nil || len(refused) > 0 {
				s.ledger.renewed(e, start, s.clock.Now(), false, err)
			} else {
				e.renewalStarted(start)
			}
			return accepted, refused, err
		},
		// The heartbeat that ends a renewal (lease.Renew) ends it for the
		// ledger too.
		HeartbeatFunc: func(ctx context.Context, relayID string, now time.Time, keepsAhead bool, next func(context.Context, string, time.Time, bool) (bool, error)) (bool, error) {
			start, renewing := e.renewalEnded()
			recorded, err := next(ctx, relayID, now, keepsAhead)
			if renewing {
				s.ledger.renewed(e, start, s.clock.Now(), err == nil, err)
			}
			return recorded, err
		},
		ReleaseLeasesFunc: func(ctx context.Context, relayID string, next func(context.Context, string) (lease.Release, error)) (lease.Release, error) {
			s.ledger.releasing(e, s.clock.Now())
			return next(ctx, relayID)
		},
	})
}

// storeMethods names the store calls whose requests the classifier sorts:
// a round's reads and lease writes (a renewal's writes are named apart),
// the stop, the trust check's reads; the message calls (fetch, delete,
// backlog, probes) are left unnamed.
var storeMethods = map[string]storeMethod{
	"Snapshot":         methodAcquire,
	"Heartbeats":       methodAcquire,
	"WriteLeases":      methodAcquire,
	"ReleaseLeases":    methodRelease,
	"ReadCoordination": methodRead,
	"ReadCoverage":     methodRead,
	"ReadLeases":       methodRead,
}

// roundHook tells the ledger of environment e's rounds: what the relay
// believes it owns from the start of a successful round, nothing after a
// failed one.
type roundHook struct {
	s *sim
	e *env
}

// OnRound implements outbox.HookLease.
func (h roundHook) OnRound(_ string, took time.Duration, acq lease.Acquisition, err error) {
	now := h.s.clock.Now()
	h.s.ledger.acquired(h.e, now.Add(-took), now, acq, err)
}

// OnLeases implements outbox.HookLease.
func (roundHook) OnLeases(string, int, int, int) {}

// OnLeaseLost implements outbox.HookLease.
func (roundHook) OnLeaseLost(string, int, outbox.LossReason) {}

// OnReleaseSkipped implements outbox.HookLease.
func (roundHook) OnReleaseSkipped(string, int) {}

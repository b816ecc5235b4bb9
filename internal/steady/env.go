package steady

import (
	"context"
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
}

// envOf returns the ledger's record of a relay function's environment.
func envOf(re *lab.RelayEnv) *env { return re.State.(*env) }

// newEnvStore is the relay function's store hook: environment re's store
// (an outboxtest.ObservedStore) names the store call in the context of its
// requests (for the classifier) and tells the ledger what the relay now
// believes it owns, as the engine does: from the start of a successful
// round or renewal, until a release starts, a round fails or a renewal is
// refused. It serves the outboxddb.Store's trust-check reads
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
		AcquireLeasesFunc: func(ctx context.Context, req lease.Request, rs lease.RoundState, next func(context.Context, lease.Request, lease.RoundState) (lease.Acquisition, error)) (lease.Acquisition, error) {
			start := s.clock.Now()
			acq, err := next(ctx, req, rs)
			s.ledger.acquired(e, start, s.clock.Now(), acq, err)
			return acq, err
		},
		RenewLeasesFunc: func(ctx context.Context, req lease.Request, buckets []int, next func(context.Context, lease.Request, []int) (bool, error)) (bool, error) {
			start := s.clock.Now()
			ok, err := next(ctx, req, buckets)
			s.ledger.renewed(e, start, s.clock.Now(), ok, err)
			return ok, err
		},
		ReleaseLeasesFunc: func(ctx context.Context, req lease.Request, next func(context.Context, lease.Request) (lease.Release, error)) (lease.Release, error) {
			s.ledger.releasing(e, s.clock.Now())
			return next(ctx, req)
		},
	})
}

// storeMethods names the store calls whose requests the classifier sorts;
// the message calls (fetch, delete, backlog, probes) are left unnamed.
var storeMethods = map[string]storeMethod{
	"AcquireLeases":    methodAcquire,
	"RenewLeases":      methodRenew,
	"ReleaseLeases":    methodRelease,
	"ReadCoordination": methodRead,
	"ReadCoverage":     methodRead,
	"ReadLeases":       methodRead,
}

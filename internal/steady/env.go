package steady

import (
	"context"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
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
// reports to the ledger through an envStore.
func (s *sim) newEnvStore(re *lab.RelayEnv, store *outboxddb.Store) outbox.Store {
	e := &env{relayID: re.RelayID}
	re.State = e
	return &envStore{Store: store, ddb: store, env: e, s: s}
}

// envStore is an environment's outbox.Store: it names the store call in the
// context of its requests (for the classifier) and tells the ledger what
// the relay now believes it owns, as the engine does: from the
// start of a successful round or renewal, until a release starts, a round
// fails or a renewal is refused. It serves the outboxddb.Store's optional
// interfaces (outbox.CoverageReader, outbox.LeaseReader) as the relay
// function's store does, so a trust check reads what it reads when
// deployed.
type envStore struct {
	// Store is the environment's outboxddb.Store, whose message calls
	// (fetch, delete, backlog) pass through as they are.
	outbox.Store
	ddb *outboxddb.Store
	env *env
	s   *sim
}

var (
	_ outbox.Store          = (*envStore)(nil)
	_ outbox.CoverageReader = (*envStore)(nil)
	_ outbox.LeaseReader    = (*envStore)(nil)
)

func (st *envStore) AcquireLeases(ctx context.Context, req lease.Request, rs lease.RoundState) (lease.Acquisition, error) {
	start := st.s.clock.Now()
	acq, err := st.Store.AcquireLeases(withMethod(ctx, methodAcquire), req, rs)
	st.s.ledger.acquired(st.env, start, st.s.clock.Now(), acq, err)
	return acq, err
}

func (st *envStore) RenewLeases(ctx context.Context, req lease.Request, buckets []int) (bool, error) {
	start := st.s.clock.Now()
	ok, err := st.Store.RenewLeases(withMethod(ctx, methodRenew), req, buckets)
	st.s.ledger.renewed(st.env, start, st.s.clock.Now(), ok, err)
	return ok, err
}

func (st *envStore) ReleaseLeases(ctx context.Context, req lease.Request) (lease.Release, error) {
	st.s.ledger.releasing(st.env, st.s.clock.Now())
	return st.Store.ReleaseLeases(withMethod(ctx, methodRelease), req)
}

func (st *envStore) ReadCoordination(ctx context.Context) (lease.Coordination, error) {
	return st.Store.ReadCoordination(withMethod(ctx, methodRead))
}

// ReadCoverage passes the trust check's read of the hinted buckets'
// leases and the heartbeats through to the store (outbox.CoverageReader).
// With the study's 8 buckets it is the whole coordination partition: a
// narrower read would cost as much.
func (st *envStore) ReadCoverage(ctx context.Context, buckets []int) (lease.Coordination, bool, error) {
	return st.ddb.ReadCoverage(withMethod(ctx, methodRead), buckets)
}

// ReadLeases passes the trust check's second look at a bucket left to a
// claiming peer through to the store (outbox.LeaseReader), as the relay
// function's store serves it.
func (st *envStore) ReadLeases(ctx context.Context, buckets []int) ([]lease.State, error) {
	return st.ddb.ReadLeases(withMethod(ctx, methodRead), buckets)
}

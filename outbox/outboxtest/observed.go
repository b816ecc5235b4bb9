package outboxtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// ObservedStore is the one way this module's tests and simulations watch,
// time, refuse or rewrite the calls a relay makes to its store, beside the
// request-level hooks (outboxddb.HookRequest, outboxlocal's counter and
// faults). Observe turns it into the outbox.Store a relay is given.
//
// Call, when set, runs around every call, and each XxxFunc, when set, runs
// inside it in place of its call: next makes the call on Store. Either may
// wait, return without calling next (a refused call, a crashed process),
// rewrite the arguments or the context it passes on, or change what the
// call returns. When Call returns an error other than the one next
// returned (an answer lost after the call was made), the call returns that
// error and zero results.
//
// The observed store serves exactly the optional interfaces Store serves
// among outbox.Quarantine and the pair outbox.CoverageReader and
// outbox.LeaseReader, so a relay behind it reads what it reads behind
// Store; narrow Store (struct{ outbox.Store }{s}) to hide them. It serves
// neither outbox.GenerationGate nor generation.Store.
type ObservedStore struct {
	// Store receives the calls (required).
	Store outbox.Store
	// Call runs around every call (see StoreCall).
	Call func(ctx context.Context, c StoreCall, next func(context.Context) error) error

	// outbox.Store's calls: the lease primitives (lease.IO), the release,
	// and the message calls. BucketCount is not observed.
	HeartbeatFunc        func(ctx context.Context, relayID string, now time.Time, keepsAhead bool, next func(context.Context, string, time.Time, bool) (bool, error)) (bool, error)
	SnapshotFunc         func(ctx context.Context, next func(context.Context) (lease.Coordination, error)) (lease.Coordination, error)
	HeartbeatsFunc       func(ctx context.Context, next func(context.Context) ([]lease.RelayState, error)) ([]lease.RelayState, error)
	WriteLeasesFunc      func(ctx context.Context, relayID string, op lease.Op, writes []lease.Write, next func(context.Context, string, lease.Op, []lease.Write) ([]int, []int, error)) (accepted, refused []int, err error)
	PruneFunc            func(ctx context.Context, relayID string, p lease.PruneWrite, next func(context.Context, string, lease.PruneWrite) int) int
	ReleaseLeasesFunc    func(ctx context.Context, relayID string, next func(context.Context, string) (lease.Release, error)) (lease.Release, error)
	ReadCoordinationFunc func(ctx context.Context, next func(context.Context) (lease.Coordination, error)) (lease.Coordination, error)
	PendingBucketsFunc   func(ctx context.Context, buckets []int, next func(context.Context, []int) ([]int, error)) ([]int, error)
	FetchBatchFunc       func(ctx context.Context, bucket, max int, next func(context.Context, int, int) ([]outbox.Message, error)) ([]outbox.Message, error)
	MarkPublishedFunc    func(ctx context.Context, bucket int, msgs []outbox.Message, next func(context.Context, int, []outbox.Message) error) error
	BacklogFunc          func(ctx context.Context, next func(context.Context) (outbox.Backlog, error)) (outbox.Backlog, error)

	// outbox.CoverageReader's and outbox.LeaseReader's calls.
	ReadCoverageFunc func(ctx context.Context, buckets []int, next func(context.Context, []int) (lease.Coordination, bool, error)) (lease.Coordination, bool, error)
	ReadLeasesFunc   func(ctx context.Context, buckets []int, next func(context.Context, []int) ([]lease.State, error)) ([]lease.State, error)

	// outbox.Quarantine's calls.
	ParkedKeysFunc     func(ctx context.Context, bucket int, next func(context.Context, int) (outbox.ParkedSet, error)) (outbox.ParkedSet, error)
	ParkFunc           func(ctx context.Context, p outbox.Parking, next func(context.Context, outbox.Parking) error) error
	ReplayRequestsFunc func(ctx context.Context, next func(context.Context) (map[int]int64, error)) (map[int]int64, error)
	DeleteReplayedFunc func(ctx context.Context, bucket int, msgs []outbox.Message, next func(context.Context, int, []outbox.Message) error) error
	RefuseReplayFunc   func(ctx context.Context, bucket int, seq int64, reason string, next func(context.Context, int, int64, string) error) error
	ReplayDoneFunc     func(ctx context.Context, bucket int, request int64, next func(context.Context, int, int64) error) error
}

// StoreCall names one call of an observed store for ObservedStore.Call.
type StoreCall struct {
	// Method is the call's method as Go spells it ("FetchBatch").
	Method string
	// Bucket is the bucket of a call about one bucket (FetchBatch,
	// MarkPublished and the Quarantine calls that take one); -1 otherwise.
	Bucket int
}

// Observe returns the outbox.Store that o describes. It panics when
// o.Store is nil or serves one of outbox.CoverageReader and
// outbox.LeaseReader without the other.
func Observe(o ObservedStore) outbox.Store {
	if o.Store == nil {
		panic("outboxtest: Observe needs a Store")
	}
	s := &observed{o: o}
	_, q := o.Store.(outbox.Quarantine)
	_, cr := o.Store.(outbox.CoverageReader)
	_, lr := o.Store.(outbox.LeaseReader)
	if cr != lr {
		panic(fmt.Sprintf("outboxtest: %T serves only one of outbox.CoverageReader and outbox.LeaseReader", o.Store))
	}
	switch {
	case q && cr:
		return observedAll{s, quarantineCalls{s}, readerCalls{s}}
	case q:
		return observedQuarantine{s, quarantineCalls{s}}
	case cr:
		return observedReaders{s, readerCalls{s}}
	}
	return s
}

// observed is an ObservedStore serving outbox.Store.
type observed struct{ o ObservedStore }

// quarantineCalls are outbox.Quarantine's calls of an observed store.
type quarantineCalls struct{ s *observed }

// readerCalls are outbox.CoverageReader's and outbox.LeaseReader's calls
// of an observed store.
type readerCalls struct{ s *observed }

// The observed stores by what they serve beside outbox.Store.
type (
	observedQuarantine struct {
		*observed
		quarantineCalls
	}
	observedReaders struct {
		*observed
		readerCalls
	}
	observedAll struct {
		*observed
		quarantineCalls
		readerCalls
	}
)

var (
	_ outbox.Store          = (*observed)(nil)
	_ outbox.Quarantine     = observedQuarantine{}
	_ outbox.CoverageReader = observedReaders{}
	_ outbox.LeaseReader    = observedReaders{}
	_ outbox.Quarantine     = observedAll{}
	_ outbox.CoverageReader = observedAll{}
	_ outbox.LeaseReader    = observedAll{}
)

// run makes call c through o.Call; do makes it through the call's Func and
// stores its results, which zero resets when Call returned another error.
func (s *observed) run(ctx context.Context, c StoreCall, do func(context.Context) error, zero func()) error {
	if s.o.Call == nil {
		return do(ctx)
	}
	var inner error
	ran := false
	err := s.o.Call(ctx, c, func(ctx context.Context) error {
		ran = true
		inner = do(ctx)
		return inner
	})
	if !ran || err != nil && (inner == nil || !errors.Is(err, inner)) {
		zero()
	}
	return err
}

// BucketCount is the store's.
func (s *observed) BucketCount() int { return s.o.Store.BucketCount() }

func (s *observed) Heartbeat(ctx context.Context, relayID string, now time.Time, keepsAhead bool) (recorded bool, err error) {
	err = s.run(ctx, StoreCall{Method: "Heartbeat", Bucket: -1}, func(ctx context.Context) (err error) {
		if f := s.o.HeartbeatFunc; f != nil {
			recorded, err = f(ctx, relayID, now, keepsAhead, s.o.Store.Heartbeat)
		} else {
			recorded, err = s.o.Store.Heartbeat(ctx, relayID, now, keepsAhead)
		}
		return err
	}, func() { recorded = false })
	return recorded, err
}

func (s *observed) Snapshot(ctx context.Context) (view lease.Coordination, err error) {
	err = s.run(ctx, StoreCall{Method: "Snapshot", Bucket: -1}, func(ctx context.Context) (err error) {
		if f := s.o.SnapshotFunc; f != nil {
			view, err = f(ctx, s.o.Store.Snapshot)
		} else {
			view, err = s.o.Store.Snapshot(ctx)
		}
		return err
	}, func() { view = lease.Coordination{} })
	return view, err
}

func (s *observed) Heartbeats(ctx context.Context) (relays []lease.RelayState, err error) {
	err = s.run(ctx, StoreCall{Method: "Heartbeats", Bucket: -1}, func(ctx context.Context) (err error) {
		if f := s.o.HeartbeatsFunc; f != nil {
			relays, err = f(ctx, s.o.Store.Heartbeats)
		} else {
			relays, err = s.o.Store.Heartbeats(ctx)
		}
		return err
	}, func() { relays = nil })
	return relays, err
}

func (s *observed) WriteLeases(ctx context.Context, relayID string, op lease.Op, writes []lease.Write) (accepted, refused []int, err error) {
	err = s.run(ctx, StoreCall{Method: "WriteLeases", Bucket: -1}, func(ctx context.Context) (err error) {
		if f := s.o.WriteLeasesFunc; f != nil {
			accepted, refused, err = f(ctx, relayID, op, writes, s.o.Store.WriteLeases)
		} else {
			accepted, refused, err = s.o.Store.WriteLeases(ctx, relayID, op, writes)
		}
		return err
	}, func() { accepted, refused = nil, nil })
	return accepted, refused, err
}

// Prune answers with no refused delete when Call refuses it: pruning is
// housekeeping, whose failures a store logs and never returns.
func (s *observed) Prune(ctx context.Context, relayID string, p lease.PruneWrite) (refused int) {
	_ = s.run(ctx, StoreCall{Method: "Prune", Bucket: -1}, func(ctx context.Context) error {
		if f := s.o.PruneFunc; f != nil {
			refused = f(ctx, relayID, p, s.o.Store.Prune)
		} else {
			refused = s.o.Store.Prune(ctx, relayID, p)
		}
		return nil
	}, func() { refused = 0 })
	return refused
}

func (s *observed) ReleaseLeases(ctx context.Context, relayID string) (rel lease.Release, err error) {
	err = s.run(ctx, StoreCall{Method: "ReleaseLeases", Bucket: -1}, func(ctx context.Context) (err error) {
		if f := s.o.ReleaseLeasesFunc; f != nil {
			rel, err = f(ctx, relayID, s.o.Store.ReleaseLeases)
		} else {
			rel, err = s.o.Store.ReleaseLeases(ctx, relayID)
		}
		return err
	}, func() { rel = lease.Release{} })
	return rel, err
}

func (s *observed) ReadCoordination(ctx context.Context) (view lease.Coordination, err error) {
	err = s.run(ctx, StoreCall{Method: "ReadCoordination", Bucket: -1}, func(ctx context.Context) (err error) {
		if f := s.o.ReadCoordinationFunc; f != nil {
			view, err = f(ctx, s.o.Store.ReadCoordination)
		} else {
			view, err = s.o.Store.ReadCoordination(ctx)
		}
		return err
	}, func() { view = lease.Coordination{} })
	return view, err
}

func (s *observed) PendingBuckets(ctx context.Context, buckets []int) (pending []int, err error) {
	err = s.run(ctx, StoreCall{Method: "PendingBuckets", Bucket: -1}, func(ctx context.Context) (err error) {
		if f := s.o.PendingBucketsFunc; f != nil {
			pending, err = f(ctx, buckets, s.o.Store.PendingBuckets)
		} else {
			pending, err = s.o.Store.PendingBuckets(ctx, buckets)
		}
		return err
	}, func() { pending = nil })
	return pending, err
}

func (s *observed) FetchBatch(ctx context.Context, bucket, max int) (msgs []outbox.Message, err error) {
	err = s.run(ctx, StoreCall{Method: "FetchBatch", Bucket: bucket}, func(ctx context.Context) (err error) {
		if f := s.o.FetchBatchFunc; f != nil {
			msgs, err = f(ctx, bucket, max, s.o.Store.FetchBatch)
		} else {
			msgs, err = s.o.Store.FetchBatch(ctx, bucket, max)
		}
		return err
	}, func() { msgs = nil })
	return msgs, err
}

func (s *observed) MarkPublished(ctx context.Context, bucket int, msgs []outbox.Message) error {
	return s.run(ctx, StoreCall{Method: "MarkPublished", Bucket: bucket}, func(ctx context.Context) error {
		if f := s.o.MarkPublishedFunc; f != nil {
			return f(ctx, bucket, msgs, s.o.Store.MarkPublished)
		}
		return s.o.Store.MarkPublished(ctx, bucket, msgs)
	}, func() {})
}

func (s *observed) Backlog(ctx context.Context) (bl outbox.Backlog, err error) {
	err = s.run(ctx, StoreCall{Method: "Backlog", Bucket: -1}, func(ctx context.Context) (err error) {
		if f := s.o.BacklogFunc; f != nil {
			bl, err = f(ctx, s.o.Store.Backlog)
		} else {
			bl, err = s.o.Store.Backlog(ctx)
		}
		return err
	}, func() { bl = outbox.Backlog{} })
	return bl, err
}

func (r readerCalls) ReadCoverage(ctx context.Context, buckets []int) (view lease.Coordination, partial bool, err error) {
	inner := r.s.o.Store.(outbox.CoverageReader).ReadCoverage
	err = r.s.run(ctx, StoreCall{Method: "ReadCoverage", Bucket: -1}, func(ctx context.Context) (err error) {
		if f := r.s.o.ReadCoverageFunc; f != nil {
			view, partial, err = f(ctx, buckets, inner)
		} else {
			view, partial, err = inner(ctx, buckets)
		}
		return err
	}, func() { view, partial = lease.Coordination{}, false })
	return view, partial, err
}

func (r readerCalls) ReadLeases(ctx context.Context, buckets []int) (leases []lease.State, err error) {
	inner := r.s.o.Store.(outbox.LeaseReader).ReadLeases
	err = r.s.run(ctx, StoreCall{Method: "ReadLeases", Bucket: -1}, func(ctx context.Context) (err error) {
		if f := r.s.o.ReadLeasesFunc; f != nil {
			leases, err = f(ctx, buckets, inner)
		} else {
			leases, err = inner(ctx, buckets)
		}
		return err
	}, func() { leases = nil })
	return leases, err
}

func (q quarantineCalls) ParkedKeys(ctx context.Context, bucket int) (set outbox.ParkedSet, err error) {
	inner := q.s.o.Store.(outbox.Quarantine).ParkedKeys
	err = q.s.run(ctx, StoreCall{Method: "ParkedKeys", Bucket: bucket}, func(ctx context.Context) (err error) {
		if f := q.s.o.ParkedKeysFunc; f != nil {
			set, err = f(ctx, bucket, inner)
		} else {
			set, err = inner(ctx, bucket)
		}
		return err
	}, func() { set = outbox.ParkedSet{} })
	return set, err
}

func (q quarantineCalls) Park(ctx context.Context, p outbox.Parking) error {
	inner := q.s.o.Store.(outbox.Quarantine).Park
	return q.s.run(ctx, StoreCall{Method: "Park", Bucket: p.Bucket}, func(ctx context.Context) error {
		if f := q.s.o.ParkFunc; f != nil {
			return f(ctx, p, inner)
		}
		return inner(ctx, p)
	}, func() {})
}

func (q quarantineCalls) ReplayRequests(ctx context.Context) (reqs map[int]int64, err error) {
	inner := q.s.o.Store.(outbox.Quarantine).ReplayRequests
	err = q.s.run(ctx, StoreCall{Method: "ReplayRequests", Bucket: -1}, func(ctx context.Context) (err error) {
		if f := q.s.o.ReplayRequestsFunc; f != nil {
			reqs, err = f(ctx, inner)
		} else {
			reqs, err = inner(ctx)
		}
		return err
	}, func() { reqs = nil })
	return reqs, err
}

func (q quarantineCalls) DeleteReplayed(ctx context.Context, bucket int, msgs []outbox.Message) error {
	inner := q.s.o.Store.(outbox.Quarantine).DeleteReplayed
	return q.s.run(ctx, StoreCall{Method: "DeleteReplayed", Bucket: bucket}, func(ctx context.Context) error {
		if f := q.s.o.DeleteReplayedFunc; f != nil {
			return f(ctx, bucket, msgs, inner)
		}
		return inner(ctx, bucket, msgs)
	}, func() {})
}

func (q quarantineCalls) RefuseReplay(ctx context.Context, bucket int, seq int64, reason string) error {
	inner := q.s.o.Store.(outbox.Quarantine).RefuseReplay
	return q.s.run(ctx, StoreCall{Method: "RefuseReplay", Bucket: bucket}, func(ctx context.Context) error {
		if f := q.s.o.RefuseReplayFunc; f != nil {
			return f(ctx, bucket, seq, reason, inner)
		}
		return inner(ctx, bucket, seq, reason)
	}, func() {})
}

func (q quarantineCalls) ReplayDone(ctx context.Context, bucket int, request int64) error {
	inner := q.s.o.Store.(outbox.Quarantine).ReplayDone
	return q.s.run(ctx, StoreCall{Method: "ReplayDone", Bucket: bucket}, func(ctx context.Context) error {
		if f := q.s.o.ReplayDoneFunc; f != nil {
			return f(ctx, bucket, request, inner)
		}
		return inner(ctx, bucket, request)
	}, func() {})
}

package outbox

import (
	"context"

	"github.com/spillway-dev/spillway/outbox/lease"
)

// CoverageReader is a Store that can read, for a trust check, only what
// decides it in the common case: every heartbeat and the leases of the
// checked buckets, instead of the whole coordination partition (one lease
// item per bucket). Stores that do not implement it are read whole.
type CoverageReader interface {
	// ReadCoverage returns a view (ReadAt set) of every heartbeat and of
	// the leases of buckets, with partial true; or, when the store judges
	// that partial read no cheaper than the whole partition (few buckets
	// in all), the whole view with partial false.
	ReadCoverage(ctx context.Context, buckets []int) (view lease.Coordination, partial bool, err error)
}

// readUncovered is the trust check of req.RelayID against store: which
// buckets of bs (ascending, within [0, req.BucketCount)) no live peer
// covers (lease.Coordination.Uncovered) once the read returns, on clock. A
// CoverageReader's partial view settles it when a live peer holds every
// bucket of bs, which is what a wake-up usually finds under traffic; else,
// since the claiming rule needs every lease, the whole partition is read.
// The answer is the one a whole read at the same instant gives.
func readUncovered(ctx context.Context, store Store, clock Clock, req lease.Request, bs []int) (lease.Coverage, error) {
	if cr, ok := store.(CoverageReader); ok {
		view, partial, err := cr.ReadCoverage(ctx, bs)
		if err != nil {
			return lease.Coverage{}, err
		}
		now := clock.Now()
		if !partial {
			return view.Uncovered(bs, req, now), nil
		}
		if len(view.Unheld(bs, req.RelayID, now, req.LeaseDuration)) == 0 {
			return lease.Coverage{}, nil
		}
	}
	view, err := store.ReadCoordination(ctx)
	if err != nil {
		return lease.Coverage{}, err
	}
	return view.Uncovered(bs, req, clock.Now()), nil
}

// readUnheld is the trust check without the claiming inference: the
// buckets of bs that no live peer of req.RelayID holds (lease.Coordination.Unheld)
// once the read returns, on clock. A continuation wake-up and the idle-exit
// decision use it: a bucket a stopping relay released with work left, or
// pending work the relay would leave for the schedule, must not wait on a
// claim that was only inferred. A CoverageReader's partial view suffices.
func readUnheld(ctx context.Context, store Store, clock Clock, req lease.Request, bs []int) ([]int, error) {
	var view lease.Coordination
	var err error
	if cr, ok := store.(CoverageReader); ok {
		view, _, err = cr.ReadCoverage(ctx, bs)
	} else {
		view, err = store.ReadCoordination(ctx)
	}
	if err != nil {
		return nil, err
	}
	return view.Unheld(bs, req.RelayID, clock.Now(), req.LeaseDuration), nil
}

// LeaseReader is a Store that can read some buckets' leases alone: one
// strongly consistent read of one bucket's lease item, instead of the
// whole coordination partition. Stores that do not implement it are read
// whole.
type LeaseReader interface {
	// ReadLeases returns the lease items of buckets, ascending by bucket;
	// buckets never claimed are absent.
	ReadLeases(ctx context.Context, buckets []int) ([]lease.State, error)
}

// confirmClaims reads the leases of the buckets a trust check left to a
// claiming peer (Coverage.Claimed) again, strongly consistent, and returns
// those still free once the read returns, on clock: no owner, expired, or
// named after relayID. The caller reads them once lease.ClaimWindow has passed
// since the trust check, when a claim the peer's round made has landed; a
// bucket still free was not being claimed after all (the heartbeat that
// suggested it was stamped by a clock behind the release), and the relay
// takes part for it instead of leaving the commit to the peer's next round
// or the schedule.
func confirmClaims(ctx context.Context, store Store, clock Clock, relayID string, bs []int) ([]int, error) {
	if len(bs) == 0 {
		return nil, nil
	}
	var leases []lease.State
	if lr, ok := store.(LeaseReader); ok {
		var err error
		if leases, err = lr.ReadLeases(ctx, bs); err != nil {
			return nil, err
		}
	} else {
		view, err := store.ReadCoordination(ctx)
		if err != nil {
			return nil, err
		}
		leases = view.Leases
	}
	now := clock.Now()
	held := map[int]bool{}
	for _, l := range leases {
		if l.Owner != "" && l.Owner != relayID && !l.Expired(now) {
			held[l.Bucket] = true
		}
	}
	var out []int
	for _, b := range bs {
		if !held[b] {
			out = append(out, b)
		}
	}
	return out, nil
}

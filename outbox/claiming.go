package outbox

import (
	"context"
	"time"
)

// Coverage is what a trust check found for some buckets.
type Coverage struct {
	// Uncovered lists the buckets no live peer covers, ascending: the
	// relay takes part in the fleet for them.
	Uncovered []int
	// Claimed lists the free buckets left to a live peer only because its
	// round is taken to be claiming them, ascending: an inference from the
	// peer's heartbeat, which ConfirmClaims checks.
	Claimed []int
}

// Uncovered returns the buckets of bs (ascending, within [0,
// req.BucketCount)) that no live peer of req.RelayID covers at now: a
// bucket is covered while a live peer holds an unexpired lease on it
// (HeldUntil), or while it is free and a peer is claiming it — the claim
// simulation every relay runs (PlanLeases) over the live peers gives it to
// a peer whose heartbeat stands for a claim of it (claimInferred, the
// trust window's claim rule). A
// lease that names req.RelayID is never covered: the relay resumes it.
func (c Coordination) Uncovered(bs []int, req LeaseRequest, now time.Time) Coverage {
	claiming := c.beingClaimed(req, now)
	mine := c.owned(req.RelayID)
	var cov Coverage
	for _, b := range c.Unheld(bs, req.RelayID, now, req.LeaseDuration) {
		if mine[b] || !claiming[b] {
			cov.Uncovered = append(cov.Uncovered, b)
		} else {
			cov.Claimed = append(cov.Claimed, b)
		}
	}
	return cov
}

// beingClaimed returns the free buckets a live peer of req.RelayID is
// claiming at now (see Uncovered).
func (c Coordination) beingClaimed(req LeaseRequest, now time.Time) map[int]bool {
	bucketCount, lease := req.BucketCount, req.LeaseDuration
	skew := KeepMargin(lease, req.RenewInterval)
	seen := map[string]time.Time{}
	var peers []string
	for _, r := range c.Relays {
		if r.RelayID != "" && r.RelayID != req.RelayID && r.Active(now, lease) {
			peers = append(peers, r.RelayID)
			seen[r.RelayID] = r.LastSeen
		}
	}
	if len(peers) == 0 {
		return nil
	}
	free := make([]bool, bucketCount)
	for b := range free {
		free[b] = true
	}
	freedAt := make([]time.Time, bucketCount)
	held := map[string]int{}
	for _, l := range c.Leases {
		if l.Bucket < 0 || l.Bucket >= bucketCount {
			continue
		}
		if l.Owner != "" && !l.Expired(now) {
			free[l.Bucket] = false
			held[l.Owner]++
		}
		freedAt[l.Bucket] = l.ExpiresAt
	}
	fs, err := FairShares(bucketCount, peers, peers[0], held)
	if err != nil {
		return nil
	}
	out := map[int]bool{}
	for k, claims := range simulateClaims(fs, held, free) {
		last, ok := seen[fs.Relays[k]]
		if !ok {
			continue
		}
		for _, b := range claims {
			if claimInferred(last, freedAt[b], now, skew) {
				out[b] = true
			}
		}
	}
	return out
}

// CoverageReader is a Store that can read, for a trust check, only what
// decides it in the common case: every heartbeat and the leases of the
// checked buckets, instead of the whole coordination partition (one lease
// item per bucket). Stores that do not implement it are read whole.
type CoverageReader interface {
	// ReadCoverage returns a view (ReadAt set) of every heartbeat and of
	// the leases of buckets, with partial true; or, when the store judges
	// that partial read no cheaper than the whole partition (few buckets
	// in all), the whole view with partial false.
	ReadCoverage(ctx context.Context, buckets []int) (view Coordination, partial bool, err error)
}

// ReadUncovered is the trust check of req.RelayID against store: which
// buckets of bs (ascending, within [0, req.BucketCount)) no live peer
// covers (Coordination.Uncovered) once the read returns, on clock. A
// CoverageReader's partial view settles it when a live peer holds every
// bucket of bs, which is what a wake-up usually finds under traffic; else,
// since the claiming rule needs every lease, the whole partition is read.
// The answer is the one a whole read at the same instant gives.
func ReadUncovered(ctx context.Context, store Store, clock Clock, req LeaseRequest, bs []int) (Coverage, error) {
	if cr, ok := store.(CoverageReader); ok {
		view, partial, err := cr.ReadCoverage(ctx, bs)
		if err != nil {
			return Coverage{}, err
		}
		now := clock.Now()
		if !partial {
			return view.Uncovered(bs, req, now), nil
		}
		if len(view.Unheld(bs, req.RelayID, now, req.LeaseDuration)) == 0 {
			return Coverage{}, nil
		}
	}
	view, err := store.ReadCoordination(ctx)
	if err != nil {
		return Coverage{}, err
	}
	return view.Uncovered(bs, req, clock.Now()), nil
}

// ReadUnheld is the trust check without the claiming inference: the
// buckets of bs that no live peer of req.RelayID holds (Coordination.Unheld)
// once the read returns, on clock. A continuation wake-up and the idle-exit
// decision use it: a bucket a stopping relay released with work left, or
// pending work the relay would leave for the schedule, must not wait on a
// claim that was only inferred. A CoverageReader's partial view suffices.
func ReadUnheld(ctx context.Context, store Store, clock Clock, req LeaseRequest, bs []int) ([]int, error) {
	var view Coordination
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
	ReadLeases(ctx context.Context, buckets []int) ([]LeaseState, error)
}

// ConfirmClaims reads the leases of the buckets a trust check left to a
// claiming peer (Coverage.Claimed) again, strongly consistent, and returns
// those still free once the read returns, on clock: no owner, expired, or
// named after relayID. The caller reads them once ClaimWindow has passed
// since the trust check, when a claim the peer's round made has landed; a
// bucket still free was not being claimed after all (the heartbeat that
// suggested it was stamped by a clock behind the release), and the relay
// takes part for it instead of leaving the commit to the peer's next round
// or the schedule.
func ConfirmClaims(ctx context.Context, store Store, clock Clock, relayID string, bs []int) ([]int, error) {
	if len(bs) == 0 {
		return nil, nil
	}
	var leases []LeaseState
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

// Unheld returns the buckets of bs that no live peer of relayID holds in
// the view (HeldUntil; a lease that names relayID counts as unheld): a
// superset of Uncovered's answer, which needs only the leases of bs and
// the heartbeats.
func (c Coordination) Unheld(bs []int, relayID string, now time.Time, lease time.Duration) []int {
	held, mine := c.HeldUntil(now, lease), c.owned(relayID)
	var out []int
	for _, b := range bs {
		if _, ok := held[b]; mine[b] || !ok {
			out = append(out, b)
		}
	}
	return out
}

// owned returns the buckets whose lease names relayID, expired or not.
func (c Coordination) owned(relayID string) map[int]bool {
	mine := map[int]bool{}
	for _, l := range c.Leases {
		if l.Owner == relayID {
			mine[l.Bucket] = true
		}
	}
	return mine
}

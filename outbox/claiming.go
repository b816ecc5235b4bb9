package outbox

import (
	"context"
	"time"
)

// ClaimWindow is how long after a live peer's heartbeat a free bucket its
// round would claim counts as being claimed: a round writes its heartbeat,
// reads, and sends its claims within it. A trust check that finds a hinted
// bucket free but being claimed leaves it to that peer instead of joining:
// in a burst the relays woken together would otherwise all join, plan
// different shares from different views and refuse each other's claims.
const ClaimWindow = time.Second

// Uncovered returns the buckets of bs (ascending, within [0, bucketCount))
// that no live peer of relayID covers at now: a bucket is covered while a
// live peer holds an unexpired lease on it (HeldUntil), or while it is free
// and a peer is claiming it — the claim simulation every relay runs
// (PlanLeases) over the live peers gives it to a peer whose heartbeat is
// younger than ClaimWindow and not older than the moment the bucket became
// free (its stored expiry), so the peer's round read it free. A lease that
// names relayID is never covered: the relay resumes it.
func (c Coordination) Uncovered(bs []int, relayID string, bucketCount int, now time.Time, lease time.Duration) []int {
	claiming := c.beingClaimed(relayID, bucketCount, now, lease)
	mine := c.owned(relayID)
	var out []int
	for _, b := range c.unheld(bs, relayID, now, lease) {
		if mine[b] || !claiming[b] {
			out = append(out, b)
		}
	}
	return out
}

// beingClaimed returns the free buckets a live peer of relayID is claiming
// at now (see Uncovered).
func (c Coordination) beingClaimed(relayID string, bucketCount int, now time.Time, lease time.Duration) map[int]bool {
	seen := map[string]time.Time{}
	var peers []string
	for _, r := range c.Relays {
		if r.RelayID != "" && r.RelayID != relayID && r.Active(now, lease) {
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
		if !ok || now.Sub(last) >= ClaimWindow {
			continue
		}
		for _, b := range claims {
			if !last.Before(freedAt[b]) {
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

// ReadUncovered is the trust check of relayID against store: the buckets of
// bs (ascending, within [0, bucketCount)) that no live peer covers
// (Coordination.Uncovered) once the read returns, on clock. A
// CoverageReader's partial view settles it when a live peer holds every
// bucket of bs, which is what a wake-up usually finds under traffic; else,
// since the claiming rule needs every lease, the whole partition is read.
// The answer is the one a whole read at the same instant gives.
func ReadUncovered(ctx context.Context, store Store, clock Clock, bs []int, relayID string, bucketCount int, lease time.Duration) ([]int, error) {
	if cr, ok := store.(CoverageReader); ok {
		view, partial, err := cr.ReadCoverage(ctx, bs)
		if err != nil {
			return nil, err
		}
		now := clock.Now()
		if !partial {
			return view.Uncovered(bs, relayID, bucketCount, now, lease), nil
		}
		if len(view.unheld(bs, relayID, now, lease)) == 0 {
			return nil, nil
		}
	}
	view, err := store.ReadCoordination(ctx)
	if err != nil {
		return nil, err
	}
	return view.Uncovered(bs, relayID, bucketCount, clock.Now(), lease), nil
}

// unheld returns the buckets of bs that no live peer of relayID holds in
// the view: a superset of Uncovered's answer, which needs only the leases
// of bs and the heartbeats.
func (c Coordination) unheld(bs []int, relayID string, now time.Time, lease time.Duration) []int {
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

package lease

import "time"

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
// a peer whose heartbeat is younger than ClaimWindow and not older than
// the moment the bucket became free (its stored expiry), so the peer's
// round read it free (claimInferred, the trust window's claim rule). A
// lease that names req.RelayID is never covered: the relay resumes it.
func (c Coordination) Uncovered(bs []int, req Request, now time.Time) Coverage {
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
func (c Coordination) beingClaimed(req Request, now time.Time) map[int]bool {
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

package outbox

import (
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
	held := c.HeldUntil(now, lease)
	claiming := c.beingClaimed(relayID, bucketCount, now, lease)
	mine := map[int]bool{}
	for _, l := range c.Leases {
		if l.Owner == relayID {
			mine[l.Bucket] = true
		}
	}
	var out []int
	for _, b := range bs {
		if _, ok := held[b]; mine[b] || !ok && !claiming[b] {
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

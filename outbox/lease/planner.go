package lease

import "slices"

// BucketLease is one bucket's lease as a relay read it for planning.
type BucketLease struct {
	// Owner is the relay the lease names; empty when nobody holds it.
	Owner string
	// Expired reports that the lease's expiry is at or before the reader's
	// now.
	Expired bool
}

// Plan is what one relay should write in an acquisition round. It
// orders writes; it never grants ownership: the conditional writes do.
type Plan struct {
	// Keep lists owned buckets to renew, ascending.
	Keep []int
	// Release lists owned buckets to hand back, ascending.
	Release []int
	// Claim lists free buckets to take, ascending.
	Claim []int
	// StandbyRank is -1 when the relay has a share or owns a lease,
	// otherwise its 0-based place in the standby queue.
	StandbyRank int
	// Shares holds every relay's share, the requester included.
	Shares map[string]int
}

// PlanLeases plans the requester's keeps, releases and claims from one read
// of the leases (leases[b] is bucket b's lease). Every relay that reads the
// same state computes the same shares and disjoint claims, so a fleet that
// agrees on its membership makes no refused write. The rules:
//
//  1. A bucket is free when it has no owner, or when its lease expired and
//     names another relay. The requester's own expired leases count as held
//     and owned (nobody took them, so it may keep them). A live lease of a
//     relay missing from active is not free: its holder may still be
//     working.
//  2. Shares come from FairShares over active plus the requester, with the
//     held counts of step 1.
//  3. Owned buckets inside the requester's range come first, then the rest
//     ascending; the first min(owned, share) are kept and the others
//     released. An over-share relay so hands back what lies outside its
//     range first, and a bucket held outside the range is kept rather than
//     swapped for a free one inside it.
//  4. Claims simulate every relay's claims in rank order: each relay's
//     deficit is max(0, share - held). Phase 1 lets each relay take free
//     buckets of its own range; phase 2 walks one cursor from bucket 0 over
//     the relays in rank order, each taking free buckets while short. The
//     requester claims what the simulation gave it.
//  5. StandbyRank is -1 when the requester has a share or owns a lease,
//     otherwise the number of lower-ranked relays without a share.
//
// Errors are misconfigurations: len(leases) != bucketCount, an empty
// requester, and whatever FairShares rejects.
func PlanLeases(bucketCount int, active []string, requester string, leases []BucketLease) (Plan, error) {
	const op = "plan leases"
	if requester == "" {
		return Plan{}, Misconfigured(op, "requester id is empty")
	}
	if len(leases) != bucketCount {
		return Plan{}, Misconfigured(op, "read %d lease states for %d buckets", len(leases), bucketCount)
	}
	free := make([]bool, bucketCount)
	held := make(map[string]int)
	var owned []int
	for b, l := range leases {
		if l.Owner == "" || (l.Expired && l.Owner != requester) {
			free[b] = true
			continue
		}
		held[l.Owner]++
		if l.Owner == requester {
			owned = append(owned, b)
		}
	}
	fs, err := FairShares(bucketCount, active, requester, held)
	if err != nil {
		return Plan{}, err
	}
	me := fs.Rank(requester)
	share := fs.Shares[me]
	start, end := fs.Range(requester)

	plan := Plan{StandbyRank: -1, Shares: fs.ShareMap()}
	inRange := func(b int) bool { return b >= start && b < end }
	// owned is ascending already; a stable partition keeps that order
	// within each half.
	slices.SortStableFunc(owned, func(a, b int) int { return boolRank(inRange(a)) - boolRank(inRange(b)) })
	keepCount := min(len(owned), share)
	plan.Keep = slices.Sorted(slices.Values(owned[:keepCount]))
	plan.Release = slices.Sorted(slices.Values(owned[keepCount:]))

	if keepCount < share && slices.Contains(free, true) {
		plan.Claim = simulateClaims(fs, held, free)[me]
	}
	if share == 0 && len(owned) == 0 {
		plan.StandbyRank = fs.StandbyRank(requester)
	}
	return plan, nil
}

// boolRank sorts true before false.
func boolRank(inside bool) int {
	if inside {
		return 0
	}
	return 1
}

// simulateClaims runs the claims of every relay in fs over free (which it
// consumes) and returns each rank's claimed buckets, ascending. It is
// deterministic in its inputs, which is the whole point: each relay runs it
// for everybody and writes only its own part.
func simulateClaims(fs FairShare, held map[string]int, free []bool) [][]int {
	deficit := make([]int, len(fs.Relays))
	for k, id := range fs.Relays {
		deficit[k] = max(0, fs.Shares[k]-held[id])
	}
	claims := make([][]int, len(fs.Relays))
	take := func(k, b int) {
		free[b] = false
		deficit[k]--
		claims[k] = append(claims[k], b)
	}
	for k := range fs.Relays {
		for b := fs.Starts[k]; b < fs.Starts[k]+fs.Shares[k] && deficit[k] > 0; b++ {
			if free[b] {
				take(k, b)
			}
		}
	}
	cursor := 0
	for k := range fs.Relays {
		for ; cursor < len(free) && deficit[k] > 0; cursor++ {
			if free[cursor] {
				take(k, cursor)
			}
		}
	}
	for k := range claims {
		slices.Sort(claims[k])
	}
	return claims
}

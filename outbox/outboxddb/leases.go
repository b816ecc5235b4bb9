package outboxddb

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
)

// Lease protocol constants of the table contract.
const (
	// pruneEvery: stale heartbeat records are pruned on the first round of a
	// store and on every pruneEvery-th round after it.
	pruneEvery = 10
	// deadAfterLeases: a non-stopped heartbeat older than this many lease
	// durations is pruned.
	deadAfterLeases = 10
	// maxReleasePasses bounds the read-and-release passes of a graceful stop.
	maxReleasePasses = 3
)

// standbyState remembers that the relay was a distant standby: behind one
// first-in-line standby per bucket, so it may skip every other round.
type standbyState struct {
	relayID  string
	since    int64 // ticks of the full round that made it one
	lastCall int64 // ticks of the latest acquisition call
	rank     int
}

// AcquireLeases runs one acquisition round for req.RelayID:
//
//  1. a distant standby rests (no request at all) every other round;
//  2. heartbeat, conditional on moving forward;
//  3. one strongly consistent read of every lease and heartbeat;
//  4. the shared plan (outbox.PlanLeases) of who keeps, releases and
//     claims what, so relays that read the same state write disjoint leases;
//  5. keep the relay's own leases (not sent when the stored expiry is later
//     than this round's: the host clock went back), release what exceeds its
//     share, claim what the plan gives it (skipped when the heartbeat was
//     refused);
//  6. on the store's first round and every 10th, prune stale heartbeat
//     records; a prune failure is logged and does not fail the round.
//
// A bucket count that differs from the store's is a misconfiguration. A
// write error other than a refusal fails the round: the relay should then
// treat its ownership as unknown.
func (s *Store) AcquireLeases(ctx context.Context, req outbox.LeaseRequest) (outbox.Acquisition, error) {
	const op = "acquire leases"
	if req.BucketCount != s.opts.BucketCount {
		return outbox.Acquisition{}, outbox.Misconfigured(op,
			"the relay's bucket count %d differs from the store's %d; writers, store and relays must use one count", req.BucketCount, s.opts.BucketCount)
	}
	if err := checkLeaseRequest(op, req); err != nil {
		return outbox.Acquisition{}, err
	}
	relayID, n := req.RelayID, s.opts.BucketCount
	now := s.now()
	lease := durationTicks(req.LeaseDuration)
	expiry := now + lease

	if rank, rest := s.rest(relayID, now, lease); rest {
		return outbox.Acquisition{StandbyRank: rank, Rested: true}, nil
	}

	acq := outbox.Acquisition{StandbyRank: -1}
	recorded, err := s.heartbeat(ctx, relayID, now)
	if err != nil {
		return outbox.Acquisition{}, err
	}
	if !recorded {
		acq.HeartbeatRefused = true
		acq.Refused++
		s.log.WarnContext(ctx, "outboxddb: heartbeat refused: a later heartbeat of this relay is stored (host clock set back?); claiming nothing this round",
			"relayId", relayID)
	}

	items, err := s.readCoordinationItems(ctx, "")
	if err != nil {
		return outbox.Acquisition{}, err
	}
	leases, relays := s.keys.coordinationItems(items)
	active, stale := classifyRelays(relays, now, lease)
	state := make([]outbox.BucketLease, n)
	seen := make([]int64, n)
	for _, l := range leases {
		// Lease items beyond the count are left over from a larger count.
		if l.bucket >= n {
			continue
		}
		seen[l.bucket] = l.expires
		state[l.bucket] = outbox.BucketLease{Owner: l.owner, Expired: l.expires <= now}
	}
	plan, err := outbox.PlanLeases(n, active, relayID, state)
	if err != nil {
		return outbox.Acquisition{}, fmt.Errorf("outboxddb: %s for relay %q: %w", op, relayID, err)
	}
	acq.StandbyRank = plan.StandbyRank
	me := str(relayID)

	keep := make([]int, 0, len(plan.Keep))
	for _, b := range plan.Keep {
		if seen[b] > expiry {
			// Renewing would move the expiry backwards. The lease still
			// names this relay, so no peer takes it; it is kept again once
			// the clock has caught up, or claimed afresh after it lapses.
			s.log.WarnContext(ctx, "outboxddb: not renewing a lease that expires later than this round's expiry (host clock set back?); not publishing the bucket until the clock catches up",
				"relayId", relayID, "bucket", b, "storedExpiry", seen[b], "expiry", expiry)
			continue
		}
		keep = append(keep, b)
	}
	kept, lost, err := s.updateLeases(ctx, relayID, OpKeep, keep, func(b int) *dynamodb.UpdateItemInput {
		return s.leaseUpdate(b, exprSetExpiry, exprKeepCondition,
			map[string]types.AttributeValue{":me": me, ":seen": num(seen[b]), ":expiry": num(expiry)})
	})
	if err != nil {
		return outbox.Acquisition{}, err
	}
	for _, b := range lost {
		s.log.InfoContext(ctx, "outboxddb: no longer owns bucket", "relayId", relayID, "bucket", b)
	}
	acq.Owned, acq.Lost = kept, lost
	acq.Refused += len(lost)

	released, refused, err := s.updateLeases(ctx, relayID, OpRelease, plan.Release, func(b int) *dynamodb.UpdateItemInput {
		return s.leaseUpdate(b, exprRelease, exprReleaseCondition,
			map[string]types.AttributeValue{":me": me, ":seen": num(seen[b]), ":now": num(now)})
	})
	if err != nil {
		return outbox.Acquisition{}, err
	}
	acq.Released = released
	acq.Refused += len(refused)

	switch {
	case recorded:
		claimed, refused, err := s.updateLeases(ctx, relayID, OpClaim, plan.Claim, func(b int) *dynamodb.UpdateItemInput {
			return s.leaseUpdate(b, exprClaim, exprClaimCondition,
				map[string]types.AttributeValue{":me": me, ":now": num(now), ":expiry": num(expiry)})
		})
		if err != nil {
			return outbox.Acquisition{}, err
		}
		for _, b := range refused {
			s.log.DebugContext(ctx, "outboxddb: claim refused: a peer claimed the bucket first", "relayId", relayID, "bucket", b)
		}
		acq.Claimed = claimed
		acq.Owned = append(acq.Owned, claimed...)
		acq.Refused += len(refused)
	case len(plan.Claim) > 0:
		// A lease claimed with a clock that is behind would expire early on
		// the peers' clocks.
		s.log.WarnContext(ctx, "outboxddb: claiming nothing while the heartbeat is refused", "relayId", relayID, "plannedClaims", plan.Claim)
	}
	slices.Sort(acq.Owned)

	s.mu.Lock()
	s.rounds++
	prune := s.rounds == 1 || s.rounds%pruneEvery == 0
	s.mu.Unlock()
	if prune {
		acq.Refused += s.prune(ctx, relayID, stale, now, lease)
	}

	s.noteStandby(ctx, relayID, recorded && plan.StandbyRank >= n, plan.StandbyRank, now)
	return acq, nil
}

// classifyRelays splits heartbeat records into the active relays (counted
// towards fair share) and the stale ones (to prune). A relay is active while
// it is not stopped and its heartbeat is younger than a lease: it stops
// counting on the very tick its leases, written in the same round, expire.
func classifyRelays(relays []relayRecord, now, lease int64) (active, stale []string) {
	for _, r := range relays {
		switch {
		case !r.stopped && r.lastSeen > now-lease:
			active = append(active, r.id)
		case r.stopped && r.lastSeen < now-lease:
			stale = append(stale, r.id)
		case !r.stopped && r.lastSeen < now-deadAfterLeases*lease:
			stale = append(stale, r.id)
		}
	}
	return active, stale
}

// prune deletes stale heartbeat records and returns how many deletes were
// refused (the relay came back). The attribute_not_exists branch lets
// several relays prune the same record without a refusal. Other errors are
// logged, not returned: pruning is housekeeping and must not cost a relay
// its round.
func (s *Store) prune(ctx context.Context, relayID string, stale []string, now, lease int64) int {
	refused := make([]bool, len(stale))
	_ = forEach(ctx, s.opts.MaxConcurrency, len(stale), func(ctx context.Context, i int) error {
		_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName:                aws.String(s.opts.TableName),
			Key:                      s.keys.relayKey(stale[i]),
			ConditionExpression:      aws.String(exprPruneCondition),
			ExpressionAttributeNames: names("#pk", s.opts.PartitionKey, "#lastSeen", attrLastSeen, "#stopped", attrStoppedAt),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":dead":    num(now - deadAfterLeases*lease),
				":stopped": num(now - lease),
			},
		})
		switch {
		case err == nil:
		case isConditionFailed(err):
			refused[i] = true
			s.tel.refused(relayID, OpPrune, -1)
		default:
			s.tel.failed(relayID, OpPrune, -1, err)
			s.log.WarnContext(ctx, "outboxddb: pruning a stale heartbeat record failed; retried on a later round",
				"relayId", relayID, "staleRelayId", stale[i], "error", err)
		}
		return nil
	})
	count := 0
	for _, r := range refused {
		if r {
			count++
		}
	}
	return count
}

// rest reports whether a distant standby skips this round. Such a relay
// refreshes its heartbeat within three quarters of a lease, so its peers
// keep counting it, and sends nothing in between: with the default timings
// (30 s lease, 10 s rounds) every other round. The store is not told the
// round interval, so it measures it between calls.
func (s *Store) rest(relayID string, now, lease int64) (rank int, rest bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.standby
	if st == nil {
		return 0, false
	}
	if st.relayID != relayID {
		s.standby = nil
		return 0, false
	}
	rested, sinceLastCall := now-st.since, now-st.lastCall
	st.lastCall = now
	if rested >= 0 && sinceLastCall >= 0 && rested+sinceLastCall < lease/4*3 {
		return st.rank, true
	}
	s.standby = nil
	return 0, false
}

// noteStandby records the outcome of a full round for the rest check. Only a
// relay whose heartbeat was accepted becomes a distant standby.
func (s *Store) noteStandby(ctx context.Context, relayID string, distant bool, rank int, now int64) {
	s.mu.Lock()
	was := s.standby != nil
	if distant {
		s.standby = &standbyState{relayID: relayID, since: now, lastCall: now, rank: rank}
	} else {
		s.standby = nil
	}
	s.mu.Unlock()
	if distant && !was {
		s.log.DebugContext(ctx, "outboxddb: relay is a distant standby; resting every other round", "relayId", relayID, "standbyRank", rank)
	}
}

// RenewLeases extends the relay's leases on buckets during a slow publish:
// each only while it still names the relay and has not expired (a renewal
// never revives a lapsed lease, even one nobody took), and never backwards.
// It reports false when any renewal was refused, or a bucket is outside
// [0, BucketCount) (then without a request). When every renewal succeeded it
// also refreshes the heartbeat; a refused heartbeat is ignored. An empty list
// reports true without a request.
func (s *Store) RenewLeases(ctx context.Context, req outbox.LeaseRequest, buckets []int) (bool, error) {
	if len(buckets) == 0 {
		return true, nil
	}
	if err := checkLeaseRequest("renew leases", req); err != nil {
		return false, err
	}
	for _, b := range buckets {
		if b < 0 || b >= s.opts.BucketCount {
			return false, nil
		}
	}
	now := s.now()
	expiry := now + durationTicks(req.LeaseDuration)
	me := str(req.RelayID)
	_, refused, err := s.updateLeases(ctx, req.RelayID, OpRenew, buckets, func(b int) *dynamodb.UpdateItemInput {
		return s.leaseUpdate(b, exprSetExpiry, exprRenewCondition,
			map[string]types.AttributeValue{":me": me, ":now": num(now), ":expiry": num(expiry)})
	})
	if err != nil {
		return false, err
	}
	if len(refused) > 0 {
		// A relay that lost a bucket must not look alive on the strength of
		// this renewal.
		return false, nil
	}
	if _, err := s.heartbeat(ctx, req.RelayID, now); err != nil {
		return false, err
	}
	return true, nil
}

// ReleaseLeases is the graceful stop. It first stamps the relay's heartbeat
// record stopped (later than every heartbeat this store sent), so peers stop
// counting it even if the release is cut short, and then frees every lease
// naming the relay, guarded by owner and the expiry it read, whatever the
// bucket count. Because a claim of the round the stop cancelled may still
// land, it reads the leases again, up to three passes; leases still named
// after the last pass lapse after the lease duration.
func (s *Store) ReleaseLeases(ctx context.Context, req outbox.LeaseRequest) (outbox.Release, error) {
	if err := outbox.ValidateRelayID(req.RelayID); err != nil {
		return outbox.Release{}, err
	}
	relayID := req.RelayID
	s.mu.Lock()
	s.standby = nil
	s.mu.Unlock()

	var rel outbox.Release
	for pass := range maxReleasePasses {
		now := s.now()
		if pass == 0 {
			if err := s.stampStopped(ctx, relayID, now); err != nil {
				return rel, err
			}
		}
		items, err := s.readCoordinationItems(ctx, leasePrefix)
		if err != nil {
			return rel, err
		}
		leases, _ := s.keys.coordinationItems(items)
		var mine []int
		seen := map[int]int64{}
		for _, l := range leases {
			if l.owner == relayID {
				mine = append(mine, l.bucket)
				seen[l.bucket] = l.expires
			}
		}
		if pass > 0 && len(mine) == 0 {
			return rel, nil
		}
		released, refused, err := s.updateLeases(ctx, relayID, OpRelease, mine, func(b int) *dynamodb.UpdateItemInput {
			return s.leaseUpdate(b, exprRelease, exprReleaseCondition,
				map[string]types.AttributeValue{":me": str(relayID), ":seen": num(seen[b]), ":now": num(now)})
		})
		if err != nil {
			return rel, err
		}
		rel.Released = append(rel.Released, released...)
		slices.Sort(rel.Released)
		rel.Released = slices.Compact(rel.Released)
		rel.Refused += len(refused)
	}
	rel.Unfinished = true
	s.log.WarnContext(ctx, "outboxddb: release unfinished: leases still name the relay; peers take over after the lease duration", "relayId", relayID)
	return rel, nil
}

// stampStopped replaces the relay's heartbeat record with a stopped one,
// unconditionally, at max(now, latest heartbeat sent + 1 tick): a heartbeat
// this process already sent, still in flight, is refused by it instead of
// reviving the record.
func (s *Store) stampStopped(ctx context.Context, relayID string, now int64) error {
	s.mu.Lock()
	stamp := max(now, s.lastHeartbeatSent+1)
	s.mu.Unlock()
	item := s.keys.relayKey(relayID)
	item[attrLastSeen] = num(stamp)
	item[attrStoppedAt] = num(stamp)
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.opts.TableName), Item: item})
	if err != nil {
		s.tel.failed(relayID, OpStoppedRecord, -1, err)
		return fmt.Errorf("outboxddb: stamp relay %q stopped: %w", relayID, err)
	}
	return nil
}

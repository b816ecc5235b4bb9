package lease

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/spillway-dev/spillway/outbox/internal/murmur2"
)

// Settled is what a relay remembers from a full round after which its
// fleet was settled: every bucket held by an unexpired lease of an active
// relay, every active relay holding exactly its share, and this relay's
// round having kept everything it owned and changed nothing else. Its zero
// value means "not settled".
//
// While the membership stays the same, nothing in a settled fleet changes
// a lease but its holder's keeps: a claim needs a free bucket and a
// release an over-share relay, and both follow a membership change (a
// relay that joins, stops or dies changes the heartbeat records). So the
// next rounds read only the heartbeat records — at 1,024 buckets and 128
// relays a tenth of the partition — and keep the relay's leases with the
// expiries it wrote as their versions: the table contract's conditional
// keep, so a lease that changed after all is refused, never overwritten.
// The relay reads the whole partition again after a lease duration, and at
// once after a membership change, a refusal, a held-back keep, or (the
// relay forgets the state) an in-flight renewal or a failed round.
type Settled struct {
	relayID     string
	at          int64    // ticks of the full round that settled (see settledAfter)
	active      []string // the active relays then, ascending
	kept        []Write
	standbyRank int
}

// IsSettled reports whether s holds a settled fleet.
func (s Settled) IsSettled() bool { return s.relayID != "" }

// settledAfter returns the state after a full round of req at now that
// read snap, planned plan and ended as acq; the zero value unless the
// fleet is settled.
//
// A fleet settles all at once, after a start or a membership change, so
// if every relay then waited a whole lease duration, their full reads
// would keep landing in the same renew interval. When the relay was not
// settled before (fresh), the state is dated back by an offset below a
// lease duration drawn from the relay id: the relays' first full reads,
// and so all later ones, spread over the lease duration.
func settledAfter(req Request, now time.Time, snap Coordination, plan RoundPlan, acq Acquisition, fresh bool) Settled {
	if acq.HeartbeatRefused || len(plan.Release)+len(plan.Claim)+len(plan.Guarded)+len(plan.Withheld)+len(acq.Lost) > 0 {
		return Settled{}
	}
	n, t, lease := req.BucketCount, Ticks(now), durationTicks(req.LeaseDuration)
	active, _, _ := classifyRelays(snap.Relays, t, lease)
	isActive := make(map[string]bool, len(active))
	for _, id := range active {
		isActive[id] = true
	}
	held := map[string]int{}
	covered := make([]bool, n)
	for _, l := range snap.Leases {
		if l.Bucket < 0 || l.Bucket >= n {
			continue
		}
		if l.Owner == "" || !isActive[l.Owner] || Ticks(l.ExpiresAt) <= t {
			return Settled{}
		}
		held[l.Owner]++
		covered[l.Bucket] = true
	}
	if slices.Contains(covered, false) || !isActive[req.RelayID] || held[req.RelayID] != len(plan.Keep)+len(plan.Unrenewed) {
		return Settled{}
	}
	fs, err := FairShares(n, active, req.RelayID, held)
	if err != nil {
		return Settled{}
	}
	for k, id := range fs.Relays {
		if held[id] != fs.Shares[k] {
			return Settled{}
		}
	}
	at := t
	if fresh {
		at -= int64(murmur2.Sum32([]byte(req.RelayID))&0x7fffffff) % lease
	}
	s := Settled{relayID: req.RelayID, at: at, active: slices.Sorted(slices.Values(active)), standbyRank: plan.StandbyRank}
	s.kept = written(plan.Keep, plan.Unrenewed)
	return s
}

// written is what a relay remembers of its owned leases after a round:
// each bucket with the expiry now stored, the new one for a keep, the one
// read for a lease left unrenewed; ascending by bucket.
func written(keep, unrenewed []Write) []Write {
	out := make([]Write, 0, len(keep)+len(unrenewed))
	for _, w := range keep {
		out = append(out, Write{Bucket: w.Bucket, Seen: w.Expiry})
	}
	for _, w := range unrenewed {
		out = append(out, Write{Bucket: w.Bucket, Seen: w.Seen})
	}
	slices.SortFunc(out, func(a, b Write) int { return a.Bucket - b.Bucket })
	return out
}

// current reports whether s may spare a round of req at now the lease
// items: s is this relay's, and its full round is less than a lease
// duration old (and not in the future: after the clock went back the
// round reads everything).
func (s Settled) current(req Request, now time.Time) bool {
	t := Ticks(now)
	return s.IsSettled() && s.relayID == req.RelayID && t >= s.at && t-s.at < durationTicks(req.LeaseDuration)
}

// sameFleet reports whether relays, read at now, hold the active fleet s
// settled with.
func (s Settled) sameFleet(req Request, now time.Time, relays []RelayState) bool {
	active, _, _ := classifyRelays(relays, Ticks(now), durationTicks(req.LeaseDuration))
	slices.Sort(active)
	return slices.Equal(active, s.active)
}

// quietRound is the round of a relay whose fleet is settled and unchanged:
// after the heartbeat and the heartbeat-only read, the keeps with the
// remembered expiries as versions (held back, as in a full round, where
// the stored expiry is later than this round's), and the prune when due.
func quietRound(ctx context.Context, io IO, log *slog.Logger, now time.Time, req Request, st RoundState, relays []RelayState) (Acquisition, error) {
	s, t := st.Settled, Ticks(now)
	lease := durationTicks(req.LeaseDuration)
	unmarked := unmarkedRelays(relays, req.RelayID, t, lease)
	keep, unrenewed, guarded := planKeeps(req, t, s.kept, len(unmarked) > 0)
	_, stale, ignored := classifyRelays(relays, t, lease)
	logPlan(ctx, log, req.RelayID, true, RoundPlan{Guarded: guarded, IgnoredRelays: ignored, Unmarked: unmarked})
	var prune *PruneWrite
	if pruneDue(st.Round) {
		prune = &PruneWrite{Relays: stale, DeadBefore: TimeFromTicks(t - DeadAfterLeases*lease), StoppedBefore: TimeFromTicks(t - lease)}
	}
	pruned := pruneBeside(ctx, io, req.RelayID, prune)
	kept, lost, err := io.WriteLeases(ctx, req.RelayID, OpKeep, keep)
	refusedPrunes := pruned()
	if err != nil {
		return Acquisition{}, err
	}
	for _, b := range lost {
		log.InfoContext(ctx, "outbox: no longer owns bucket", "relayId", req.RelayID, "bucket", b)
	}
	acq := Acquisition{Owned: kept, Lost: lost, Refused: len(lost) + refusedPrunes, StandbyRank: s.standbyRank, IgnoredRelays: ignored, Quiet: true}
	addUnrenewed(&acq, unrenewed)
	if s.standbyRank >= req.BucketCount {
		acq.Standby = Standby{relayID: req.RelayID, since: t, lastCall: t, rank: s.standbyRank}
	}
	if len(lost) == 0 && len(guarded) == 0 {
		acq.Settled = s
		acq.Settled.kept = written(keep, unrenewed)
	}
	return acq, nil
}

// pruneDue reports whether a run's full round number round prunes: its
// first, and every PruneEvery-th after it.
func pruneDue(round int) bool { return round <= 0 || (round+1)%PruneEvery == 0 }

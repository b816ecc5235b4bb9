package lease

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"
)

// IO is a store's lease primitives, the one-way seam between the protocol
// and a table: a store sends the requests it is given and decides nothing.
// The protocol — when to rest, what to keep, release, claim, renew and
// prune — is AcquireRound's and Renew's, which the relay runs over its
// store (outbox.Store embeds IO).
type IO interface {
	// Heartbeat writes relayID's heartbeat at now, conditional on moving it
	// forward, with the keep-ahead mark when keepsAhead
	// (RelayState.KeepsAhead). It reports false when the store refused it;
	// any other error fails the round.
	Heartbeat(ctx context.Context, relayID string, now time.Time, keepsAhead bool) (recorded bool, err error)
	// Snapshot reads every lease and heartbeat record with one strongly
	// consistent read, all pages.
	Snapshot(ctx context.Context) (Coordination, error)
	// WriteLeases sends one conditional write per entry, several at once,
	// and splits the buckets into accepted and refused, each in the order
	// given. An error other than a refusal fails the round.
	WriteLeases(ctx context.Context, relayID string, op Op, writes []Write) (accepted, refused []int, err error)
	// Heartbeats reads only the heartbeat records, with one strongly
	// consistent read, all pages (a settled relay's round).
	Heartbeats(ctx context.Context) ([]RelayState, error)
	// Prune deletes the given stale heartbeat records and returns how many
	// deletes were refused (the relay came back). Failures are the store's
	// to log: pruning is housekeeping and never fails a round. A round
	// sends it beside its lease writes, concurrently with WriteLeases.
	Prune(ctx context.Context, relayID string, p PruneWrite) (refused int)
}

// AcquireRound runs one acquisition round for req over io, with now the
// round's one clock reading:
//
//  1. a distant standby rests (no request at all) every other round
//     (StartRound);
//  2. heartbeat, conditional on moving forward;
//  3. when the previous round left the fleet settled (st.Settled), a read
//     of the heartbeat records only; if they show the same active fleet
//     and the settled full round is less than a lease duration old, the
//     round just keeps the relay's leases with the expiries it wrote and
//     prunes when due (see Settled);
//  4. otherwise one strongly consistent read of every lease and heartbeat;
//  5. the plan (PlanRound): keep the relay's own leases (not those whose
//     stored expiry is later than this round's, nor those that still last
//     KeepAhead: they stay owned, unrenewed), release what exceeds its
//     share, claim what the shared plan gives it (nothing after a refused
//     heartbeat), and on the run's first full round and every PruneEvery-th
//     prune stale heartbeat records, beside those writes (pruneBeside).
//
// The returned Acquisition carries the standby and settled states for the
// next round. A
// write error other than a refusal fails the round: the relay should then
// treat its ownership as unknown.
func AcquireRound(ctx context.Context, io IO, log *slog.Logger, now time.Time, req Request, st RoundState) (Acquisition, error) {
	relayID := req.RelayID
	if log == nil {
		log = slog.Default()
	}
	if start := StartRound(now, req, st); start.Rest {
		return Acquisition{StandbyRank: start.StandbyRank, Rested: true, Standby: start.Standby}, nil
	}
	now = TimeFromTicks(Ticks(now))
	recorded, err := io.Heartbeat(ctx, relayID, now, req.KeepsAhead())
	if err != nil {
		return Acquisition{}, err
	}
	if recorded && st.Settled.current(req, now) {
		relays, err := io.Heartbeats(ctx)
		if err != nil {
			return Acquisition{}, err
		}
		if st.Settled.sameFleet(req, now, relays) {
			return quietRound(ctx, io, log, now, req, st, relays)
		}
	}
	snap, err := io.Snapshot(ctx)
	if err != nil {
		return Acquisition{}, err
	}
	snap.ReadAt = now
	plan, err := PlanRound(RoundInput{Request: req, Now: now, Snapshot: snap, HeartbeatRecorded: recorded, State: st})
	if err != nil {
		return Acquisition{}, fmt.Errorf("outbox: acquire leases for relay %q: %w", relayID, err)
	}
	logPlan(ctx, log, relayID, recorded, plan)
	acq := Acquisition{StandbyRank: plan.StandbyRank, HeartbeatRefused: !recorded, IgnoredRelays: plan.IgnoredRelays}
	if !recorded {
		acq.Refused++
	}
	pruned := pruneBeside(ctx, io, relayID, plan.Prune)
	err = writeRound(ctx, io, log, relayID, plan, &acq)
	acq.Refused += pruned()
	if err != nil {
		return Acquisition{}, err
	}
	addUnrenewed(&acq, plan.Unrenewed)
	acq.Standby = plan.Standby
	acq.Settled = settledAfter(req, now, snap, plan, acq, !st.Settled.IsSettled())
	if plan.Standby.Distant() && !st.Standby.Distant() {
		log.DebugContext(ctx, "outbox: relay is a distant standby; resting every other round", "relayId", relayID, "standbyRank", plan.StandbyRank)
	}
	return acq, nil
}

// pruneBeside sends the prune p (nil: none) beside the round's lease
// writes and returns the wait for its refused deletes. The prune touches
// only stale heartbeat records, which no write of the round reads or
// conditions on, so the grant need not wait for it: on a run's first
// round, the one a woken relay's first publish waits for, it would
// otherwise add a round trip to that publish.
func pruneBeside(ctx context.Context, io IO, relayID string, p *PruneWrite) (wait func() int) {
	if p == nil || len(p.Relays) == 0 {
		return func() int { return 0 }
	}
	done := make(chan int, 1)
	go func() { done <- io.Prune(ctx, relayID, *p) }()
	return func() int { return <-done }
}

// writeRound sends the plan's keeps, releases and claims, in that order,
// and records their outcome in acq.
func writeRound(ctx context.Context, io IO, log *slog.Logger, relayID string, plan RoundPlan, acq *Acquisition) error {
	steps := []struct {
		op     Op
		writes []Write
	}{{OpKeep, plan.Keep}, {OpRelease, plan.Release}, {OpClaim, plan.Claim}}
	for _, step := range steps {
		accepted, refused, err := io.WriteLeases(ctx, relayID, step.op, step.writes)
		if err != nil {
			return err
		}
		acq.Refused += len(refused)
		switch step.op {
		case OpKeep:
			acq.Owned, acq.Lost = slices.Clone(accepted), refused
			for _, b := range refused {
				log.InfoContext(ctx, "outbox: no longer owns bucket", "relayId", relayID, "bucket", b)
			}
		case OpRelease:
			acq.Released = accepted
		case OpClaim:
			acq.Claimed = accepted
			acq.Owned = append(acq.Owned, accepted...)
			for _, b := range refused {
				log.DebugContext(ctx, "outbox: claim refused: a peer claimed the bucket first", "relayId", relayID, "bucket", b)
			}
		}
	}
	slices.Sort(acq.Owned)
	return nil
}

// addUnrenewed adds the owned leases the round left unrenewed to acq, with
// the earliest of their expiries, which bounds how long the relay may
// trust its owned set.
func addUnrenewed(acq *Acquisition, unrenewed []Write) {
	for _, w := range unrenewed {
		acq.Unrenewed = append(acq.Unrenewed, w.Bucket)
		if acq.UnrenewedExpiry.IsZero() || w.Seen.Before(acq.UnrenewedExpiry) {
			acq.UnrenewedExpiry = w.Seen
		}
	}
	if len(unrenewed) > 0 {
		acq.Owned = append(acq.Owned, acq.Unrenewed...)
		slices.Sort(acq.Owned)
		slices.Sort(acq.Unrenewed)
	}
}

// logPlan warns about what the plan leaves out and why.
func logPlan(ctx context.Context, log *slog.Logger, relayID string, recorded bool, plan RoundPlan) {
	if !recorded {
		log.WarnContext(ctx, "outbox: heartbeat refused: a later heartbeat of this relay is stored (host clock set back?); claiming nothing this round",
			"relayId", relayID, "withheldClaims", plan.Withheld)
	}
	if len(plan.Guarded) > 0 {
		log.WarnContext(ctx, "outbox: not renewing leases that expire later than this round's expiry (host clock set back?); not publishing those buckets until the clock catches up",
			"relayId", relayID, "buckets", plan.Guarded)
	}
	if len(plan.Unmarked) > 0 {
		log.DebugContext(ctx, "outbox: keeping every lease this round: relays without the keep-ahead mark (other languages) tolerate more clock skew than a lease left unrenewed allows",
			"relayId", relayID, "unmarked", plan.Unmarked)
	}
	if plan.IgnoredRelays > 0 {
		log.WarnContext(ctx, "outbox: ignoring heartbeat records with an empty relay id; the prune removes them once stale",
			"relayId", relayID, "ignored", plan.IgnoredRelays)
	}
}

package outbox

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// leaseState is what the relay believes it owns. The relay trusts the owned
// buckets for LeaseDuration measured from at, the start of the last
// successful acquisition or renewal.
type leaseState struct {
	owned []int
	// at is the lease reference: captured before the call that confirmed
	// the leases, so the relay's view never outlives the table's.
	at time.Time
	// acquiredAt is the start of the last acquisition attempt; the next
	// one is due LeaseRenewInterval later (renewals do not move it).
	acquiredAt time.Time
	attempted  bool
	force      bool
	// standby is the distant-standby state the last round returned; it
	// outlives a run, as the rest check measures between calls, and is
	// forgotten when the relay releases its leases.
	standby Standby
	// settled is the settled-fleet state the last round returned; it
	// remembers the expiries the relay wrote, so it is forgotten whenever
	// something else writes them (an in-flight renewal) or ownership is in
	// doubt.
	settled    Settled
	renewMu    sync.Mutex
	renewErrAt time.Time
}

// acquisitionDue reports whether an acquisition round must run now.
func (r *Relay) acquisitionDue(now time.Time) bool {
	return r.untilRenewal(now) <= 0
}

// untilRenewal is the time until the next acquisition is due
// (leaseTiming.roundDue).
func (r *Relay) untilRenewal(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.lease.attempted || r.lease.force {
		return 0
	}
	return r.timing.roundDue(r.lease.at, r.lease.acquiredAt).Sub(now)
}

// sinceAcquisition is the time since the last acquisition attempt started.
func (r *Relay) sinceAcquisition(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return now.Sub(r.lease.acquiredAt)
}

// leaseAge returns the owned buckets and the age of the lease reference; ok
// is false when there is no reference.
func (r *Relay) leaseAge(now time.Time) (owned []int, age time.Duration, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lease.at.IsZero() {
		return slices.Clone(r.lease.owned), 0, false
	}
	return slices.Clone(r.lease.owned), now.Sub(r.lease.at), true
}

// holds reports whether bucket is owned under a lease younger than
// LeaseDuration at now.
func (r *Relay) holds(bucket int, now time.Time) bool {
	owned, age, ok := r.leaseAge(now)
	return ok && age < r.opts.LeaseDuration && slices.Contains(owned, bucket)
}

// dropOwnership forgets the owned set (the table is the authority) and makes
// the next cycle re-acquire.
func (r *Relay) dropOwnership(reason LossReason) {
	r.mu.Lock()
	lost := len(r.lease.owned)
	r.lease.owned = nil
	r.lease.at = time.Time{}
	r.lease.force = true
	r.lease.settled = Settled{}
	r.parked.retain(nil, nil)
	r.mu.Unlock()
	if lost > 0 {
		r.log.Warn("dropping bucket ownership", "reason", string(reason), "buckets", lost)
		r.emit(Event{Kind: EventLeaseLost, Bucket: -1, Count: lost, Loss: reason})
		r.emit(Event{Kind: EventOwned, Bucket: -1, Count: 0})
	}
}

// forceAcquisition makes the next cycle run an acquisition round.
func (r *Relay) forceAcquisition() {
	r.mu.Lock()
	r.lease.force = true
	r.mu.Unlock()
}

// acquire runs one acquisition round and installs its result.
func (u *run) acquire() error {
	r := u.r
	start := r.clock.Now()
	r.mu.Lock()
	r.lease.attempted = true
	r.lease.force = false
	r.lease.acquiredAt = start
	prev := r.lease.owned
	st := RoundState{Round: u.fullRounds, Standby: r.lease.standby, Settled: r.lease.settled}
	expired := len(prev) > 0 && !r.lease.at.IsZero() && start.Sub(r.lease.at) >= r.opts.LeaseDuration
	r.mu.Unlock()
	if expired {
		r.emit(Event{Kind: EventLeaseLost, Bucket: -1, Count: len(prev), Loss: LossExpiredBetweenRounds})
	}

	ctx, span := r.tracer.Start(u.ctx, SpanAcquire)
	span.Annotate(AnnotationRelayID, r.opts.RelayID)
	acq, err := r.store.AcquireLeases(ctx, r.req, st)
	u.res.Rounds++
	r.mu.Lock()
	r.lease.standby = acq.Standby
	r.lease.settled = acq.Settled
	r.mu.Unlock()
	elapsed := r.clock.Now().Sub(start)
	if err != nil {
		span.Annotate(AnnotationOutcome, "error")
		span.End(err)
		r.emit(Event{Kind: EventRound, Bucket: -1, Duration: elapsed, Err: err})
		if IsMisconfigured(err) {
			return err
		}
		// Ownership is unknown after a failed lease call: re-acquire.
		r.dropOwnership(LossAcquisitionFailed)
		return errCycle("acquire leases", err)
	}
	u.res.Refused += acq.Refused
	if !acq.Rested {
		u.fullRounds++
	}

	r.mu.Lock()
	r.lease.owned = slices.Clone(acq.Owned)
	r.lease.at = r.leaseReference(start, acq)
	for b := range r.heads {
		if !slices.Contains(acq.Owned, b) {
			delete(r.heads, b)
		}
	}
	if expired {
		r.parked.retain(nil, nil)
	}
	r.parked.retain(acq.Owned, acq.Claimed)
	r.mu.Unlock()
	u.forceDiscover = true
	u.res.MaxOwned = max(u.res.MaxOwned, len(acq.Owned))

	span.Annotate("owned", len(acq.Owned))
	span.Annotate(AnnotationOutcome, "ok")
	span.End(nil)
	r.emit(Event{Kind: EventRound, Bucket: -1, Count: len(acq.Owned), Duration: elapsed})
	if n := len(acq.Claimed); n > 0 {
		r.emit(Event{Kind: EventClaim, Bucket: -1, Count: n})
	}
	if n := len(acq.Released); n > 0 {
		r.emit(Event{Kind: EventRelease, Bucket: -1, Count: n})
	}
	if n := len(acq.Lost); n > 0 {
		r.emit(Event{Kind: EventLeaseLost, Bucket: -1, Count: n, Loss: LossKeepRefused})
	}
	r.emit(Event{Kind: EventOwned, Bucket: -1, Count: len(acq.Owned)})
	if !slices.Equal(prev, acq.Owned) {
		r.log.LogAttrs(u.ctx, slog.LevelInfo, "owned buckets changed", slog.Any("owned", acq.Owned),
			slog.Any("claimed", acq.Claimed), slog.Any("released", acq.Released))
	}
	return nil
}

// leaseReference is the reference of the owned set a round that started
// at start returned: the start, or earlier when the round left leases
// unrenewed, as they last only until their stored expiry, which an
// earlier round of this relay wrote a lease duration before it.
func (r *Relay) leaseReference(start time.Time, acq Acquisition) time.Time {
	if acq.UnrenewedExpiry.IsZero() {
		return start
	}
	return minTime(start, acq.UnrenewedExpiry.Add(-r.opts.LeaseDuration))
}

// renewalDue reports whether an in-flight renewal is due at now
// (leaseTiming.renewDue): the lease reference has only the margin left,
// or it and the last acquisition round are both LeaseRenewInterval old. A
// round that left leases unrenewed (they still last KeepAhead) dates the
// reference back but not the round: the next round keeps them, and a
// renewal in between would only repeat its writes, unless that round runs
// late.
func (r *Relay) renewalDue(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.lease.at.IsZero() && !now.Before(r.timing.renewDue(r.lease.at, r.lease.acquiredAt))
}

// renew extends every owned lease if a renewal is due (renewalDue).
// Concurrent callers (one per draining bucket) collapse into one renewal.
// ErrLeaseLost means the relay no longer owns its buckets; other errors
// keep the last confirmed reference.
func (r *Relay) renew(ctx context.Context) error {
	r.lease.renewMu.Lock()
	defer r.lease.renewMu.Unlock()
	start := r.clock.Now()
	owned, _, ok := r.leaseAge(start)
	if len(owned) == 0 || !ok {
		return ErrLeaseLost
	}
	if !r.renewalDue(start) {
		return nil
	}
	renewed, err := r.store.RenewLeases(ctx, r.req, owned)
	r.mu.Lock()
	r.lease.settled = Settled{} // the renewal wrote other expiries
	r.mu.Unlock()
	if err != nil {
		r.mu.Lock()
		r.lease.renewErrAt = start
		r.mu.Unlock()
		return errCycle("renew leases", err)
	}
	if !renewed {
		r.dropOwnership(LossRenewalRefused)
		return ErrLeaseLost
	}
	r.mu.Lock()
	// A response that arrives after the previous lease ran out proves
	// nothing about the time in between.
	late := r.lease.at.IsZero() || r.clock.Now().Sub(r.lease.at) >= r.opts.LeaseDuration
	if !late {
		r.lease.at = start
	}
	r.mu.Unlock()
	if late {
		r.dropOwnership(LossRenewalLate)
		return ErrLeaseLost
	}
	return nil
}

// stop is the end of a joined run: release the leases if that fits before
// the deadline, then look at the released buckets with a strongly
// consistent read and send the wake-up the relay owes if work is left, so
// no committed message waits for the schedule.
func (u *run) stop() {
	r := u.r
	r.mu.Lock()
	attempted := r.lease.attempted
	owned := slices.Clone(r.lease.owned)
	r.mu.Unlock()
	if !attempted {
		return
	}
	now := r.clock.Now()
	check := owned
	if !u.in.Deadline.IsZero() && u.in.Deadline.Sub(now) < u.releaseReserve() {
		u.res.ReleaseSkipped = true
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "no time left to release leases; they lapse after LeaseDuration",
			slog.Any("owned", owned), slog.Duration("left", u.in.Deadline.Sub(now)))
		r.emit(Event{Kind: EventReleaseSkipped, Bucket: -1, Count: len(owned)})
		r.resetLease()
		return
	}
	ctx, span := r.tracer.Start(u.ctx, SpanRelease)
	span.Annotate(AnnotationRelayID, r.opts.RelayID)
	r.mu.Lock()
	r.lease.standby = Standby{}
	r.mu.Unlock()
	rel, err := r.store.ReleaseLeases(ctx, r.req)
	span.End(err)
	r.resetLease()
	if err != nil {
		r.log.LogAttrs(u.ctx, slog.LevelError, "releasing leases failed; they lapse after LeaseDuration", slog.Any("error", err))
	} else {
		u.res.Released = rel.Released
		u.res.ReleaseUnfinished = rel.Unfinished
		u.res.Refused += rel.Refused
		if n := len(rel.Released); n > 0 {
			r.emit(Event{Kind: EventRelease, Bucket: -1, Count: n})
		}
		for _, b := range rel.Released {
			if !slices.Contains(check, b) {
				check = append(check, b)
			}
		}
	}
	r.emit(Event{Kind: EventOwned, Bucket: -1, Count: 0})
	if len(check) == 0 || u.ctx.Err() != nil {
		return
	}
	slices.Sort(check)
	releasedAt := r.clock.Now()
	// Strongly consistent: a commit that landed while this relay stopped
	// is exactly what the eventually consistent probe can miss, and then
	// nobody would be woken for it before the schedule.
	pending, err := u.withMessages(check)
	if err != nil {
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "probing released buckets failed", slog.Any("error", err))
		return
	}
	if len(pending) == 0 && len(rel.Released) > 0 {
		pending = u.watchReleased(rel.Released, releasedAt)
	}
	u.res.WorkLeft = pending
	if len(pending) > 0 {
		u.wake(pending)
	}
}

// watchReleased covers the writers that skipped their wake-up because a
// view read before the release showed this relay holding the buckets: it
// probes the released buckets again OwnerViewTTL after the release, when
// no such view is trusted any more, and returns those pending. Only a
// relay that can send the continuation watches, and only if the wait fits
// before the deadline.
func (u *run) watchReleased(released []int, releasedAt time.Time) []int {
	r := u.r
	if r.notifier == nil || u.ctx.Err() != nil {
		return nil
	}
	until := releasedAt.Add(OwnerViewTTL)
	if !u.in.Deadline.IsZero() && u.in.Deadline.Sub(until) < u.releaseReserve()/2 {
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "no time left to watch the released buckets; commits of the last second wait for the next trigger",
			slog.Any("released", released))
		return nil
	}
	if !Sleep(until.Sub(r.clock.Now()), u.ctx.Done()) {
		return nil
	}
	// Strongly consistent, as the stop's first look: the commit whose
	// wake-up was skipped is exactly what an eventually consistent probe
	// could miss.
	pending, err := u.withMessages(released)
	if err != nil {
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "looking at the released buckets after the watch failed", slog.Any("error", err))
		return nil
	}
	return pending
}

// wake sends the continuation wake-up, bounded by the hop limit.
func (u *run) wake(buckets []int) {
	r := u.r
	hop := u.in.Hop + 1
	if r.notifier == nil || hop > r.maxHops {
		r.log.LogAttrs(u.ctx, slog.LevelInfo, "work left for the next trigger", slog.Any("buckets", buckets),
			slog.Int("hop", hop), slog.Int("maxHops", r.maxHops))
		return
	}
	err := r.notifier.Notify(u.ctx, WakeUp{Buckets: buckets, Hop: hop})
	r.emit(Event{Kind: EventWakeUpSent, Bucket: -1, Count: len(buckets), Err: err})
	if err != nil {
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "wake-up failed; the schedule will find the work", slog.Any("error", err))
		return
	}
	u.res.WakeUpSent = true
}

// releaseReserve is the least time before the deadline the stop protocol
// needs: half the stop margin, at most a second.
func (u *run) releaseReserve() time.Duration {
	if u.budgetEnd.IsZero() {
		return 0
	}
	return min(u.in.Deadline.Sub(u.budgetEnd)/2, time.Second)
}

// resetLease forgets all lease state so the next run starts with an
// acquisition.
func (r *Relay) resetLease() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lease.owned = nil
	r.lease.at = time.Time{}
	r.lease.attempted = false
	r.lease.force = false
	r.lease.settled = Settled{}
	r.parked.retain(nil, nil)
}

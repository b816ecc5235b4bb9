package outbox

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/spillway-dev/spillway/outbox/internal/sleep"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// leaseLost is the keeper's report of buckets the relay stopped trusting:
// their parked state goes with them, as a bucket the relay did not hold
// throughout may have been parked into or replayed by others.
func (r *Relay) leaseLost(reason LossReason, n int) {
	owned := r.lease.owned()
	r.listen(owned)
	r.park.book.retain(owned, nil)
	r.log.Warn("dropping bucket ownership", "reason", string(reason), "buckets", n)
	r.hooks.leaseLost(n, reason)
	r.hooks.leases(len(owned), 0, 0)
}

// acquire runs one acquisition round and installs its result.
func (u *run) acquire() error {
	r := u.r
	start := r.clock.Now()
	var prev []int
	var st lease.RoundState
	var expired bool
	r.lease.apply(func(b lease.Book) lease.Book {
		prev = b.Owned()
		st = b.RoundState(u.fullRounds)
		b, expired = b.RoundStarted(start)
		return b
	})
	if expired {
		r.hooks.leaseLost(len(prev), LossExpiredBetweenRounds)
	}

	ctx, span := r.tracer.Start(u.ctx, SpanAcquire)
	span.Annotate(AnnotationRelayID, r.opts.RelayID)
	var io lease.IO = r.store
	if u.initPending != nil {
		io = awaitPublisher{Store: r.store, u: u}
	}
	acq, err := lease.AcquireRound(ctx, io, r.roundLog, start, r.req, st)
	u.res.Rounds++
	elapsed := r.clock.Now().Sub(start)
	if err != nil {
		span.Annotate(AnnotationOutcome, "error")
		span.End(err)
		r.hooks.round(elapsed, acq, err)
		if errors.Is(err, ErrMisconfigured) {
			r.lease.apply(func(b lease.Book) lease.Book { return b.Refused(acq) })
			return err
		}
		// Ownership is unknown after a failed lease call: re-acquire.
		r.lease.apply(func(b lease.Book) lease.Book { return b.RoundFailed(acq) })
		if len(prev) > 0 {
			r.leaseLost(LossAcquisitionFailed, len(prev))
		}
		return errCycle("acquire leases", err)
	}
	u.res.Refused += acq.Refused
	if !acq.Rested {
		u.fullRounds++
	}

	r.lease.apply(func(b lease.Book) lease.Book { return b.Installed(start, acq) })
	r.listen(acq.Owned)
	r.heads.retain(acq.Owned)
	if expired {
		r.park.book.retain(nil, nil)
	}
	r.park.book.retain(acq.Owned, acq.Claimed)
	u.forceDiscover = true
	u.res.MaxOwned = max(u.res.MaxOwned, len(acq.Owned))

	span.Annotate("owned", len(acq.Owned))
	span.Annotate(AnnotationOutcome, "ok")
	span.End(nil)
	r.hooks.round(elapsed, acq, nil)
	if n := len(acq.Lost); n > 0 {
		r.hooks.leaseLost(n, LossKeepRefused)
	}
	r.hooks.leases(len(acq.Owned), len(acq.Claimed), len(acq.Released))
	if !slices.Equal(prev, acq.Owned) {
		r.log.LogAttrs(u.ctx, slog.LevelInfo, "owned buckets changed", slog.Any("owned", acq.Owned),
			slog.Any("claimed", acq.Claimed), slog.Any("released", acq.Released))
	}
	if len(acq.Owned) > 0 {
		return u.publisherReady()
	}
	return nil
}

// renewer runs the keeper's renewer for the run until the returned stop is
// called; stop waits for it to end.
func (u *run) renewer() (stop func()) {
	r := u.r
	ctx, cancel := context.WithCancel(u.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.lease.renewer(ctx, func(ctx context.Context, owned []int) (bool, error) {
			return lease.Renew(ctx, r.store, r.clock.Now(), r.req, owned)
		})
	}()
	return func() {
		cancel()
		<-done
	}
}

// stopper is the end of a joined run.
type stopper struct{ *run }

// stop is the end of a joined run, within the stop's plan: release the
// leases if the plan leaves time for it, then look at the released buckets
// with a strongly consistent read and send the wake-up the relay owes if
// work is left, so no committed message waits for the schedule. Every step
// ends by the plan's returnBy; what does not fit is skipped.
func (u stopper) stop() {
	r := u.r
	book := r.lease.snapshot()
	owned := slices.Clone(book.Owned())
	if !book.Attempted() {
		return
	}
	plan, signaled := u.plan()
	now := r.clock.Now()
	check := owned
	if plan.bounded() && !now.Before(plan.returnBy) {
		u.res.ReleaseSkipped = true
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "no time left to release leases; they lapse after LeaseDuration",
			slog.Any("owned", owned), slog.Duration("left", plan.end.Sub(now)))
		r.hooks.releaseSkipped(len(owned))
		r.resetLease()
		return
	}
	ctx, cancel := u.afterSettle(plan)
	defer cancel()
	sctx, span := r.tracer.Start(ctx, SpanRelease)
	span.Annotate(AnnotationRelayID, r.opts.RelayID)
	r.lease.apply(lease.Book.Stopping)
	rel, err := r.store.ReleaseLeases(sctx, r.opts.RelayID)
	span.End(err)
	r.resetLease()
	released := 0
	switch {
	case err != nil && timedOut(ctx):
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "releasing leases did not finish within the stop; they lapse after LeaseDuration",
			slog.Any("owned", owned), slog.Any("error", err))
	case err != nil:
		r.log.LogAttrs(u.ctx, slog.LevelError, "releasing leases failed; they lapse after LeaseDuration", slog.Any("error", err))
	default:
		u.res.Released = rel.Released
		u.res.ReleaseUnfinished = rel.Unfinished
		u.res.Refused += rel.Refused
		released = len(rel.Released)
		for _, b := range rel.Released {
			if !slices.Contains(check, b) {
				check = append(check, b)
			}
		}
	}
	r.hooks.leases(0, 0, released)
	if len(check) == 0 || ctx.Err() != nil {
		return
	}
	slices.Sort(check)
	releasedAt := r.clock.Now()
	// Strongly consistent: a commit that landed while this relay stopped
	// is exactly what the eventually consistent probe can miss, and then
	// nobody would be woken for it before the schedule.
	pending, err := u.withMessages(ctx, check)
	if err != nil {
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "probing released buckets failed", slog.Any("error", err))
		return
	}
	if len(pending) == 0 && len(rel.Released) > 0 && !signaled {
		pending = u.watchReleased(ctx, plan, rel.Released, releasedAt)
	}
	u.res.WorkLeft = pending
	if len(pending) > 0 {
		u.wake(ctx, plan, pending)
	}
}

// watchReleased covers the writers that skipped their wake-up because a
// view read before the release showed this relay holding the buckets: it
// probes the released buckets again lease.OwnerViewTTL after the release, when
// no such view is trusted any more, and returns those pending. Only a
// relay that can send the continuation watches, and only if the wait and
// a wake-up fit before the plan's returnBy.
func (u stopper) watchReleased(ctx context.Context, plan stopPlan, released []int, releasedAt time.Time) []int {
	r := u.r
	if r.notifier == nil || ctx.Err() != nil {
		return nil
	}
	until := releasedAt.Add(lease.OwnerViewTTL)
	if plan.bounded() && plan.returnBy.Sub(until) < minWakeUp {
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "no time left to watch the released buckets; commits of the last second wait for the next trigger",
			slog.Any("released", released))
		return nil
	}
	if !sleep.For(until.Sub(r.clock.Now()), ctx.Done()) {
		return nil
	}
	// Strongly consistent, as the stop's first look: the commit whose
	// wake-up was skipped is exactly what an eventually consistent probe
	// could miss.
	pending, err := u.withMessages(ctx, released)
	if err != nil {
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "looking at the released buckets after the watch failed", slog.Any("error", err))
		return nil
	}
	return pending
}

// wake sends the continuation wake-up, bounded by the hop limit and by the
// plan: it is skipped with less than minWakeUp left before returnBy, and
// ctx ends it at returnBy (a Lambda API that never answers, as from a VPC
// without a route to it, costs the run no more than that).
func (u stopper) wake(ctx context.Context, plan stopPlan, buckets []int) {
	r := u.r
	hop := u.in.Hop + 1
	if r.notifier == nil || hop > r.maxHops {
		r.log.LogAttrs(u.ctx, slog.LevelInfo, "work left for the next trigger", slog.Any("buckets", buckets),
			slog.Int("hop", hop), slog.Int("maxHops", r.maxHops))
		return
	}
	if left := plan.returnBy.Sub(r.clock.Now()); plan.bounded() && left < minWakeUp {
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "no time left for the continuation wake-up; the schedule finds the work",
			slog.Any("buckets", buckets), slog.Duration("left", left))
		return
	}
	err := r.notifier.Notify(ctx, WakeUp{Buckets: buckets, Hop: hop})
	r.hooks.wakeUp(WakeUp{Buckets: buckets, Hop: hop}, err)
	if err != nil {
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "wake-up failed; the schedule will find the work", slog.Any("error", err))
		return
	}
	u.res.WakeUpSent = true
}

// resetLease forgets all lease state so the next run starts with a round.
func (r *Relay) resetLease() {
	r.lease.apply(lease.Book.Released)
	r.listen(nil)
	r.park.book.retain(nil, nil)
}

// listen points the doorbell, if any, at the buckets the relay holds.
func (r *Relay) listen(owned []int) {
	if r.bell != nil {
		r.bell.Listen(owned)
	}
}

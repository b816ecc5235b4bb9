package outbox

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/spillway-dev/spillway/internal/sleep"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// leaseLost is the keeper's report of buckets the relay stopped trusting:
// their parked state goes with them, as a bucket the relay did not hold
// throughout may have been parked into or replayed by others.
func (r *Relay) leaseLost(reason LossReason, n int) {
	owned := r.lease.owned()
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
	r.lease.apply(func(b leaseBook) leaseBook {
		prev = b.owned
		st = lease.RoundState{Round: u.fullRounds, Standby: b.standby, Settled: b.settled}
		b, expired = b.roundStarted(start)
		return b
	})
	if expired {
		r.hooks.leaseLost(len(prev), LossExpiredBetweenRounds)
	}

	ctx, span := r.tracer.Start(u.ctx, SpanAcquire)
	span.Annotate(AnnotationRelayID, r.opts.RelayID)
	acq, err := r.store.AcquireLeases(ctx, r.req, st)
	u.res.Rounds++
	elapsed := r.clock.Now().Sub(start)
	if err != nil {
		span.Annotate(AnnotationOutcome, "error")
		span.End(err)
		r.hooks.round(elapsed, err)
		if errors.Is(err, ErrMisconfigured) {
			r.lease.apply(func(b leaseBook) leaseBook {
				b.standby, b.settled = acq.Standby, acq.Settled
				return b
			})
			return err
		}
		// Ownership is unknown after a failed lease call: re-acquire.
		r.lease.apply(func(b leaseBook) leaseBook { return b.roundFailed(acq) })
		if len(prev) > 0 {
			r.leaseLost(LossAcquisitionFailed, len(prev))
		}
		return errCycle("acquire leases", err)
	}
	u.res.Refused += acq.Refused
	if !acq.Rested {
		u.fullRounds++
	}

	r.lease.apply(func(b leaseBook) leaseBook { return b.installed(start, acq) })
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
	r.hooks.round(elapsed, nil)
	if n := len(acq.Lost); n > 0 {
		r.hooks.leaseLost(n, LossKeepRefused)
	}
	r.hooks.leases(len(acq.Owned), len(acq.Claimed), len(acq.Released))
	if !slices.Equal(prev, acq.Owned) {
		r.log.LogAttrs(u.ctx, slog.LevelInfo, "owned buckets changed", slog.Any("owned", acq.Owned),
			slog.Any("claimed", acq.Claimed), slog.Any("released", acq.Released))
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
			return r.store.RenewLeases(ctx, r.req, owned)
		})
	}()
	return func() {
		cancel()
		<-done
	}
}

// stopper is the end of a joined run.
type stopper struct{ *run }

// stop is the end of a joined run: release the leases if that fits before
// the deadline, then look at the released buckets with a strongly
// consistent read and send the wake-up the relay owes if work is left, so
// no committed message waits for the schedule.
func (u stopper) stop() {
	r := u.r
	book := r.lease.snapshot()
	owned := slices.Clone(book.owned)
	if !book.attempted {
		return
	}
	now := r.clock.Now()
	check := owned
	if !u.in.Deadline.IsZero() && u.in.Deadline.Sub(now) < u.releaseReserve() {
		u.res.ReleaseSkipped = true
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "no time left to release leases; they lapse after LeaseDuration",
			slog.Any("owned", owned), slog.Duration("left", u.in.Deadline.Sub(now)))
		r.hooks.releaseSkipped(len(owned))
		r.resetLease()
		return
	}
	ctx, span := r.tracer.Start(u.ctx, SpanRelease)
	span.Annotate(AnnotationRelayID, r.opts.RelayID)
	r.lease.apply(func(b leaseBook) leaseBook {
		b.standby = lease.Standby{}
		return b
	})
	rel, err := r.store.ReleaseLeases(ctx, r.req)
	span.End(err)
	r.resetLease()
	released := 0
	if err != nil {
		r.log.LogAttrs(u.ctx, slog.LevelError, "releasing leases failed; they lapse after LeaseDuration", slog.Any("error", err))
	} else {
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
// probes the released buckets again lease.OwnerViewTTL after the release, when
// no such view is trusted any more, and returns those pending. Only a
// relay that can send the continuation watches, and only if the wait fits
// before the deadline.
func (u stopper) watchReleased(released []int, releasedAt time.Time) []int {
	r := u.r
	if r.notifier == nil || u.ctx.Err() != nil {
		return nil
	}
	until := releasedAt.Add(lease.OwnerViewTTL)
	if !u.in.Deadline.IsZero() && u.in.Deadline.Sub(until) < u.releaseReserve()/2 {
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "no time left to watch the released buckets; commits of the last second wait for the next trigger",
			slog.Any("released", released))
		return nil
	}
	if !sleep.For(until.Sub(r.clock.Now()), u.ctx.Done()) {
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
func (u stopper) wake(buckets []int) {
	r := u.r
	hop := u.in.Hop + 1
	if r.notifier == nil || hop > r.maxHops {
		r.log.LogAttrs(u.ctx, slog.LevelInfo, "work left for the next trigger", slog.Any("buckets", buckets),
			slog.Int("hop", hop), slog.Int("maxHops", r.maxHops))
		return
	}
	err := r.notifier.Notify(u.ctx, WakeUp{Buckets: buckets, Hop: hop})
	r.hooks.wakeUp(WakeUp{Buckets: buckets, Hop: hop}, err)
	if err != nil {
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "wake-up failed; the schedule will find the work", slog.Any("error", err))
		return
	}
	u.res.WakeUpSent = true
}

// releaseReserve is the least time before the deadline the stop protocol
// needs: half the stop margin, at most a second.
func (u stopper) releaseReserve() time.Duration {
	if u.budgetEnd.IsZero() {
		return 0
	}
	return min(u.in.Deadline.Sub(u.budgetEnd)/2, time.Second)
}

// resetLease forgets all lease state so the next run starts with a round.
func (r *Relay) resetLease() {
	r.lease.apply(leaseBook.released)
	r.park.book.retain(nil, nil)
}

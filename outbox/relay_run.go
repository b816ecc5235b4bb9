package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/outbox/internal/sleep"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// run is the state of one Run call.
type run struct {
	r *Relay
	// stop is the caller's ctx: when it ends the run stops (stopPlan).
	stop context.Context
	// ctx is the run's I/O context: the caller's values, not its end, so
	// what is in flight when the run stops settles; cut ends it at the
	// stop's settle point.
	ctx context.Context
	cut context.CancelCauseFunc
	st  stopState
	// drains counts the bucket drains running; one still in flight at the
	// settle point outlives its sweep, never its Run.
	drains sync.WaitGroup
	in     RunInput
	res    RunResult

	budgetEnd time.Time // zero: no budget
	// waitFor are hinted buckets whose holder is stopping or whose lease is
	// about to lapse: the relay does not linger out before it got them.
	waitFor []int
	// firstLook is when the join check's trust check started;
	// knownPending are the hinted buckets it found orphaned with a message
	// at their head, which the first sweep fetches before the forced probe
	// (firstSweep).
	firstLook    time.Time
	knownPending []int

	// deleted counts the rows the draining buckets deleted (res.Deleted).
	deleted atomic.Int64

	ready         []int
	forceDiscover bool
	lastProbe     time.Time
	lastBusyProbe time.Time
	lastWork      time.Time
	fruitless     int
	// fullRounds counts the acquisition rounds of this run that did not
	// rest; the lease round prunes on the first and every lease.PruneEvery-th.
	fullRounds int
	// initPending waits for a publisher check still running when the run
	// joined, initDone closes when it answers; the first round's lease
	// writes await it until initBy (publisherReady).
	initPending func(join bool) error
	initDone    <-chan struct{}
	initBy      time.Time
}

func (r *Relay) newRun(ctx context.Context, in RunInput) *run {
	if in.Trigger == "" {
		in.Trigger = TriggerDirect
	}
	now := r.clock.Now()
	u := &run{r: r, stop: ctx, in: in, forceDiscover: true, lastWork: now}
	u.ctx, u.cut = context.WithCancelCause(context.WithoutCancel(ctx))
	u.res.Started = now
	if !in.Deadline.IsZero() {
		u.budgetEnd = in.Deadline.Add(-r.stopMargin(now, in.Deadline))
	}
	return u
}

func (u *run) execute() error {
	r := u.r
	if u.stop.Err() != nil {
		u.res.Reason = StopCancelled
		return nil
	}
	warm := r.pubInitialised // before this run's initialisation sets it
	initialised, initDone := u.startInit()
	// Every way out that does not join cuts the initialisation short and
	// waits for it: Run leaves no goroutine behind.
	defer initialised(false)
	join, err := joinCheck{u}.shouldJoin()
	switch {
	case errors.Is(err, ErrMisconfigured):
		// The table says this relay cannot serve it (another bucket count):
		// stop before the heartbeat.
		u.res.Reason = StopFatal
		r.log.LogAttrs(u.ctx, slog.LevelError, "relay misconfigured; claiming nothing", slog.Any("error", err))
		return err
	case err != nil:
		// A failed probe is no reason to strand work: join and let the
		// acquisition loop decide.
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "pre-join check failed; joining", slog.Any("error", err))
		join = true
	}
	if !join {
		return nil
	}
	if r.gate != nil {
		if err := r.gate.CheckServable(u.ctx); err != nil {
			u.res.Reason = StopFatal
			r.log.LogAttrs(u.ctx, slog.LevelError, "relay may not serve its generation; claiming nothing", slog.Any("error", err))
			return err
		}
	}
	if warm && initDone != nil && !closed(initDone) {
		// A warm publisher's initialisation is a check of its connection:
		// it runs on beside the heartbeat and the round's read, and the
		// round's first lease write awaits it (publisherReady). A cold one,
		// or one that has answered already, is awaited here: a connection
		// lasts long enough for a relay woken a moment earlier to claim
		// the buckets, which the second look then sees, and a relay that
		// already knows it cannot reach Kafka does not announce itself.
		u.initPending, u.initDone, u.initBy = initialised, initDone, r.clock.Now().Add(lease.ClaimWindow)
	} else {
		if err := initialised(true); err != nil {
			u.res.Reason = StopFatal
			return err
		}
		if u.stop.Err() != nil {
			u.res.Reason = StopCancelled
			return nil
		}
		if still, err := (joinCheck{u}).stillOrphaned(); err != nil {
			r.log.LogAttrs(u.ctx, slog.LevelWarn, "re-check before joining failed; joining", slog.Any("error", err))
		} else if !still {
			return nil
		}
	}
	u.res.Joined = true
	stopRenewer := u.renewer()
	loopErr := u.loop()
	stopRenewer()
	stopper{u}.stop()
	return loopErr
}

// overBudget reports whether the run must stop starting new work.
func (u *run) overBudget(now time.Time) bool {
	return !u.budgetEnd.IsZero() && !now.Before(u.budgetEnd)
}

// startInit starts the publisher's initialisation and returns the wait
// for it: its error when the run joins, nothing (the initialisation cut
// short) when it does not; calls after the first return the first's
// answer. A wake-up's run connects to Kafka while its join check reads
// the table, as both stand on the path from a commit to its publish; a
// schedule sweep, which seldom joins, connects only once it joins.
func (u *run) startInit() (wait func(join bool) error, done <-chan struct{}) {
	var err error
	waited := false
	if u.in.Trigger != TriggerWake {
		return func(join bool) error {
			if !waited && join {
				err = u.initPublisher(u.ctx)
			}
			waited = true
			return err
		}, nil
	}
	ctx, cancel := context.WithCancel(u.ctx)
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		err = u.initPublisher(ctx)
	}()
	return func(join bool) error {
		if waited {
			return err
		}
		if !join {
			cancel()
		}
		<-answered
		cancel()
		waited = true
		return err
	}, answered
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// initPublisher connects to Kafka before the relay claims anything, bounded
// by the budget, so a relay that cannot reach the brokers leaves its share
// to peers that can.
func (u *run) initPublisher(ctx context.Context) error {
	ctx, cancel := u.untilSignal(ctx)
	defer cancel()
	if !u.in.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = withClockTimeout(ctx, max(u.budgetEnd.Sub(u.r.clock.Now()), time.Millisecond))
		defer cancel()
	}
	if err := u.r.pub.Init(ctx); err != nil {
		return errCycle("initialise publisher", err)
	}
	u.r.pubInitialised = true
	return nil
}

// errNoPublisher marks a run's end because the publisher check it joined
// beside failed (publisherReady): the run stops, claiming nothing.
var errNoPublisher = errors.New("outbox: no publisher, claiming nothing")

// publisherReady waits for the publisher check the run joined beside, if
// any, before the run's first lease write (awaitPublisher), and before its
// first drain if a round left it owning a lease without a write: a relay
// that cannot reach Kafka claims and keeps nothing, as step 3 of a relay
// run says; having heartbeated, it then stops, which stamps its heartbeat
// stopped and releases what it owns. A check still unanswered
// lease.ClaimWindow after the run joined is a slow connection, not a
// check: peers take a heartbeat that young for a claim in flight, and an
// older one for a relay due its share, which one that claims nothing would
// strand, so the relay leaves the fleet again (stampOut) and waits for it
// as for a cold one before its next round.
func (u *run) publisherReady() error {
	if u.initPending == nil {
		return nil
	}
	wait := u.initPending
	u.initPending = nil
	slow := sleep.For(u.initBy.Sub(u.r.clock.Now()), u.initDone)
	if slow {
		u.stampOut()
	}
	if err := wait(true); err != nil {
		return fmt.Errorf("%w: %w", errNoPublisher, err)
	}
	if slow {
		return errRejoin
	}
	return nil
}

// errRejoin fails the round of a relay that left the fleet while its
// publisher connected (stampOut): its next round heartbeats again.
var errRejoin = errors.New("outbox: rejoining once the publisher connected")

// stampOut stamps the relay's heartbeat stopped and releases what it holds
// (nothing, before its first lease write), so peers count it out while it
// waits for a slow publisher.
func (u *run) stampOut() {
	r := u.r
	if _, err := r.store.ReleaseLeases(u.ctx, r.opts.RelayID); err != nil {
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "stamping the heartbeat stopped while Kafka connects failed", slog.Any("error", err))
	}
	r.resetLease()
}

// awaitPublisher is the relay's store seen by its lease round: the round's
// first lease write waits for the publisher check (publisherReady).
type awaitPublisher struct {
	Store
	u *run
}

func (a awaitPublisher) WriteLeases(ctx context.Context, relayID string, op lease.Op, writes []lease.Write) (accepted, refused []int, err error) {
	if len(writes) > 0 {
		if err := a.u.publisherReady(); err != nil {
			return nil, nil, err
		}
	}
	return a.Store.WriteLeases(ctx, relayID, op, writes)
}

// loop runs cycles until the work is done, the budget is spent or ctx ends.
// It returns only misconfiguration errors.
func (u *run) loop() error {
	r := u.r
	for {
		now := r.clock.Now()
		if u.stop.Err() != nil {
			u.res.Reason = StopCancelled
			return nil
		}
		if u.overBudget(now) || u.ctx.Err() != nil {
			u.res.Reason = StopBudget
			return nil
		}
		published, err := u.cycle(now)
		if err != nil {
			if errors.Is(err, ErrMisconfigured) {
				u.res.Reason = StopFatal
				r.log.LogAttrs(u.ctx, slog.LevelError, "relay misconfigured; stopping", slog.Any("error", err))
				return err
			}
			if isContextErr(err) && u.ctx.Err() != nil {
				// Cut at the settle point of a stop that began meanwhile.
				u.res.Reason = StopBudget
				if u.stop.Err() != nil {
					u.res.Reason = StopCancelled
				}
				return nil
			}
			if errors.Is(err, errRejoin) {
				continue
			}
			if errors.Is(err, errNoPublisher) {
				u.res.Reason = StopFatal
				r.log.LogAttrs(u.ctx, slog.LevelError, "relay cannot reach Kafka; stopping", slog.Any("error", err))
				return err
			}
			u.res.Errors++
			delay := u.errorBackoff(published)
			r.log.LogAttrs(u.ctx, slog.LevelError, "relay cycle failed", slog.Any("error", err), slog.Duration("backoff", delay))
			r.hooks.retry(delay, err)
			u.forceDiscover = true
			u.wait(delay)
			continue
		}
		if published > 0 {
			u.fruitless = 0
			u.lastWork = r.clock.Now()
			r.work.record(u.lastWork, r.opts.PollInterval/2)
			continue
		}
		u.fruitless = 0
		now = r.clock.Now()
		if done, err := u.idleExit(now); err != nil {
			u.res.Errors++
			u.forceDiscover = true
			r.log.LogAttrs(u.ctx, slog.LevelWarn, "idle check failed", slog.Any("error", err))
		} else if done {
			u.res.Reason = StopDrained
			return nil
		}
		u.idle(u.idleDelay(r.clock.Now()))
	}
}

// cycle is one pass: acquire when due, discover, drain. It returns how many
// messages were published.
func (u *run) cycle(now time.Time) (int, error) {
	r := u.r
	if r.lease.snapshot().RoundDue(now) || u.waitingAcquisitionDue(now) {
		if err := u.acquire(); err != nil {
			return 0, err
		}
	}
	owned, err := r.lease.check(r.clock.Now())
	if err != nil {
		return 0, errCycle("check lease", err)
	}
	if len(owned) == 0 {
		return 0, nil
	}
	if len(firstSweep(u.forceDiscover, u.knownPending, owned)) == 0 {
		// Not before a woken relay's first sweep: a backlog count is
		// housekeeping, not on the wake-up's path to its publish.
		u.sampleBacklog(owned)
	}
	if err := u.discover(owned); err != nil {
		return 0, err
	}
	if len(u.ready) == 0 {
		return 0, nil
	}
	return u.sweep()
}

// waiting reports whether the run still waits for hinted buckets it does not
// hold yet (their holder stopped, or their lease is about to lapse).
func (u *run) waiting() bool { return len(u.waitFor) > 0 && !u.holdsAll(u.waitFor) }

// waitingAcquisitionDue makes a waiting run re-acquire every PollInterval
// instead of every LeaseRenewInterval, so it claims the bucket it was woken
// for as soon as the stopping holder released it.
func (u *run) waitingAcquisitionDue(now time.Time) bool {
	return u.waiting() && now.Sub(u.r.lease.snapshot().AcquiredAt()) >= u.r.opts.PollInterval
}

// holdsAll reports whether the relay owns every bucket of bs.
func (u *run) holdsAll(bs []int) bool {
	owned := u.r.lease.owned()
	for _, b := range bs {
		if !slices.Contains(owned, b) {
			return false
		}
	}
	return true
}

// discover refreshes the ready list: every owned bucket when forced, the
// buckets probeDue says are due otherwise. A probe only decides when a
// bucket is fetched: the fetch is consistent, so a probe that misses a
// message delays it to the next probe and never reorders or loses it.
func (u *run) discover(owned []int) error {
	r := u.r
	now := r.clock.Now()
	if r.bell != nil {
		// A rung bucket is fetched without a probe: its writer committed
		// before it rang, and the fetch is strongly consistent.
		rung := intersect(r.bell.Take(), owned)
		defer func() { u.ready = union(u.ready, rung) }()
	}
	if first := firstSweep(u.forceDiscover, u.knownPending, owned); len(first) > 0 {
		u.knownPending = nil
		u.ready = union(intersect(u.ready, owned), first)
		return nil
	}
	u.knownPending = nil
	plan := probeDue(now, owned, u.ready, u.probeTimes(), r.opts.PollInterval, r.opts.TargetLatency)
	if u.forceDiscover {
		plan = probePlan{buckets: owned, poll: true, busy: true}
	}
	if !plan.poll && !plan.busy {
		u.ready = intersect(u.ready, owned)
		return nil
	}
	var pending []int
	if len(plan.buckets) > 0 {
		var err error
		if pending, err = r.store.PendingBuckets(u.ctx, plan.buckets); err != nil {
			return errCycle("probe pending buckets", err)
		}
	}
	if plan.busy {
		u.lastBusyProbe = now
	}
	if !plan.poll {
		u.ready = union(intersect(u.ready, owned), pending)
		return nil
	}
	replays, err := r.park.replayReady(u.ctx, owned, u.forceDiscover)
	if err != nil {
		return err
	}
	// The buckets this probe left out are busy ones, never ready.
	pending = union(pending, replays)
	u.forceDiscover = false
	u.lastProbe = now
	u.ready = pending
	return nil
}

func (u *run) probeTimes() probeTimes {
	return probeTimes{poll: u.lastProbe, busy: u.lastBusyProbe, worked: u.r.worked}
}

// errorBackoff implements the relay-wide failure backoff: the base after a
// cycle that still published, otherwise growing with consecutive fruitless
// failures, and never past the next renewal while buckets are owned.
func (u *run) errorBackoff(published int) time.Duration {
	r := u.r
	base, renew := r.opts.ErrorBackoff, r.opts.LeaseRenewInterval
	if published > 0 {
		u.fruitless = 0
		return base
	}
	u.fruitless++
	d := r.heads.backoff(u.fruitless, base, renew)
	if book := r.lease.snapshot(); u.fruitless > 1 && len(book.Owned()) > 0 {
		if untilRenew := book.UntilRound(r.clock.Now()); untilRenew < d {
			d = max(untilRenew, base)
		}
	}
	return d
}

// idleDelay is how long an idle relay waits: until the next renewal, the
// next poll of owned buckets, the earliest head-row retry, or the budget.
func (u *run) idleDelay(now time.Time) time.Duration {
	r := u.r
	book := r.lease.snapshot()
	d := book.UntilRound(now)
	if owned := book.Owned(); len(owned) > 0 {
		d = min(d, probeDue(now, owned, u.ready, u.probeTimes(), r.opts.PollInterval, r.opts.TargetLatency).next)
	}
	if u.waiting() {
		d = min(d, max(r.opts.PollInterval-now.Sub(book.AcquiredAt()), 0))
	}
	if retry, ok := r.heads.earliestRetry(); ok {
		d = min(d, max(retry.Sub(now), 0))
	}
	if r.opts.Mode == ModeDrain {
		d = min(d, max(u.lastWork.Add(r.opts.linger(&r.work)).Sub(now), 0))
	}
	if !u.budgetEnd.IsZero() {
		d = min(d, max(u.budgetEnd.Sub(now), 0))
	}
	if d <= 0 {
		// Everything is due now: let the loop act instead of spinning on a
		// zero timer.
		d = time.Millisecond
	}
	return d
}

// idleExit decides whether a drain-mode relay with nothing to do stops: only
// after its linger (IdleTimeout, or MaxIdleTimeout under steady traffic)
// without work, when it is not waiting for a hinted bucket,
// and when no bucket outside its set has pending work without a live owner.
func (u *run) idleExit(now time.Time) (bool, error) {
	r := u.r
	if r.opts.Mode != ModeDrain || now.Sub(u.lastWork) < r.opts.linger(&r.work) {
		return false, nil
	}
	if u.waiting() && !u.overBudget(now) {
		still, err := joinCheck{u}.stillWaiting(now)
		if err != nil || still {
			return false, err
		}
	}
	owned := r.lease.owned()
	if len(u.ready) > 0 || r.heads.backingOff() {
		return false, nil
	}
	others := make([]int, 0, r.opts.BucketCount)
	for b := range r.opts.BucketCount {
		if !slices.Contains(owned, b) {
			others = append(others, b)
		}
	}
	pending, err := r.store.PendingBuckets(u.ctx, append(owned, others...))
	if err != nil {
		return false, err
	}
	replays, err := r.park.replayReady(u.ctx, append(owned, others...), false)
	if err != nil {
		return false, err
	}
	pending = union(pending, replays)
	if len(pending) == 0 {
		return true, nil
	}
	if len(intersect(pending, owned)) > 0 {
		u.ready = intersect(pending, owned)
		u.lastProbe = now
		return false, nil
	}
	coord, err := r.store.ReadCoordination(u.ctx)
	if err != nil {
		return false, err
	}
	orphans := joinCheck{u}.orphaned(coord, pending, now)
	if len(orphans) == 0 {
		return true, nil
	}
	// Pending work without a live owner: take part in the next round now
	// instead of leaving it to the next schedule.
	r.lease.apply(lease.Book.Forced)
	u.lastWork = now
	return false, nil
}

// wait pauses the run for d, or until the caller's ctx ends.
func (u *run) wait(d time.Duration) { sleep.For(d, u.stop.Done()) }

// idle is the wait of a relay with nothing to do: it also ends when the
// doorbell rings for a bucket the relay holds. A failed cycle's backoff
// is a wait: rings do not shorten it.
func (u *run) idle(d time.Duration) {
	if u.r.bell == nil {
		u.wait(d)
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-u.stop.Done():
	case <-u.r.bell.Rung():
	}
}

// backlogTimeout bounds one backlog sample.
const backlogTimeout = 5 * time.Second

// sampleBacklog reports the backlog when this relay holds bucket 0 and the
// last sample is older than BacklogInterval. A failed sample is logged and
// skipped: metrics never stop the relay.
func (u *run) sampleBacklog(owned []int) {
	r := u.r
	now := r.clock.Now()
	if r.opts.BacklogInterval < 0 || !slices.Contains(owned, 0) || u.overBudget(now) {
		return
	}
	if !r.sampledAt.IsZero() && now.Sub(r.sampledAt) < r.opts.BacklogInterval {
		return
	}
	r.sampledAt = now
	// The sample is housekeeping: it must not eat the budget of a relay
	// whose backlog is large (and slow to count), so it gets its own bound.
	ctx, cancel := withClockTimeout(u.ctx, backlogTimeout)
	bl, err := r.store.Backlog(ctx)
	if err != nil && timedOut(ctx) {
		err = fmt.Errorf("took longer than %v: %w", backlogTimeout, err)
	}
	cancel()
	if err != nil {
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "backlog sample failed", slog.Any("error", err))
		return
	}
	var age time.Duration
	if !bl.Oldest.IsZero() {
		age = max(r.clock.Now().Sub(bl.Oldest), 0)
	}
	r.hooks.backlog(bl.Pending, age)
	if r.park.poison {
		r.hooks.parkedBacklog(bl.Parked)
	}
	if bl.Pending > 0 {
		u.sampleStranded(now)
	}
}

// StrandedEvery is how many backlog intervals pass between two stranded
// counts (StrandedCounter) of the holder of bucket 0, starting from the
// relay's creation: a count probes as many buckets again as the backlog
// sample, for messages that only a writer ignoring the table's layout
// record can leave there, so it runs at a tenth of the sample's rate
// (every 5 minutes with the default BacklogInterval), and only after a
// sample that found messages pending: such a writer puts most of its
// messages within the count, and an idle outbox pays nothing for the
// count (the alarm keeps the last one).
const StrandedEvery = 10

// sampleStranded counts the stranded messages when the last count is
// StrandedEvery backlog intervals old. A failed count is logged and
// skipped, as a failed sample is.
func (u *run) sampleStranded(now time.Time) {
	r := u.r
	sc, ok := r.store.(StrandedCounter)
	if !ok || now.Sub(r.strandedAt) < StrandedEvery*r.opts.BacklogInterval {
		return
	}
	r.strandedAt = now
	ctx, cancel := withClockTimeout(u.ctx, backlogTimeout)
	st, err := sc.Stranded(ctx)
	cancel()
	if err != nil {
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "stranded count failed", slog.Any("error", err))
		return
	}
	if st.Messages > 0 {
		r.log.LogAttrs(u.ctx, slog.LevelError, "messages wait in buckets beyond the bucket count, where no relay reads them: a writer uses another bucket count",
			slog.Int64("stranded", st.Messages), slog.Any("buckets", st.Buckets), slog.Int("bucketCount", r.opts.BucketCount))
	}
	r.hooks.stranded(st.Messages)
}

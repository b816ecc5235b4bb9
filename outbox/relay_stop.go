package outbox

import (
	"context"
	"errors"
	"sync"
	"time"
)

// minWakeUp is the least time a continuation wake-up is sent with: an
// asynchronous invoke answers in tens of milliseconds, and with less left
// the schedule finds the work instead.
const minWakeUp = 100 * time.Millisecond

// errSettleTimeout is the cause of a run's I/O context cut at the stop's
// settle point.
var errSettleTimeout = errors.New("outbox: the run's stop reached its settle point")

// stopState is a run's stop: its plan, revised when ctx ends, and the
// timer that cuts the run's I/O context at the plan's settle point.
type stopState struct {
	mu       sync.Mutex
	plan     stopPlan
	signaled bool
	timer    *time.Timer
}

// watchStop plans the run's stop from its deadline, then again when the
// caller's ctx ends (the signal); it returns the function that stops
// watching.
func (u *run) watchStop() (unwatch func()) {
	u.stopAt(time.Time{})
	after := context.AfterFunc(u.stop, func() { u.stopAt(u.r.clock.Now()) })
	return func() {
		after()
		u.st.mu.Lock()
		if u.st.timer != nil {
			u.st.timer.Stop()
		}
		u.st.mu.Unlock()
	}
}

// stopAt revises the plan for a signal at signaled (zero: none yet) and
// schedules the cut of the I/O context at its settle point.
func (u *run) stopAt(signaled time.Time) {
	r := u.r
	window := u.in.StopTimeout
	if window <= 0 {
		window = r.opts.StopMargin
	}
	plan := planStop(u.in.Deadline, u.budgetEnd, signaled, window)
	u.st.mu.Lock()
	defer u.st.mu.Unlock()
	u.st.plan, u.st.signaled = plan, !signaled.IsZero()
	if !plan.bounded() {
		return
	}
	if u.st.timer != nil {
		u.st.timer.Stop()
	}
	u.st.timer = time.AfterFunc(plan.settleBy.Sub(r.clock.Now()), func() { u.cut(errSettleTimeout) })
}

// plan returns the stop's plan and whether ctx ended.
func (u *run) plan() (stopPlan, bool) {
	u.st.mu.Lock()
	defer u.st.mu.Unlock()
	return u.st.plan, u.st.signaled
}

// stopping reports whether the run must start nothing new: ctx ended, the
// budget is spent, or the settle point passed.
func (u *run) stopping(now time.Time) bool {
	return u.stop.Err() != nil || u.overBudget(now) || u.ctx.Err() != nil
}

// afterSettle returns the context of the steps after the settle point (the
// release, the look at the released buckets, the wake-up): the run's
// values, ending at the plan's returnBy.
func (u *run) afterSettle(plan stopPlan) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(u.ctx)
	if !plan.bounded() {
		return context.WithCancel(ctx)
	}
	return withClockTimeout(ctx, plan.returnBy.Sub(u.r.clock.Now()))
}

// untilSignal returns a copy of ctx that also ends when the caller's ctx
// does: for what a stop cuts at once (connecting to Kafka), as opposed to
// what it lets settle.
func (u *run) untilSignal(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(u.stop, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// settleGrace is how long a sweep cut at the settle point waits for its
// drains, whose I/O the cut ends, to come back before the stop goes on
// without those that do not (a publish waiting for records on the wire).
// In a testing/synctest bubble the wait's timer fires only once every
// drain is blocked, so a drain that honours the cut always makes it.
const settleGrace = 20 * time.Millisecond

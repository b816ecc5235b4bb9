package steady

import (
	"context"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// simClock is the shared manual clock as every simulated process sees it:
// each reading, timer and stop counts as progress for the driver's
// quiescence check.
type simClock struct {
	base *outboxlocal.ManualClock
	act  *activity
}

var _ outbox.Clock = simClock{}

func (c simClock) Now() time.Time {
	c.act.poke()
	return c.base.Now()
}

func (c simClock) NewTimer(d time.Duration) outbox.Timer {
	c.act.poke()
	return simTimer{t: c.base.NewTimer(d), act: c.act}
}

type simTimer struct {
	t   outbox.Timer
	act *activity
}

func (t simTimer) C() <-chan time.Time { return t.t.C() }

func (t simTimer) Stop() bool {
	t.act.poke()
	return t.t.Stop()
}

// deadlineContext gives an invocation the deadline Lambda would: the
// handler converts ctx.Deadline() to its clock as "the same time left", so
// the wall-clock deadline it reports is recomputed at each call from the
// simulated time left. It never expires by itself; the simulated Lambda
// service cancels it when the simulated deadline passes.
type deadlineContext struct {
	context.Context
	clock    outbox.Clock
	deadline time.Time
}

func (c deadlineContext) Deadline() (time.Time, bool) {
	return time.Now().Add(c.deadline.Sub(c.clock.Now())), true
}

package simtime

import (
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// Clock returns base as the participants see it: every reading, timer and
// stop counts as progress for Settle, so a participant that used the clock
// between two looks is never taken for parked.
func (a *Activity) Clock(base *outboxlocal.ManualClock) outbox.Clock {
	return clock{base: base, act: a}
}

type clock struct {
	base *outboxlocal.ManualClock
	act  *Activity
}

func (c clock) Now() time.Time {
	c.act.Poke()
	return c.base.Now()
}

func (c clock) NewTimer(d time.Duration) outbox.Timer {
	c.act.Poke()
	return timer{t: c.base.NewTimer(d), act: c.act}
}

type timer struct {
	t   outbox.Timer
	act *Activity
}

func (t timer) C() <-chan time.Time { return t.t.C() }

func (t timer) Stop() bool {
	t.act.Poke()
	return t.t.Stop()
}

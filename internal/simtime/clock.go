package simtime

import (
	"sync"
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

// CallClock returns base for code that runs inside a call in flight and
// waits on the simulated clock there (a Kafka publisher's second look at a
// topic inside Publish): from a timer's creation to its Stop the call is no
// longer in flight, since its goroutine is parked on the clock only the
// driver moves, as a participant between two calls is. Such code must stop
// every timer it creates, fired or not (outbox.Sleep does). Every use
// counts as progress, as with Clock.
func (a *Activity) CallClock(base *outboxlocal.ManualClock) outbox.Clock {
	return callClock{clock: clock{base: base, act: a}}
}

type callClock struct{ clock }

func (c callClock) NewTimer(d time.Duration) outbox.Timer {
	t := c.clock.NewTimer(d)
	c.act.End()
	return callTimer{Timer: t, resume: sync.OnceFunc(c.act.Begin)}
}

type callTimer struct {
	outbox.Timer
	resume func()
}

func (t callTimer) Stop() bool {
	defer t.resume()
	return t.Timer.Stop()
}

package steady

import (
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

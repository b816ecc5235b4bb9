package simtime

import (
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// TestCallClockTakesItsWaitsOutOfTheCallInFlight: a call that waits on the
// simulated clock is not in flight while it waits, so the driver can move
// the clock to the timer; it is again once the wait ends.
func TestCallClockTakesItsWaitsOutOfTheCallInFlight(t *testing.T) {
	a := NewActivity()
	base := outboxlocal.NewManualClock(time.Unix(0, 0))
	c := a.CallClock(base)
	a.Begin()
	before := a.progress.Load()
	timer := c.NewTimer(time.Second)
	if a.InFlight() != 0 || a.progress.Load() == before {
		t.Fatalf("waiting inside a call: %d in flight, progress %v; want 0 and progress", a.InFlight(), a.progress.Load() != before)
	}
	if !base.AdvanceToNext() {
		t.Fatal("the wait's timer is not on the clock")
	}
	<-timer.C()
	timer.Stop()
	timer.Stop() // a second Stop resumes nothing more
	if a.InFlight() != 1 {
		t.Fatalf("after the wait: %d in flight, want the call's 1", a.InFlight())
	}
	a.End()
}

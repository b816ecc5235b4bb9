package outbox

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// heldClock is a clock whose one timer fires only when the test says so.
type heldClock struct {
	fire    chan time.Time
	d       time.Duration
	stopped bool
}

func (c *heldClock) Now() time.Time { return time.Unix(0, 0) }

func (c *heldClock) NewTimer(d time.Duration) Timer {
	c.d = d
	return heldTimer{c}
}

type heldTimer struct{ c *heldClock }

func (t heldTimer) C() <-chan time.Time { return t.c.fire }
func (t heldTimer) Stop() bool {
	t.c.stopped = true
	return true
}

func TestWithClockTimeout_EndsOnTheClockNotTheWall(t *testing.T) {
	c := &heldClock{fire: make(chan time.Time, 1)}
	ctx, release := withClockTimeout(t.Context(), c, 5*time.Second)
	defer release()
	if _, ok := ctx.Deadline(); ok || c.d != 5*time.Second {
		t.Fatalf("deadline set %v, timer of %v: want no wall deadline and a 5s timer on the clock", ok, c.d)
	}
	if ctx.Err() != nil {
		t.Fatalf("ended before its clock moved: %v", ctx.Err())
	}
	c.fire <- time.Unix(5, 0)
	<-ctx.Done()
	if !timedOut(ctx) {
		t.Fatalf("ended with cause %v, want the clock's timeout", context.Cause(ctx))
	}
}

func TestWithClockTimeout_ReleaseStopsTheTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &heldClock{fire: make(chan time.Time, 1)}
		ctx, release := withClockTimeout(t.Context(), c, time.Second)
		release()
		release() // a second release is harmless
		<-ctx.Done()
		if timedOut(ctx) {
			t.Fatal("a released context reports a timeout")
		}
		synctest.Wait() // the watcher has stopped the timer and returned
		if !c.stopped {
			t.Fatal("the timer was not stopped")
		}
	})
}

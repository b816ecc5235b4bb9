package outbox

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Clock is the source of time for every lease decision and every wait.
// Services hold one, SystemClock; tests run the relay with SystemClock in a
// testing/synctest bubble, whose clock moves only when every goroutine of
// the bubble is blocked.
type Clock interface {
	// Now returns the current time. Implementations return UTC or a time
	// whose instant is all that matters: callers convert to ticks.
	Now() time.Time
	// NewTimer returns a timer that fires once, d after Now. A timer with
	// d <= 0 fires at once.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer created by a Clock.
type Timer interface {
	// C delivers the time the timer fired, once.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did so.
	Stop() bool
}

// SystemClock is the wall clock. The zero value is ready to use.
type SystemClock struct{}

// Now returns time.Now in UTC.
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// NewTimer wraps time.NewTimer.
func (SystemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (s systemTimer) C() <-chan time.Time { return s.t.C }
func (s systemTimer) Stop() bool          { return s.t.Stop() }

// Sleep waits for d on clock c or until ctx-like done closes; it reports
// false when done closed first. It exists so loops wait on the injected
// clock, never on the wall clock.
func Sleep(c Clock, d time.Duration, done <-chan struct{}) bool {
	if d <= 0 {
		return true
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-done:
		return false
	}
}

// errClockTimeout is the cause of a context withClockTimeout ended.
var errClockTimeout = errors.New("timed out on the relay's clock")

// withClockTimeout returns a copy of ctx that ends once d has passed on c,
// with errClockTimeout as its cause, and the function that releases it. A
// bound on I/O then runs on the clock every decision of the relay takes:
// the wall clock in production, a synctest bubble's in a simulation, on
// which a call is never cut short by how slow the machine running it is.
func withClockTimeout(ctx context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	t := c.NewTimer(d)
	released := make(chan struct{})
	go func() {
		select {
		case <-t.C():
			cancel(errClockTimeout)
		case <-released:
			t.Stop()
		}
	}()
	return ctx, sync.OnceFunc(func() {
		close(released)
		cancel(context.Canceled)
	})
}

// timedOut reports whether ctx, made by withClockTimeout, ended because
// its time ran out.
func timedOut(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errClockTimeout) }

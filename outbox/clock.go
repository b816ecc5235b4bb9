package outbox

import (
	"context"
	"errors"
	"time"
)

// Clock is the source of every time reading for lease decisions. Waits are
// the time package's, never a Clock's: a host whose clock is skewed still
// waits true durations, as a host with a wrong wall clock does. Services
// hold SystemClock, the default; tests run the relay with SystemClock in a
// testing/synctest bubble, whose clock moves only when every goroutine of
// the bubble is blocked.
type Clock interface {
	// Now returns the current time. Implementations return UTC or a time
	// whose instant is all that matters: callers convert to ticks.
	Now() time.Time
}

// SystemClock is the wall clock. The zero value is ready to use.
type SystemClock struct{}

// Now returns time.Now in UTC.
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// errClockTimeout is the cause of a context that withClockTimeout ended.
var errClockTimeout = errors.New("timed out")

// withClockTimeout returns a copy of ctx that ends once d has passed, with
// errClockTimeout as its cause, and the function that releases it. The
// bound runs on the time package's clock: the wall clock in production, a
// synctest bubble's in a simulation, on which a call is never cut short by
// how slow the machine running it is.
func withClockTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, errClockTimeout)
}

// timedOut reports whether ctx, made by withClockTimeout, ended because
// its time ran out.
func timedOut(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errClockTimeout) }

package outbox

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestClock(t *testing.T) {
	t.Run("WithClockTimeout_EndsOnTheBubblesClock", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			ctx, release := withClockTimeout(t.Context(), 5*time.Second)
			defer release()
			if d, ok := ctx.Deadline(); !ok || d != start.Add(5*time.Second) {
				t.Fatalf("deadline %v (set %v), want 5s after the start on the bubble's clock", d, ok)
			}
			time.Sleep(5*time.Second - time.Nanosecond)
			if ctx.Err() != nil {
				t.Fatalf("ended before its time passed: %v", ctx.Err())
			}
			<-ctx.Done()
			if took := time.Since(start); took != 5*time.Second {
				t.Fatalf("ended after %v, want 5s", took)
			}
			if !timedOut(ctx) {
				t.Fatalf("ended with cause %v, want the clock's timeout", context.Cause(ctx))
			}
		})
	})

	t.Run("WithClockTimeout_ReleaseEndsItWithoutATimeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, release := withClockTimeout(t.Context(), time.Second)
			release()
			release() // a second release is harmless
			<-ctx.Done()
			if timedOut(ctx) {
				t.Fatal("a released context reports a timeout")
			}
			// Past the bound, the released context keeps its cause: its
			// timer no longer ends it.
			time.Sleep(2 * time.Second)
			if cause := context.Cause(ctx); cause != context.Canceled {
				t.Fatalf("cause %v after the bound passed, want context.Canceled", cause)
			}
		})
	})
}

package sleep

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestFor(t *testing.T) {
	t.Run("waits the full duration", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			if !For(3*time.Second, make(chan struct{})) {
				t.Fatal("For reported an interruption nobody sent")
			}
			if got := time.Since(start); got != 3*time.Second {
				t.Fatalf("For waited %v, want 3s", got)
			}
		})
	})
	t.Run("returns when done closes", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			done := make(chan struct{})
			time.AfterFunc(time.Second, func() { close(done) })
			start := time.Now()
			if For(time.Hour, done) {
				t.Fatal("For reported a full wait although done closed")
			}
			if got := time.Since(start); got != time.Second {
				t.Fatalf("For returned after %v, want 1s", got)
			}
		})
	})
	t.Run("a non-positive duration ignores done", func(t *testing.T) {
		done := make(chan struct{})
		close(done)
		for _, d := range []time.Duration{0, -time.Second} {
			if !For(d, done) {
				t.Fatalf("For(%v) with done closed = false, want true at once", d)
			}
		}
	})
}

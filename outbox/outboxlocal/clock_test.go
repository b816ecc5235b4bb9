package outboxlocal

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func fired(tm outbox.Timer) bool {
	select {
	case <-tm.C():
		return true
	default:
		return false
	}
}

func TestManualClockFiresTimersAtTheirDeadline(t *testing.T) {
	t.Parallel()
	c := NewManualClock(epoch)
	a, b := c.NewTimer(2*time.Second), c.NewTimer(5*time.Second)
	if c.Waiters() != 2 {
		t.Fatalf("%d waiters, want 2", c.Waiters())
	}
	c.Advance(time.Second)
	if fired(a) || fired(b) {
		t.Fatal("a timer fired before its deadline")
	}
	c.Advance(time.Second)
	if !fired(a) || fired(b) {
		t.Fatal("only the 2 s timer must fire at 2 s")
	}
	if b.Stop() != true || b.Stop() != false || a.Stop() != false {
		t.Fatal("Stop must report true once for a pending timer, false after firing or stopping")
	}
	c.Advance(time.Hour)
	if fired(b) {
		t.Fatal("a stopped timer fired")
	}
	if now := c.Now(); !now.Equal(epoch.Add(time.Hour + 2*time.Second)) {
		t.Fatalf("now %v", now)
	}
	if !fired(c.NewTimer(0)) {
		t.Fatal("a zero-duration timer must have fired already")
	}
}

func TestManualClockSetBackwardFiresNothing(t *testing.T) {
	t.Parallel()
	c := NewManualClock(epoch)
	tm := c.NewTimer(time.Minute)
	c.Set(epoch.Add(-time.Hour))
	if fired(tm) || !c.Now().Equal(epoch.Add(-time.Hour)) {
		t.Fatal("setting the clock back must move Now and fire nothing")
	}
	c.Set(epoch.Add(time.Minute))
	if !fired(tm) {
		t.Fatal("the timer must fire at its original instant")
	}
	if c.AdvanceToNext() {
		t.Fatal("AdvanceToNext with no timer must report false")
	}
	late, early := c.NewTimer(time.Hour), c.NewTimer(time.Second)
	if !c.AdvanceToNext() || !fired(early) || fired(late) || !c.Now().Equal(epoch.Add(time.Minute+time.Second)) {
		t.Fatal("AdvanceToNext must move to the earliest deadline only")
	}
}

// Goroutines sleeping on the clock are driven deterministically: wait until
// they are parked, then advance.
func TestManualClockDrivesSleepingGoroutines(t *testing.T) {
	t.Parallel()
	c := NewManualClock(epoch)
	const workers = 4
	var mu sync.Mutex
	var woke []time.Time
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			if outbox.Sleep(c, time.Duration(i+1)*time.Second, nil) {
				mu.Lock()
				woke = append(woke, c.Now())
				mu.Unlock()
			}
		})
	}
	c.BlockUntil(workers)
	c.Advance(2 * time.Second)
	c.BlockUntil(workers - 2)
	if c.Waiters() != workers-2 {
		t.Fatalf("%d waiters after 2 s, want %d", c.Waiters(), workers-2)
	}
	c.Advance(2 * time.Second)
	wg.Wait()
	if len(woke) != workers {
		t.Fatalf("%d workers woke", len(woke))
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.BlockUntilContext(ctx, 1); err != context.Canceled {
		t.Fatalf("BlockUntilContext with no timer: %v", err)
	}
}

// TestDeadlineContextReportsTheTimeLeftOnItsClock: the deadline is the time
// left on the manual clock, whatever the wall clock did, and the context
// does not expire when the wall clock passes it.
func TestDeadlineContextReportsTheTimeLeftOnItsClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewManualClock(epoch)
		ctx := DeadlineContext(t.Context(), c, epoch.Add(3*time.Second))
		left := func() time.Duration {
			d, ok := ctx.Deadline()
			if !ok {
				t.Fatal("no deadline")
			}
			return time.Until(d)
		}
		if got := left(); got != 3*time.Second {
			t.Fatalf("%v left at the start, want 3s", got)
		}
		time.Sleep(time.Minute)
		if got := left(); got != 3*time.Second || ctx.Err() != nil {
			t.Fatalf("after a wall minute: %v left, error %v; want 3s and none", got, ctx.Err())
		}
		c.Advance(2 * time.Second)
		if got := left(); got != time.Second {
			t.Fatalf("%v left 2 s later on the clock, want 1s", got)
		}
	})
}

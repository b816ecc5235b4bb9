package outboxlocal

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// ManualClock is an outbox.Clock whose time moves only when told to (Set,
// Advance). Timers fire when the clock reaches their deadline, in deadline
// order; BlockUntil lets a test wait, without sleeping, until the
// goroutines it drives are parked on timers. It is safe for concurrent use.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	pending []*manualTimer
	// changed is closed and replaced whenever the pending timers change,
	// waking BlockUntil callers.
	changed chan struct{}
}

var _ outbox.Clock = (*ManualClock)(nil)

// NewManualClock returns a clock reading start (in UTC).
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start.UTC(), changed: make(chan struct{})}
}

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when the clock reaches Now()+d; with
// d <= 0 it has fired already.
func (c *ManualClock) NewTimer(d time.Duration) outbox.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{clock: c, ch: make(chan time.Time, 1), deadline: c.now.Add(d)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.seq++
	t.seq = c.seq
	c.pending = append(c.pending, t)
	c.notifyLocked()
	return t
}

// Set moves the clock to t, forward or backward, and fires the timers whose
// deadline it reached. Moving backward fires nothing: deadlines are
// instants, as for a wall clock that was set back.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t.UTC()
	c.fireLocked()
}

// Advance moves the clock forward by d (backward when negative) and fires
// the timers it reached.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.fireLocked()
}

// AdvanceToNext moves the clock to the earliest pending deadline and fires
// the timers due then; it reports false, without moving, when no timer is
// pending.
func (c *ManualClock) AdvanceToNext() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		return false
	}
	next := c.pending[0].deadline
	for _, t := range c.pending[1:] {
		if t.deadline.Before(next) {
			next = t.deadline
		}
	}
	if next.After(c.now) {
		c.now = next
	}
	c.fireLocked()
	return true
}

// Waiters returns the number of timers that have neither fired nor been
// stopped.
func (c *ManualClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// BlockUntil waits until at least n timers are pending.
func (c *ManualClock) BlockUntil(n int) {
	_ = c.BlockUntilContext(context.Background(), n)
}

// BlockUntilContext waits until at least n timers are pending or ctx ends,
// returning ctx's error then.
func (c *ManualClock) BlockUntilContext(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		count, changed := len(c.pending), c.changed
		c.mu.Unlock()
		if count >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fireLocked fires the due timers in deadline order (creation order among
// equal deadlines).
func (c *ManualClock) fireLocked() {
	var due []*manualTimer
	c.pending = slices.DeleteFunc(c.pending, func(t *manualTimer) bool {
		if t.deadline.After(c.now) {
			return false
		}
		due = append(due, t)
		return true
	})
	if len(due) == 0 {
		return
	}
	slices.SortFunc(due, func(a, b *manualTimer) int {
		if c := a.deadline.Compare(b.deadline); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	for _, t := range due {
		// The channel has room for the one value a timer ever sends.
		t.ch <- c.now
	}
	c.notifyLocked()
}

func (c *ManualClock) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

type manualTimer struct {
	clock    *ManualClock
	ch       chan time.Time
	deadline time.Time
	seq      uint64
}

// C delivers the clock's time when the timer fired.
func (t *manualTimer) C() <-chan time.Time { return t.ch }

// Stop prevents the timer from firing; it reports whether it did so.
func (t *manualTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.pending, t)
	if i < 0 {
		return false
	}
	c.pending = slices.Delete(c.pending, i, i+1)
	c.notifyLocked()
	return true
}

// DeadlineContext returns parent carrying deadline on clock the way
// Lambda's context carries a function's deadline: Deadline reports the
// time left on clock, converted to the wall clock at each call, so a
// handler that converts it back to its clock as the time left (as
// outboxlambda's does) reads deadline again. It never expires by itself,
// whatever the wall clock does: whoever drives clock cancels parent when
// clock reaches deadline, as Lambda kills the invocation.
func DeadlineContext(parent context.Context, clock outbox.Clock, deadline time.Time) context.Context {
	return deadlineContext{Context: parent, clock: clock, deadline: deadline}
}

type deadlineContext struct {
	context.Context
	clock    outbox.Clock
	deadline time.Time
}

func (c deadlineContext) Deadline() (time.Time, bool) {
	return time.Now().Add(c.deadline.Sub(c.clock.Now())), true
}

package outboxddb

import (
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// stepClock is a clock for unit tests: Now stays put until a test moves it,
// and a timer fires at once, moving Now by its duration and recording it,
// so waits cost no time and tests can assert them.
type stepClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

var _ outbox.Clock = (*stepClock)(nil)

func newStepClock(t time.Time) *stepClock { return &stepClock{now: t} }

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *stepClock) NewTimer(d time.Duration) outbox.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(max(d, 0))
	fired := make(chan time.Time, 1)
	fired <- c.now
	return firedTimer(fired)
}

func (c *stepClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

type firedTimer chan time.Time

func (t firedTimer) C() <-chan time.Time { return t }
func (t firedTimer) Stop() bool          { return false }

package fleetsim

import (
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// hostClock is one simulated host's clock: the bubble's clock (true time)
// shifted by the host's skew. Waits are the time package's and run on true
// durations, so only readings are off, as on a host whose wall clock is
// wrong. The skew is piecewise constant; its history lets the lease checker
// find when the host read a given time.
type hostClock struct {
	mu      sync.Mutex
	history []skewChange // ascending by at; history[0].at is the creation
}

type skewChange struct {
	at   time.Time // true time
	skew time.Duration
}

var _ outbox.Clock = (*hostClock)(nil)

func newHostClock(skew time.Duration) *hostClock {
	return &hostClock{history: []skewChange{{at: trueNow(), skew: skew}}}
}

// trueNow is the true time of the simulation: the bubble's clock.
func trueNow() time.Time { return outbox.SystemClock{}.Now() }

// Now reads the host's clock.
func (c *hostClock) Now() time.Time {
	now := trueNow()
	return now.Add(c.skewAt(now))
}

// skewAt returns the skew in force at true time t.
func (c *hostClock) skewAt(t time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.history[0].skew
	for _, h := range c.history[1:] {
		if h.at.After(t) {
			break
		}
		s = h.skew
	}
	return s
}

// maxSkew returns the largest skew the host's clock has had.
func (c *hostClock) maxSkew() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.history[0].skew
	for _, h := range c.history[1:] {
		m = max(m, h.skew)
	}
	return m
}

// skew returns the current skew.
func (c *hostClock) skew() time.Duration { return c.skewAt(trueNow()) }

// step moves the host's clock by delta from now on (negative: set back).
func (c *hostClock) step(delta time.Duration) {
	now := trueNow()
	c.mu.Lock()
	defer c.mu.Unlock()
	last := c.history[len(c.history)-1].skew
	c.history = append(c.history, skewChange{at: now, skew: last + delta})
}

// trueTimeReaching returns the first true instant at or after from at which
// the host's clock reads at least target.
func (c *hostClock) trueTimeReaching(from, target time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, h := range c.history {
		segStart := h.at
		if segStart.Before(from) {
			segStart = from
		}
		var segEnd time.Time
		if i+1 < len(c.history) {
			segEnd = c.history[i+1].at
			if !segEnd.After(segStart) {
				continue
			}
		}
		t := target.Add(-h.skew)
		if t.Before(segStart) {
			t = segStart
		}
		if segEnd.IsZero() || t.Before(segEnd) {
			return t
		}
	}
	// Unreachable: the last segment is open-ended.
	return target
}

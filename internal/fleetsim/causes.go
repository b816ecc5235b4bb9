package fleetsim

import (
	"sync"
	"time"
)

// Causes that may explain a refused conditional write: the injected faults
// and the membership changes of the fleet.
const (
	causeJoin           = "join"
	causeLeave          = "leave"
	causeCrash          = "crash"
	causeTimeout        = "lambda-timeout"
	causePause          = "pause"
	causeLargeSkew      = "large-skew"
	causeClockStep      = "clock-step"
	causeThrottle       = "ddb-throttle"
	causeUnprocessed    = "unprocessed-deletes"
	causeLostResponse   = "lost-response"
	causeKafkaRetriable = "kafka-retriable"
	causeKafkaFatal     = "kafka-fatal"
	causeBrokerRestart  = "broker-restart"
	causeLeaderChange   = "leader-change"
)

// cause is one fault or membership change over a true-time interval; end is
// zero while it lasts.
type cause struct {
	kind  string
	relay string
	start time.Time
	end   time.Time
}

// causeBook holds every cause of a run. A cause explains a refused write
// from its start until settle after its end.
type causeBook struct {
	settle time.Duration

	mu   sync.Mutex
	list []*cause
}

func newCauseBook(settle time.Duration) *causeBook { return &causeBook{settle: settle} }

// open starts a cause at at; close it with closeAt.
func (b *causeBook) open(kind, relay string, at time.Time) *cause {
	c := &cause{kind: kind, relay: relay, start: at}
	b.mu.Lock()
	b.list = append(b.list, c)
	b.mu.Unlock()
	return c
}

func (b *causeBook) closeAt(c *cause, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.end.IsZero() {
		c.end = at
	}
}

// instant records a cause that happens at one instant.
func (b *causeBook) instant(kind, relay string, at time.Time) {
	c := b.open(kind, relay, at)
	b.closeAt(c, at)
}

// explain returns the most recent cause that explains a refusal at t, or
// nil when t lies in a quiet window.
func (b *causeBook) explain(t time.Time) *cause {
	b.mu.Lock()
	defer b.mu.Unlock()
	var best *cause
	for _, c := range b.list {
		if c.start.After(t) {
			continue
		}
		if !c.end.IsZero() && t.After(c.end.Add(b.settle)) {
			continue
		}
		if best == nil || c.start.After(best.start) {
			best = c
		}
	}
	return best
}

// count returns how many causes of each kind were recorded.
func (b *causeBook) count() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for _, c := range b.list {
		out[c.kind]++
	}
	return out
}

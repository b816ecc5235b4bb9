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

	// The order menu (Config.OrderFaults); poison and replay make up
	// FaultQuarantineReplay.
	causeLateRound = string(FaultLateRound)
	causeMixedSkew = string(FaultMixedSkew)
	causePoison    = "poison"
	causeReplay    = "replay"
	causeParkLost  = string(FaultParkLost)
	causeParkLate  = string(FaultParkLate)
	causeParkSlow  = string(FaultParkSlow)
	// causeBlockHolds counts what hold relays under PoisonBlock did with
	// parked state (FaultBlockHolds): parks behind a held-back key and
	// replays carried out. It explains no refusal.
	causeBlockHolds = string(FaultBlockHolds)
)

// cause is one fault or membership change over a true-time interval; end is
// zero while it lasts. linger is how far the clock of the relay it concerns
// ran ahead of true time: the expiries that relay wrote lapse that much
// later, so the cause explains refusals that much longer.
type cause struct {
	kind   string
	start  time.Time
	end    time.Time
	linger time.Duration
}

// causeBook holds every cause of a run. A cause explains a refused write
// from its start until settle plus its linger after its end.
type causeBook struct {
	settle time.Duration

	mu   sync.Mutex
	list []*cause
}

func newCauseBook(settle time.Duration) *causeBook { return &causeBook{settle: settle} }

// open starts a cause at at; close it with closeAt. linger is the skew by
// which the concerned relay's clock ran ahead at most (0 for none).
func (b *causeBook) open(kind string, linger time.Duration, at time.Time) *cause {
	c := &cause{kind: kind, start: at, linger: max(linger, 0)}
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
func (b *causeBook) instant(kind string, linger time.Duration, at time.Time) {
	c := b.open(kind, linger, at)
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
		if !c.end.IsZero() && t.After(c.end.Add(b.settle+c.linger)) {
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

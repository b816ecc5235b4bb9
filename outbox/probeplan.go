package outbox

import (
	"slices"
	"time"
)

// busyWindow is how long a bucket counts as busy after a sweep published
// from it. Only busy buckets are probed every TargetLatency: a bucket with
// a message every few seconds is likely to hold one at the next look,
// while a quiet bucket would cost probes that find nothing. 10 s keeps a
// bucket busy between messages down to 1 msg/s over 8 buckets (a message
// per bucket every 8 s on average) and lets it go quiet after a burst.
const busyWindow = 10 * time.Second

// probeTimes is the state the probe decisions read: when the relay last
// probed its owned buckets at the poll and its busy ones at the target,
// and when each bucket last had work (worked, indexed by bucket; it
// outlives runs as the relay's view of the traffic does).
type probeTimes struct {
	poll, busy time.Time
	worked     []time.Time
}

// probePlan is what probeDue decides.
type probePlan struct {
	// buckets are the owned buckets to probe now.
	buckets []int
	// poll: this is the PollInterval probe (the relay also looks for
	// replays then); busy: the busy buckets are among buckets.
	poll, busy bool
	// next is how long until the next probe falls due when none is.
	next time.Duration
}

// probeDue decides the head probes at now. Busy buckets are the owned ones
// that had work within busyWindow and are not ready already (a ready
// bucket is fetched anyway); they are probed every target, and only when
// target is below poll. Every other owned bucket is probed every poll. So
// each bucket is probed on one cadence: a busy one exactly every target,
// not again at the poll. With target at or above poll every owned bucket
// is probed at the poll, as before the dial existed.
func probeDue(now time.Time, owned, ready []int, t probeTimes, poll, target time.Duration) probePlan {
	var busy, quiet []int
	for _, b := range owned {
		if target < poll && b < len(t.worked) && !t.worked[b].IsZero() && now.Sub(t.worked[b]) < busyWindow && !slices.Contains(ready, b) {
			busy = append(busy, b)
		} else {
			quiet = append(quiet, b)
		}
	}
	pollDue := now.Sub(t.poll) >= poll
	busyDue := len(busy) > 0 && now.Sub(t.busy) >= target
	switch {
	case pollDue && busyDue:
		return probePlan{buckets: owned, poll: true, busy: true}
	case pollDue:
		return probePlan{buckets: quiet, poll: true}
	case busyDue:
		return probePlan{buckets: busy, busy: true}
	}
	next := poll - now.Sub(t.poll)
	if len(busy) > 0 {
		next = min(next, target-now.Sub(t.busy))
	}
	return probePlan{next: next}
}

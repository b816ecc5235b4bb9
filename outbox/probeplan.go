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
// probed every owned bucket (the PollInterval probe) and the busy ones, and
// when each bucket last had work (worked, indexed by bucket; it outlives
// runs as the relay's view of the traffic does).
type probeTimes struct {
	all, busy time.Time
	worked    []time.Time
}

// probeDue decides the head probes at now. all: every owned bucket is due
// (PollInterval passed since the last such probe). Otherwise busy lists the
// owned buckets that had work within busyWindow and are not ready already,
// when TargetLatency passed since they were last probed; it is nil when
// target is not below poll, so such a relay probes exactly as at the poll.
// next is how long until the next probe falls due (0 when one is due now).
func probeDue(now time.Time, owned, ready []int, t probeTimes, poll, target time.Duration) (all bool, busy []int, next time.Duration) {
	sinceAll := now.Sub(t.all)
	if sinceAll >= poll {
		return true, nil, 0
	}
	next = poll - sinceAll
	if target >= poll {
		return false, nil, next
	}
	for _, b := range owned {
		if b < len(t.worked) && !t.worked[b].IsZero() && now.Sub(t.worked[b]) < busyWindow && !slices.Contains(ready, b) {
			busy = append(busy, b)
		}
	}
	if len(busy) == 0 {
		return false, nil, next
	}
	// The PollInterval probe looked at the busy buckets too.
	sinceBusy := now.Sub(later(t.all, t.busy))
	if sinceBusy >= target {
		return false, busy, 0
	}
	return false, nil, min(next, target-sinceBusy)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

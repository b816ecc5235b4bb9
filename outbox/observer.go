package outbox

import (
	"time"
)

// EventKind names what an Event reports.
type EventKind int

// Event kinds reported by the relay, the store and the writer.
const (
	// EventRound: one acquisition round finished (Count = owned buckets,
	// Duration = round time, Err on failure).
	EventRound EventKind = iota + 1
	// EventClaim: Count buckets claimed.
	EventClaim
	// EventRelease: Count leases released (rebalance or stop).
	EventRelease
	// EventLeaseLost: Count buckets lost to expiry or a refused keep/renewal.
	EventLeaseLost
	// EventRefusedWrite: Count conditional writes refused (Op names the request).
	EventRefusedWrite
	// EventThrottle: one throttled DynamoDB request (Op names it).
	EventThrottle
	// EventBatchFetched: Count messages fetched from Bucket.
	EventBatchFetched
	// EventPublish: a publish of a batch from Bucket finished: Count acked,
	// Latencies holds created-at → ack per acked message, Err the first error.
	EventPublish
	// EventDelete: Count messages deleted from Bucket.
	EventDelete
	// EventBackoff: the relay (Bucket = -1) or a bucket waits Duration after Err.
	EventBackoff
	// EventHeadRowRetry: a head-only retry of Bucket's failing row.
	EventHeadRowRetry
	// EventBacklog: a backlog sample (Count = pending, Duration = oldest age).
	EventBacklog
	// EventWakeUpSent: a wake-up was sent (Count = hinted buckets, Err on failure).
	EventWakeUpSent
	// EventReleaseSkipped: the stop protocol did not fit the budget; Count
	// leases left to lapse.
	EventReleaseSkipped
	// EventStop: the relay stopped (Op = reason, Duration = time run,
	// Count = budget used in percent).
	EventStop
	// EventEnqueue: Count messages enqueued.
	EventEnqueue
	// EventEnqueueRejected: Count messages rejected before any write (Err says why).
	EventEnqueueRejected
	// EventOwned: the owned set changed; Count = buckets now owned.
	EventOwned
	// EventParked: Count messages of Bucket moved to its parked partition
	// (Op = the reason).
	EventParked
	// EventParkedBacklog: a sample of the parked messages of every bucket
	// (Count), taken with the backlog.
	EventParkedBacklog
)

var eventNames = [...]string{
	EventRound:           "round",
	EventClaim:           "claim",
	EventRelease:         "release",
	EventLeaseLost:       "lease_lost",
	EventRefusedWrite:    "refused_write",
	EventThrottle:        "throttle",
	EventBatchFetched:    "batch_fetched",
	EventPublish:         "publish",
	EventDelete:          "delete",
	EventBackoff:         "backoff",
	EventHeadRowRetry:    "head_row_retry",
	EventBacklog:         "backlog",
	EventWakeUpSent:      "wake_up_sent",
	EventReleaseSkipped:  "release_skipped",
	EventStop:            "stop",
	EventEnqueue:         "enqueue",
	EventEnqueueRejected: "enqueue_rejected",
	EventOwned:           "owned",
	EventParked:          "parked",
	EventParkedBacklog:   "parked_backlog",
}

// String returns a stable snake_case name, used as a log key.
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// Event is one observation. Fields a kind does not use are zero; Bucket is -1
// when the event concerns no single bucket.
type Event struct {
	Kind      EventKind
	Time      time.Time
	RelayID   string
	Bucket    int
	Count     int
	Duration  time.Duration
	Latencies []time.Duration
	// Op names the request or the stop reason.
	Op string
	// Origins lists trace contexts carried by the published messages.
	Origins []string
	Err     error
}

// Observer receives events. Implementations must be safe for concurrent use
// and fast; they never change delivery. A nil Observer costs nothing.
type Observer interface {
	Observe(Event)
}

// Observers fans events out to several observers; nil entries are skipped.
type Observers []Observer

// Observe implements Observer.
func (os Observers) Observe(e Event) {
	for _, o := range os {
		Emit(o, e)
	}
}

// Emit hands e to o. A nil o costs one comparison, and a panicking observer
// is contained: telemetry never stops the relay.
func Emit(o Observer, e Event) {
	if o == nil {
		return
	}
	defer func() { _ = recover() }()
	o.Observe(e)
}

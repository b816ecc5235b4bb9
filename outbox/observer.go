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
	// EventLeaseLost: Count buckets lost to expiry or a refused keep or
	// renewal (Loss says which).
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
	// EventStop: the relay stopped (Stop = why, Duration = time run,
	// BudgetUsed = share of the deadline spent).
	EventStop
	// EventEnqueue: Count messages enqueued.
	EventEnqueue
	// EventEnqueueRejected: Count messages rejected before any write (Err says why).
	EventEnqueueRejected
	// EventOwned: the owned set changed; Count = buckets now owned.
	EventOwned
	// EventParked: Count messages of Bucket moved to its parked partition
	// (Park = why).
	EventParked
	// EventParkedBacklog: a sample of the parked messages of every bucket
	// (Count), taken with the backlog.
	EventParkedBacklog
	// EventReplayed: Count parked messages of Bucket, marked by an
	// operator, were published (each also counted by EventPublish) and
	// left the parked partition.
	EventReplayed
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
	EventReplayed:        "replayed",
}

// String returns a stable snake_case name, used as a log key.
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "unknown"
}

// Event is one observation. Fields a kind does not use are zero; Bucket is -1
// when the event concerns no single bucket. Each reason has a field and a
// type of its own, set only by the kind it explains, so an observer
// switching on Kind reads a typed value rather than parsing a string.
type Event struct {
	Kind      EventKind
	Time      time.Time
	RelayID   string
	Bucket    int
	Count     int
	Duration  time.Duration
	Latencies []time.Duration
	// Op names the DynamoDB request of EventRefusedWrite and EventThrottle
	// (outboxddb's Op constants); nothing else.
	Op string
	// Stop is why the run returned (EventStop): RunResult.Reason.
	Stop StopReason
	// BudgetUsed is the share of the time to the deadline the run spent,
	// in percent, unrounded (EventStop): RunResult.BudgetUsed; zero without
	// a deadline.
	BudgetUsed float64
	// Park is why the messages were parked (EventParked).
	Park ParkReason
	// Loss is why the leases were lost (EventLeaseLost).
	Loss LossReason
	Err  error
}

// LossReason says why a relay stopped trusting leases it held. The values
// are the phrases the relay logs with "dropping bucket ownership".
type LossReason string

// Loss reasons.
const (
	// LossKeepRefused: a round's conditional keep was refused (a peer took
	// the bucket, or its expiry moved).
	LossKeepRefused LossReason = "keep refused"
	// LossExpiredBetweenRounds: the leases ran out before the next round
	// started.
	LossExpiredBetweenRounds LossReason = "expired between rounds"
	// LossAcquisitionFailed: a round failed, so ownership is unknown.
	LossAcquisitionFailed LossReason = "acquisition failed"
	// LossAcquisitionOutlasted: a round took longer than LeaseDuration.
	LossAcquisitionOutlasted LossReason = "lease acquisition took longer than LeaseDuration"
	// LossFetchOutlasted: fetching a batch took the lease past its end.
	LossFetchOutlasted LossReason = "fetching a batch outlasted LeaseDuration"
	// LossPublishOutlasted: the lease ran out while a batch was published.
	LossPublishOutlasted LossReason = "lease expired while publishing"
	// LossRenewalRefused: an in-flight renewal was refused.
	LossRenewalRefused LossReason = "in-flight renewal refused"
	// LossRenewalLate: a renewal's answer came after the lease expired.
	LossRenewalLate LossReason = "renewal answered after the lease expired"
	// LossWriteRefused: the table refused a write of the bucket (a park)
	// because its lease item no longer names the relay with the margin
	// left; only that bucket is dropped.
	LossWriteRefused LossReason = "write refused for its lease"
)

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

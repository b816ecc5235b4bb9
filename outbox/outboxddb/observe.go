package outboxddb

import (
	"github.com/spillway-dev/spillway/outbox"
)

// Op names reported in Event.Op for refused writes and throttles; they name
// the request kind, as in the table contract's request summary.
const (
	OpHeartbeat     = "heartbeat"
	OpStoppedRecord = "stopped_record"
	OpCoordination  = "coordination_read"
	OpKeep          = "keep"
	OpRelease       = "release"
	OpClaim         = "claim"
	OpRenew         = "renew"
	OpPrune         = "prune"
	OpPendingProbe  = "pending_probe"
	OpFetch         = "fetch"
	OpGapProbe      = "gap_probe"
	OpDelete        = "delete"
	OpBacklog       = "backlog"
	OpReserve       = "reserve"
	OpEnqueue       = "enqueue"
	OpEnqueueBatch  = "enqueue_batch"
	OpCommit        = "commit"
)

// telemetry reports refusals and throttles to the observer.
type telemetry struct {
	observer outbox.Observer
	clock    outbox.Clock
}

func (t telemetry) refused(relayID, op string, bucket int) {
	if t.observer == nil {
		return
	}
	outbox.Emit(t.observer, outbox.Event{
		Kind: outbox.EventRefusedWrite, Time: t.clock.Now(), RelayID: relayID, Bucket: bucket, Count: 1, Op: op,
	})
}

// failed reports err if it is a throttle; every other error is the caller's
// to return.
func (t telemetry) failed(relayID, op string, bucket int, err error) {
	if t.observer == nil || !isThrottle(err) {
		return
	}
	outbox.Emit(t.observer, outbox.Event{
		Kind: outbox.EventThrottle, Time: t.clock.Now(), RelayID: relayID, Bucket: bucket, Count: 1, Op: op, Err: err,
	})
}

// throttled reports a request DynamoDB partly left unprocessed.
func (t telemetry) throttled(op string, bucket int) {
	if t.observer == nil {
		return
	}
	outbox.Emit(t.observer, outbox.Event{
		Kind: outbox.EventThrottle, Time: t.clock.Now(), Bucket: bucket, Count: 1, Op: op,
	})
}

package outboxddb

import (
	"github.com/spillway-dev/spillway/outbox"
)

// Op names reported in Request.Op for refused writes and throttles; they
// name the request kind, as in the table contract's request summary.
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
	OpSnapshot      = "transaction_snapshot"
	OpDelete        = "delete"
	OpBacklog       = "backlog"
	OpReserve       = "reserve"
	OpEnqueue       = "enqueue"
	OpEnqueueBatch  = "enqueue_batch"
	OpCommit        = "commit"
)

// Request is a DynamoDB request a HookRequest hears of.
type Request struct {
	// Op names the request: one of the Op constants.
	Op string
	// RelayID is the relay whose lease or heartbeat the request wrote;
	// empty for every other request.
	RelayID string
	// Bucket is the bucket the request concerned, when OneBucket says it
	// concerned one.
	Bucket    int
	OneBucket bool
}

// HookRequest receives the requests DynamoDB refused or throttled, for a
// Store or a Writer built with it in Options.Hooks. It is called
// synchronously and must be safe for concurrent use and fast; a panic in it
// is not recovered.
type HookRequest interface {
	// OnRefused: the request's condition failed: the table changed, or a
	// peer holds what the request meant to write.
	OnRefused(req Request)
	// OnThrottle: DynamoDB throttled the request (err) or left part of it
	// unprocessed (err nil).
	OnThrottle(req Request, err error)
}

// noBucket marks a request that concerns no single bucket.
const noBucket = -1

// telemetry reports refusals and throttles to the hooks.
type telemetry []HookRequest

// newTelemetry sorts hooks Options.Validate accepted.
func newTelemetry(hooks []outbox.Hook) telemetry {
	t := make(telemetry, 0, len(hooks))
	for _, h := range hooks {
		t = append(t, h.(HookRequest))
	}
	return t
}

func request(relayID, op string, bucket int) Request {
	return Request{Op: op, RelayID: relayID, Bucket: max(bucket, 0), OneBucket: bucket != noBucket}
}

func (t telemetry) refused(relayID, op string, bucket int) {
	for _, h := range t {
		h.OnRefused(request(relayID, op, bucket))
	}
}

// failed reports err if it is a throttle; every other error is the caller's
// to return.
func (t telemetry) failed(relayID, op string, bucket int, err error) {
	if len(t) == 0 || !isThrottle(err) {
		return
	}
	for _, h := range t {
		h.OnThrottle(request(relayID, op, bucket), err)
	}
}

// throttled reports a request DynamoDB partly left unprocessed.
func (t telemetry) throttled(op string, bucket int) {
	for _, h := range t {
		h.OnThrottle(request("", op, bucket), nil)
	}
}

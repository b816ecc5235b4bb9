package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// PoisonPolicy says what a relay does with a message Kafka will not take.
type PoisonPolicy string

// Poison policies.
const (
	// PoisonBlock backs the failing head row off and retries it; the rest
	// of its bucket waits behind it. The default: nothing leaves the
	// bucket's order, and an operator fixes the cause (creates the topic,
	// raises a limit).
	PoisonBlock PoisonPolicy = "block"
	// PoisonQuarantine parks a message whose failure retrying cannot fix,
	// or that failed PoisonMaxAttempts times, in its bucket's parked
	// partition, with every later message of the same key, so other keys
	// keep flowing while per-key order is kept. Parked messages are
	// replayed or dropped by an operator (spillway parked).
	PoisonQuarantine PoisonPolicy = "quarantine"
)

// ParkReason says why a message was parked. The values are stored in the
// ParkedReason attribute.
type ParkReason string

// Park reasons.
const (
	ParkUnknownTopic    ParkReason = "unknown-topic"
	ParkTooLarge        ParkReason = "too-large"
	ParkAuthorization   ParkReason = "authorization"
	ParkInvalidRecord   ParkReason = "invalid-record"
	ParkUndecodableItem ParkReason = "undecodable-item"
	ParkMaxAttempts     ParkReason = "max-attempts"
	// ParkKeyQuarantined parks a message behind an earlier parked message
	// of its key; it carries no failure of its own.
	ParkKeyQuarantined ParkReason = "key-quarantined"
)

// ErrPoison marks a record that retrying cannot publish (PoisonError).
var ErrPoison = errors.New("outbox: record cannot be published as stored")

// ErrParkConflict reports a park whose transaction found the table changed:
// the row was gone, or the parked message it was to wait behind was
// replayed or dropped meanwhile. The relay reads the parked partition again.
var ErrParkConflict = errors.New("outbox: park refused: the table changed")

// PoisonError is a per-record failure that retrying the same record cannot
// fix: a topic the cluster does not have, a record over a size limit, an
// authorization failure, a record the broker calls invalid. A Publisher
// returns it (wrapped or not) for the first such record of a batch. It
// matches ErrPoison with errors.Is.
type PoisonError struct {
	Reason ParkReason
	Err    error
}

// Error implements error.
func (e *PoisonError) Error() string { return fmt.Sprintf("%s: %v", e.Reason, e.Err) }

// Unwrap returns the cause.
func (e *PoisonError) Unwrap() error { return e.Err }

// Is reports whether target is ErrPoison.
func (e *PoisonError) Is(target error) bool { return target == ErrPoison }

// PoisonReason returns the reason of the PoisonError in err's chain.
func PoisonReason(err error) (ParkReason, bool) {
	var p *PoisonError
	if errors.As(err, &p) {
		return p.Reason, true
	}
	return "", false
}

// UnreadableRowError reports a stored row of Bucket at Sequence that cannot
// be read as a message (a missing topic, a malformed message id). A Store's
// FetchBatch returns the rows before it together with this error, so the
// row becomes its bucket's head: backed off under PoisonBlock, parked under
// PoisonQuarantine. It matches ErrInvalidItem.
type UnreadableRowError struct {
	Bucket   int
	Sequence int64
	// Key is the row's key when it can be read (a binary Key attribute),
	// nil otherwise: a parked unreadable row with a key quarantines that
	// key like any parked message.
	Key []byte
	Err error
}

// Error implements error.
func (e *UnreadableRowError) Error() string {
	return fmt.Sprintf("outbox: bucket %d row %d cannot be read: %v", e.Bucket, e.Sequence, e.Err)
}

// Unwrap returns the cause.
func (e *UnreadableRowError) Unwrap() error { return e.Err }

// Is reports whether target is ErrInvalidItem.
func (e *UnreadableRowError) Is(target error) bool { return target == ErrInvalidItem }

// Parking describes one move of a message row to its bucket's parked
// partition.
type Parking struct {
	Bucket   int
	Sequence int64
	Reason   ParkReason
	// Error is the broker's or the decoder's text; empty for
	// ParkKeyQuarantined.
	Error string
	// Attempts counts failed publishes of the row (0 when it never failed
	// itself).
	Attempts int
	// FirstFailedAt is the first failure; zero when none.
	FirstFailedAt time.Time
	// Behind, when > 0, is the sequence of a parked message of the same key
	// that must still be parked for this move to apply.
	Behind int64
	// Lease, when its Owner is set, is the bucket's lease the move carries
	// into the table: it applies only while the lease item still names
	// the owner and expires after Lease.Beyond, and a refusal of that
	// check is ErrLeaseLost, not ErrParkConflict. The relay always sets
	// it: a park that lands after another relay claimed the bucket (and
	// read its parked partition) would hold a key back where the new
	// owner cannot see it, and the key's next message would overtake.
	Lease LeaseCheck
}

// LeaseCheck is a bucket's lease as a conditional write carries it: the
// write applies only while the bucket's lease item names Owner and its
// expiry is after Beyond (the moment the write started plus the relay's
// margin, lease.KeepMargin).
type LeaseCheck struct {
	Owner  string
	Beyond time.Time
}

// ParkedSet is a bucket's parked partition as a relay needs it.
type ParkedSet struct {
	// Keys maps every quarantined key to the sequences of its parked
	// messages, ascending. Keyless messages never quarantine a key and are
	// not listed.
	Keys map[string][]int64
	// Replays are the parked messages an operator marked for replay that
	// decode (with the operator's topic, if any), ascending by their
	// original sequence, keyed and keyless alike.
	Replays []Message
	// Unreplayable maps the sequence of every marked message that does not
	// decode to the reason; the relay clears its mark.
	Unreplayable map[int64]string
}

// Quarantine is what a Store needs under PoisonQuarantine. outboxddb.Store
// implements it.
//
// Replay runs under the bucket's lease: an operator only marks parked
// messages (and raises the bucket's replay request, see ReplayRequests);
// the relay holding the bucket publishes a key's marked messages, in
// their original order, before any of that key's messages in the bucket,
// then deletes them. A key keeps parking its later messages while any of
// its parked messages stays unmarked or unpublished.
type Quarantine interface {
	// ParkedKeys reads a bucket's parked partition (once, when the relay
	// claims the bucket, and again after a park whose outcome is unknown
	// or a new replay request).
	ParkedKeys(ctx context.Context, bucket int) (ParkedSet, error)
	// Park moves a row to its bucket's parked partition in one
	// transaction, keeping every attribute; ErrParkConflict when the row
	// changed, or the message it waits behind changed or was marked for
	// replay; ErrLeaseLost when p.Lease no longer holds in the table.
	Park(ctx context.Context, p Parking) error
	// ReplayRequests returns, for every bucket with a replay request not
	// yet carried out, a number that changes with every new request: one
	// small read, which a relay makes at most every LeaseRenewInterval.
	ReplayRequests(ctx context.Context) (map[int]int64, error)
	// DeleteReplayed deletes published replays from the parked partition.
	DeleteReplayed(ctx context.Context, bucket int, msgs []Message) error
	// RefuseReplay clears the replay mark of a parked message Kafka refused
	// again, or that does not decode, and stores why; the message stays
	// parked and its key quarantined.
	RefuseReplay(ctx context.Context, bucket int, seq int64, reason string) error
	// ReplayDone withdraws the bucket's replay request if it is still the
	// one read (a newer request stays).
	ReplayDone(ctx context.Context, bucket int, request int64) error
}

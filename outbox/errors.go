package outbox

import (
	"errors"

	"github.com/spillway-dev/spillway/outbox/lease"
)

// Sentinel errors callers can branch on with errors.Is. Functions wrap them
// with the operation and the key that failed.
var (
	// ErrMisconfigured marks a configuration that cannot work and must not be
	// retried: bucket counts that differ between writer, store and relay, a
	// table whose key schema does not match, invalid options. The relay
	// returns it from Run instead of backing off.
	ErrMisconfigured = lease.ErrMisconfigured

	// ErrInvalidMessage marks a message that cannot be enqueued as given
	// (empty topic, negative partition, bucket outside the configured count,
	// malformed message id).
	ErrInvalidMessage = errors.New("outbox: invalid message")

	// ErrHeaderFormat marks a header blob that does not decode under codec
	// version 1.
	ErrHeaderFormat = errors.New("outbox: malformed header blob")

	// ErrLeaseLost marks work abandoned because the relay no longer holds the
	// lease it started under; the rows stay for the next owner.
	ErrLeaseLost = errors.New("outbox: lease lost")

	// ErrInvalidItem marks a stored item that does not follow the table
	// layout (malformed sort key, missing attribute, number out of range).
	ErrInvalidItem = errors.New("outbox: invalid item")

	// ErrBatchCut is no failure: a Store's FetchBatch returns it with a
	// batch it ended short of max although the bucket holds later messages
	// it will hand out once that batch is deleted (the store's order rule
	// stopped it before a transaction the limit would have split, or before
	// a row it could not settle within its reads). The relay fetches again at
	// once, as after a full batch. A short batch without it means nothing
	// more of the bucket was ready, so the relay waits for its next probe.
	ErrBatchCut = errors.New("outbox: batch cut short with messages behind it")
)

// MisconfigurationError reports a configuration that cannot work. It matches
// ErrMisconfigured with errors.Is and is never retried by the relay. The
// lease package returns it too.
type MisconfigurationError = lease.MisconfigurationError

// Misconfigured returns a *MisconfigurationError for op with a formatted detail.
func Misconfigured(op, format string, args ...any) error {
	return lease.Misconfigured(op, format, args...)
}

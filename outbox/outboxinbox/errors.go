package outboxinbox

import (
	"errors"
	"fmt"
)

// Sentinels the typed errors match with errors.Is.
var (
	// ErrMissingMessageID matches a *MissingIDError.
	ErrMissingMessageID = errors.New("outboxinbox: record carries no message id")
	// ErrTransactionLimit matches a *LimitError.
	ErrTransactionLimit = errors.New("outboxinbox: transaction over DynamoDB's limits")
	// ErrConflicts matches a *ConflictError.
	ErrConflicts = errors.New("outboxinbox: transaction kept conflicting")
	// ErrPayloadMismatch matches a *FingerprintError.
	ErrPayloadMismatch = errors.New("outboxinbox: message id reused for another record")
	// ErrHandlerPanic matches a *PanicError.
	ErrHandlerPanic = errors.New("outboxinbox: handler panicked")
)

// MissingIDError reports a record without a valid message id header under
// RefuseMissingID: a record Spillway did not publish, or a header that is
// not a GUID. Nothing was written.
type MissingIDError struct {
	// Topic, Partition and Offset locate the record.
	Topic     string
	Partition int32
	Offset    int64
	// Header is the header name looked for.
	Header string
	// Value is the header's value when present but not a GUID.
	Value string
}

// Error implements error.
func (e *MissingIDError) Error() string {
	where := fmt.Sprintf("%s/%d@%d", e.Topic, e.Partition, e.Offset)
	if e.Value != "" {
		return fmt.Sprintf("outboxinbox: record %s has header %s = %q, which is not a message id; was it published by Spillway?", where, e.Header, e.Value)
	}
	return fmt.Sprintf("outboxinbox: record %s has no %s header, so it cannot be deduplicated; publish through Spillway or set MissingID to SkipMissingID", where, e.Header)
}

// Is reports whether target is ErrMissingMessageID.
func (e *MissingIDError) Is(target error) bool { return target == ErrMissingMessageID }

// LimitError reports a handler whose writes, with the marker, exceed what
// one DynamoDB transaction carries (100 actions, 4 MB). It is returned
// before any request.
type LimitError struct {
	// MessageID is the record's message id.
	MessageID string
	// Items counts the actions including the marker; Size their bytes as
	// DynamoDB counts them.
	Items, Size int
	// MaxItems and MaxSize are DynamoDB's limits.
	MaxItems, MaxSize int
}

// Error implements error.
func (e *LimitError) Error() string {
	if e.Items > e.MaxItems {
		return fmt.Sprintf("outboxinbox: message %s: the handler's writes and the inbox marker are %d transaction actions, over DynamoDB's %d; write at most %d items per message",
			e.MessageID, e.Items, e.MaxItems, e.MaxItems-1)
	}
	return fmt.Sprintf("outboxinbox: message %s: the handler's writes and the inbox marker total %d bytes, over DynamoDB's %d-byte transaction limit",
		e.MessageID, e.Size, e.MaxSize)
}

// Is reports whether target is ErrTransactionLimit.
func (e *LimitError) Is(target error) bool { return target == ErrTransactionLimit }

// ConflictError reports a record whose transaction was cancelled by a
// conflict with another write on every one of MaxAttempts runs.
type ConflictError struct {
	// MessageID is the record's message id.
	MessageID string
	// Attempts is how many times the handler ran.
	Attempts int
	// Err is the last DynamoDB error.
	Err error
}

// Error implements error.
func (e *ConflictError) Error() string {
	return fmt.Sprintf("outboxinbox: message %s: the transaction conflicted with other writes on all %d attempts: %v", e.MessageID, e.Attempts, e.Err)
}

// Unwrap returns the DynamoDB error.
func (e *ConflictError) Unwrap() error { return e.Err }

// Is reports whether target is ErrConflicts.
func (e *ConflictError) Is(target error) bool { return target == ErrConflicts }

// FingerprintError reports a record whose message id this consumer already
// gave a verdict to, for a record with another topic, key or value: a
// replay to another topic, a bridge copying headers, a producer reusing
// ids. Its effect was never applied; nothing was written.
type FingerprintError struct {
	// MessageID is the reused id.
	MessageID string
	// Topic, Partition and Offset locate the refused record.
	Topic     string
	Partition int32
	Offset    int64
	// Stored is the fingerprint in the marker; Received the record's.
	Stored, Received string
}

// Error implements error.
func (e *FingerprintError) Error() string {
	return fmt.Sprintf("outboxinbox: record %s/%d@%d reuses message id %s, already given a verdict for another topic, key or value (fingerprint %.12s, this record %.12s); its effect is not applied",
		e.Topic, e.Partition, e.Offset, e.MessageID, e.Stored, e.Received)
}

// Is reports whether target is ErrPayloadMismatch.
func (e *FingerprintError) Is(target error) bool { return target == ErrPayloadMismatch }

// PanicError is a run of a record whose Handler panicked: a failed run
// like an error returned, so the record is retried and, after a Consumer's
// MaxAttempts, taken by its failure policy instead of crashing the process
// again on every restart. The stack was logged when the panic was
// recovered; Error leaves it out.
type PanicError struct {
	// Value is what the handler panicked with.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

// Error implements error.
func (e *PanicError) Error() string {
	return fmt.Sprintf("outboxinbox: handler panicked: %v", e.Value)
}

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// Is reports whether target is ErrHandlerPanic.
func (e *PanicError) Is(target error) bool { return target == ErrHandlerPanic }

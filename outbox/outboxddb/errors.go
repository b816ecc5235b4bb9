package outboxddb

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/spillway-dev/spillway/outbox"
)

// SequenceTakenError reports a message Put that DynamoDB refused because
// its sequence number already holds another message: the bucket's counter
// was reset or deleted while messages were pending. The write is refused
// instead of overwriting the pending message.
type SequenceTakenError struct {
	// Bucket and Sequence locate the number that was taken.
	Bucket   int
	Sequence int64
	// MessageID is the refused message.
	MessageID outbox.MessageID
	// HeldBy is the message stored under the number; zero when DynamoDB did
	// not return the stored item.
	HeldBy outbox.MessageID
	// Err is the DynamoDB error.
	Err error
}

// Error implements error.
func (e *SequenceTakenError) Error() string {
	held := "another message"
	if !e.HeldBy.IsZero() {
		held = "message " + e.HeldBy.String()
	}
	return fmt.Sprintf("outboxddb: message %s refused: bucket %d sequence %d already holds %s; was the bucket's sequence counter reset?",
		e.MessageID, e.Bucket, e.Sequence, held)
}

// Unwrap returns the DynamoDB error.
func (e *SequenceTakenError) Unwrap() error { return e.Err }

// UndeletedError reports published messages that DynamoDB still left
// unprocessed after every delete attempt. The messages stay in the table and
// are published again (duplicates, never a loss).
type UndeletedError struct {
	// Bucket is the bucket the messages belong to.
	Bucket int
	// Count is how many messages stay.
	Count int
	// Attempts is how many BatchWriteItem requests were sent for the chunk.
	Attempts int
}

// Error implements error.
func (e *UndeletedError) Error() string {
	return fmt.Sprintf("DynamoDB left %d published outbox message(s) undeleted after %d attempts. The table is throttling writes.", e.Count, e.Attempts)
}

// ItemTooLargeError reports a message whose item exceeds DynamoDB's 400 KB
// item limit, or messages whose items together exceed the 4 MB transaction
// limit. It matches outbox.ErrInvalidMessage and is returned before any
// request.
type ItemTooLargeError struct {
	// MessageID is the oversized message; zero for a whole transaction.
	MessageID outbox.MessageID
	// Size and Limit are in bytes as DynamoDB counts them.
	Size, Limit int
}

// Error implements error.
func (e *ItemTooLargeError) Error() string {
	if e.MessageID.IsZero() {
		return fmt.Sprintf("outboxddb: the messages' items total %d bytes, over DynamoDB's %d-byte transaction limit; enqueue fewer at once", e.Size, e.Limit)
	}
	return fmt.Sprintf("outboxddb: message %s is a %d-byte item, over DynamoDB's %d-byte item limit; keep large payloads elsewhere (e.g. S3) and publish a reference", e.MessageID, e.Size, e.Limit)
}

// Is reports whether target is outbox.ErrInvalidMessage.
func (e *ItemTooLargeError) Is(target error) bool { return target == outbox.ErrInvalidMessage }

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// isThrottle reports the errors DynamoDB uses for a request it would not
// serve at the current rate.
func isThrottle(err error) bool {
	var api smithy.APIError
	if !errors.As(err, &api) {
		return false
	}
	switch api.ErrorCode() {
	case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded":
		return true
	}
	return false
}

func isResourceInUse(err error) bool {
	var e *types.ResourceInUseException
	return errors.As(err, &e)
}

func isResourceNotFound(err error) bool {
	var e *types.ResourceNotFoundException
	return errors.As(err, &e)
}

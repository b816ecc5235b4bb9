package outboxinbox

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
)

// SpanConsume is the span Process opens around one record.
const SpanConsume = "consume"

// Client is the DynamoDB operation the inbox calls; *dynamodb.Client and
// outboxddb.Client satisfy it.
type Client interface {
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Handler applies one record: it adds the record's business writes (and
// outbox messages) to tx and returns nil, or returns an error to apply
// nothing. It may run more than once for one record (after a conflict, or
// when the record is delivered again before its first transaction
// committed), so it must not have effects outside tx.
type Handler func(ctx context.Context, rec Record, tx *Tx) error

// Outcome is what Process did with a record.
type Outcome int

const (
	// Applied: the handler's writes and the marker committed.
	Applied Outcome = iota + 1
	// Duplicate: the marker already existed; nothing was written again.
	Duplicate
	// Skipped: the record had no message id and SkipMissingID is set.
	Skipped
)

// String implements fmt.Stringer.
func (o Outcome) String() string {
	switch o {
	case Applied:
		return "applied"
	case Duplicate:
		return "duplicate"
	case Skipped:
		return "skipped"
	}
	return "unknown"
}

// Inbox deduplicates the records of one consumer. It is safe for
// concurrent use; records of one partition must be processed one after the
// other by the caller to keep their order (Consumer and LambdaHandler do).
type Inbox struct {
	client  Client
	opts    Options
	metrics *Metrics
}

// New returns an inbox for the consumer opts names.
func New(client Client, opts Options) (*Inbox, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if client == nil {
		return nil, outbox.Misconfigured("new inbox", "DynamoDB client is nil")
	}
	return &Inbox{client: client, opts: opts, metrics: newMetrics(opts.Consumer)}, nil
}

// Metrics returns the inbox's counters, for EMF or tests.
func (in *Inbox) Metrics() *Metrics { return in.metrics }

// Process applies rec exactly once for this consumer: it runs h with a
// fresh Tx and commits h's writes with the marker of rec's message id in
// one TransactWriteItems (a fresh idempotency token per attempt, so the
// SDK's own retries are safe). It returns
//   - Duplicate and no error when the marker exists: the message was
//     applied before (by this or another process, under any offset);
//   - Applied after the commit, then wakes the relays for any outbox
//     messages h added;
//   - an error, with nothing written, when h fails, when h's writes break
//     DynamoDB's limits (*LimitError, before any request), when one of h's
//     conditions is refused, or when the transaction lost a conflict on
//     MaxAttempts runs of h (*ConflictError). A conflict re-runs h from
//     scratch, so writes computed from fresh reads and outbox messages with
//     fresh sequence numbers are committed, never stale items.
//
// A record without a message id is refused with a *MissingIDError, or
// Skipped under SkipMissingID.
func (in *Inbox) Process(ctx context.Context, rec Record, h Handler) (out Outcome, err error) {
	id, raw, present, idErr := rec.messageID(in.opts.MessageIDHeader)
	if !present || idErr != nil {
		if in.opts.MissingID == SkipMissingID {
			in.metrics.add(Skipped)
			return Skipped, nil
		}
		in.metrics.failed()
		return 0, &MissingIDError{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Header: in.opts.MessageIDHeader, Value: raw}
	}
	ctx, span := outbox.StartSpan(ctx, in.opts.Tracer, SpanConsume)
	outbox.LinkOrigins(span, rec.originLinks())
	span.Annotate("consumer", in.opts.Consumer)
	span.Annotate("message_id", id.String())
	defer func() {
		if err == nil {
			span.Annotate("outcome", out.String())
			in.metrics.add(out)
		} else {
			in.metrics.failed()
		}
		span.End(err)
	}()
	for attempt := 1; ; attempt++ {
		out, err := in.attempt(ctx, rec, id, h)
		if err == nil || !isConflict(err) {
			return out, err
		}
		in.metrics.conflict()
		if attempt >= in.opts.MaxAttempts {
			return 0, &ConflictError{MessageID: id.String(), Attempts: attempt, Err: err}
		}
		in.opts.Logger.InfoContext(ctx, "outboxinbox: transaction conflicted with another write; running the handler again",
			"consumer", in.opts.Consumer, "message_id", id.String(), "attempt", attempt)
		if err := in.wait(ctx, attempt); err != nil {
			return 0, err
		}
	}
}

// attempt runs h once and commits its transaction with the marker.
func (in *Inbox) attempt(ctx context.Context, rec Record, id outbox.MessageID, h Handler) (Outcome, error) {
	tx := &Tx{}
	if err := h(ctx, rec, tx); err != nil {
		return 0, fmt.Errorf("outboxinbox: handle message %s (%s/%d@%d): %w", id, rec.Topic, rec.Partition, rec.Offset, err)
	}
	items, err := tx.seal(id, in.marker(id, in.opts.Clock.Now()))
	if err != nil {
		return 0, err
	}
	_, err = in.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems:      items,
		ClientRequestToken: aws.String(requestToken()),
	})
	switch {
	case err == nil:
		tx.notify(ctx)
		return Applied, nil
	case markerRefused(err, len(items)-1):
		// The marker's existence alone proves an earlier commit of this
		// message's effects: other refusals in the same cancellation are
		// those effects seen a second time.
		return Duplicate, nil
	case isConflict(err):
		return 0, err
	}
	return 0, fmt.Errorf("outboxinbox: commit message %s (%s/%d@%d): %w", id, rec.Topic, rec.Partition, rec.Offset, tx.explain(err))
}

// wait sleeps the jittered backoff before attempt+1, or until ctx ends.
func (in *Inbox) wait(ctx context.Context, attempt int) error {
	d := in.opts.ConflictBackoff << min(attempt-1, 10)
	d = d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// markerRefused reports a cancelled transaction whose reason at the
// marker's index is a failed condition.
func markerRefused(err error, marker int) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || marker >= len(tce.CancellationReasons) {
		return false
	}
	return aws.ToString(tce.CancellationReasons[marker].Code) == "ConditionalCheckFailed"
}

// isConflict reports a transaction cancelled because another request
// was changing one of its items at the same time.
func isConflict(err error) bool {
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			if aws.ToString(r.Code) == "TransactionConflict" {
				return true
			}
		}
	}
	var tc *types.TransactionConflictException
	return errors.As(err, &tc)
}

// requestToken returns a fresh idempotency token: 32 lower-case hex digits.
func requestToken() string {
	id := outbox.NewMessageID()
	return hex.EncodeToString(id[:])
}

package outboxinbox

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
)

// SpanConsume is the span Process opens around one record.
const SpanConsume = "consume"

// confirmTimeout bounds the repeated request that settles a commit whose
// response was lost.
const confirmTimeout = 5 * time.Second

// Client is the DynamoDB operations the inbox calls; *dynamodb.Client
// satisfies it.
type Client interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	// UpdateItem writes a Consumer's failed runs and dead-letterings on
	// the marker.
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Handler applies one record: it adds the record's business writes (and
// outbox messages) to tx and returns nil, or returns an error to apply
// nothing. It may run more than once for one record (after a conflict, or
// when the record is delivered again before its first transaction
// committed), so it must not have effects outside tx. A panic in it is
// recovered into a failed run (a *PanicError), its stack logged once.
type Handler func(ctx context.Context, rec Record, tx *Tx) error

// Outcome is what Process did with a record.
type Outcome int

const (
	// Applied: the handler's writes and the marker committed.
	Applied Outcome = iota + 1
	// Duplicate: the marker already existed; nothing was written again.
	Duplicate
	// Skipped: the record had no message id header and SkipMissingID is
	// set.
	Skipped
	// DeadLettered: the record failed MaxAttempts times and the consumer's
	// OnFailure policy took it; its marker says so. Reading the same
	// delivery again is a Duplicate; another delivery of the message (a
	// re-drive from the dead-letter topic) runs the handler once more.
	DeadLettered
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
	case DeadLettered:
		return "dead-lettered"
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
	hooks   hooks
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
	counts := &Metrics{}
	hs, err := newHooks(opts.Consumer, counts, opts.Hooks)
	if err != nil {
		return nil, err
	}
	return &Inbox{client: explaining{client}, opts: opts, metrics: counts, hooks: hs}, nil
}

// Metrics returns the inbox's counters since it was made.
func (in *Inbox) Metrics() *Metrics { return in.metrics }

// Process applies rec exactly once for this consumer. It first reads the
// marker of rec's message id (one consistent read): when it exists, h does
// not run and Process returns
//   - Duplicate and no error when the marker's fingerprint (topic, key,
//     value) is rec's and the message was applied before, by this or
//     another process, under any offset, or dead-lettered from this very
//     delivery;
//   - a *FingerprintError when the id was used for another record.
//
// A marker that proves nothing was applied (failed runs counted by a
// Consumer, or a dead-lettering of another delivery: a re-drive) lets h
// run. Otherwise too it runs h with a fresh Tx and commits h's writes with
// the marker in one TransactWriteItems (a fresh idempotency token per
// attempt, so the SDK's own retries are safe), and returns
//   - Applied after the commit, then wakes the relays for any outbox
//     messages h added; a commit whose response was lost is sent again
//     under its idempotency token, whose answer says what happened;
//   - the verdict above when another process committed the marker first
//     (DynamoDB returns the stored marker with the refusal);
//   - an error, with nothing written, when h fails or panics (*PanicError),
//     when h's writes break DynamoDB's limits (*LimitError, before any
//     request), when one of h's conditions is refused, or when the
//     transaction lost a conflict on MaxAttempts runs of h
//     (*ConflictError). A conflict re-runs h from scratch, so writes
//     computed from fresh reads and outbox messages with fresh sequence
//     numbers are committed, never stale items.
//
// A record without the message id header is refused with a
// *MissingIDError, or Skipped under SkipMissingID; a header that is present
// but not a message id is always a *MissingIDError. An error while ctx is
// ending is an interruption, not counted as a failure.
func (in *Inbox) Process(ctx context.Context, rec Record, h Handler) (Outcome, error) {
	r := in.process(ctx, rec, h, 0)
	return r.out, r.err
}

// result is one processing of a record.
type result struct {
	out Outcome
	err error
	// id is the record's message id; hasID says whether it has a marker.
	id    outbox.MessageID
	hasID bool
	// prior is the marker read before the run (nil: none).
	prior *marker
	// exhausted: the marker counted the limit of failed runs for this
	// delivery already, so h did not run (a Consumer stopped between its
	// last failed run and its failure policy).
	exhausted bool
}

// process is Process; with limit > 0 it does not run h for a delivery
// whose marker counted limit failed runs, and reports it exhausted.
func (in *Inbox) process(ctx context.Context, rec Record, h Handler, limit int) (r result) {
	id, raw, present, idErr := rec.messageID(in.opts.MessageIDHeader)
	if !present && in.opts.MissingID == SkipMissingID {
		in.hooks.outcome(Skipped)
		return result{out: Skipped}
	}
	if !present || idErr != nil {
		err := &MissingIDError{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Header: in.opts.MessageIDHeader, Value: raw}
		in.hooks.failure(err)
		return result{err: err}
	}
	r.id, r.hasID = id, true
	ctx, span := outbox.StartSpan(ctx, in.opts.Tracer, SpanConsume)
	outbox.LinkOrigins(span, rec.originLinks())
	span.Annotate("consumer", in.opts.Consumer)
	span.Annotate("message_id", id.String())
	defer func() {
		switch {
		case r.exhausted:
			span.Annotate("outcome", "exhausted")
		case r.err == nil:
			span.Annotate("outcome", r.out.String())
			in.hooks.outcome(r.out)
		case ctx.Err() == nil:
			in.hooks.failure(r.err)
		}
		span.End(r.err)
	}()
	if r.prior, r.err = in.lookup(ctx, id); r.err != nil {
		return r
	}
	if r.prior != nil {
		var run bool
		if r.out, run, r.err = in.judge(rec, id, r.prior); !run {
			return r
		}
		if limit > 0 && r.prior.failedRuns(rec) >= limit {
			r.exhausted = true
			return r
		}
	}
	r.out, r.err = in.runs(ctx, rec, id, h)
	return r
}

// runs runs h and commits, again after each conflict, up to MaxAttempts.
func (in *Inbox) runs(ctx context.Context, rec Record, id outbox.MessageID, h Handler) (Outcome, error) {
	for attempt := 1; ; attempt++ {
		out, err := in.attempt(ctx, rec, id, h)
		if err == nil || !isConflict(err) {
			return out, err
		}
		in.hooks.conflict()
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

// handle runs h, recovering a panic into a *PanicError whose stack it logs
// here, once.
func (in *Inbox) handle(ctx context.Context, rec Record, id outbox.MessageID, h Handler, tx *Tx) (err error) {
	defer func() {
		if v := recover(); v != nil {
			pe := &PanicError{Value: v, Stack: debug.Stack()}
			in.opts.Logger.ErrorContext(ctx, "outboxinbox: handler panicked; the run counts as failed",
				"consumer", in.opts.Consumer, "message_id", id.String(), "source", sourceOf(rec), "panic", fmt.Sprint(v), "stack", string(pe.Stack))
			err = pe
		}
	}()
	return h(ctx, rec, tx)
}

// attempt runs h once and commits its transaction with the marker.
func (in *Inbox) attempt(ctx context.Context, rec Record, id outbox.MessageID, h Handler) (Outcome, error) {
	tx := &Tx{writer: in.opts.Writer}
	if err := in.handle(ctx, rec, id, h, tx); err != nil {
		return 0, fmt.Errorf("outboxinbox: handle message %s (%s/%d@%d): %w", id, rec.Topic, rec.Partition, rec.Offset, err)
	}
	items, err := tx.seal(ctx, id, in.markerPut(rec, id, in.opts.Clock.Now()))
	if err != nil {
		return 0, err
	}
	input := &dynamodb.TransactWriteItemsInput{TransactItems: items, ClientRequestToken: aws.String(requestToken())}
	_, err = in.client.TransactWriteItems(ctx, input)
	var tce *types.TransactionCanceledException
	if err != nil && !errors.As(err, &tce) && !isConflict(err) {
		// The outcome is unknown (a timeout, a reset connection, the end
		// of ctx): the same request under the same token either commits
		// now or gets the first one's answer, so its answer settles it,
		// also during a shutdown.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), confirmTimeout)
		if _, again := in.client.TransactWriteItems(cctx, input); again == nil || errors.As(again, &tce) {
			err = again
		}
		cancel()
	}
	switch {
	case err == nil:
		tx.notify(context.WithoutCancel(ctx))
		return Applied, nil
	case isConflict(err):
		return 0, err
	case errors.As(err, &tce):
		if stored, refused := refusedMarker(tce, len(items)-1); refused {
			// The marker refuses only when it proves its message applied,
			// or names another record: other refusals in the same
			// cancellation are those effects seen a second time.
			return in.judgeStored(ctx, rec, id, stored)
		}
	}
	return 0, fmt.Errorf("outboxinbox: commit message %s (%s/%d@%d): %w", id, rec.Topic, rec.Partition, rec.Offset, tx.explain(err))
}

// judgeStored judges rec against the marker a refusal returned, reading it
// when the refusal did not carry it.
func (in *Inbox) judgeStored(ctx context.Context, rec Record, id outbox.MessageID, stored map[string]types.AttributeValue) (Outcome, error) {
	m := (*marker)(nil)
	if stored != nil {
		m = markerOf(stored)
	} else {
		var err error
		if m, err = in.lookup(ctx, id); err != nil || m == nil {
			// A marker refused then gone has expired in between: no verdict.
			return 0, cmp.Or(err, fmt.Errorf("outboxinbox: marker of message %s refused the commit, then was gone", id))
		}
	}
	out, run, err := in.judge(rec, id, m)
	if run {
		// Refused, yet replaceable: it changed between the commit and now.
		return 0, fmt.Errorf("outboxinbox: marker of message %s (%s) changed during the commit; no verdict yet", id, sourceOf(rec))
	}
	return out, err
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

// refusedMarker reports whether the cancellation's reason at the marker's
// index is a failed condition, and returns the stored marker DynamoDB sent
// with it.
func refusedMarker(tce *types.TransactionCanceledException, marker int) (map[string]types.AttributeValue, bool) {
	if marker >= len(tce.CancellationReasons) {
		return nil, false
	}
	r := tce.CancellationReasons[marker]
	return r.Item, aws.ToString(r.Code) == "ConditionalCheckFailed"
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

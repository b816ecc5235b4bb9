package outboxddb

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
)

// Writer enqueues messages: with the caller's business items in one call
// (Commit), on their own (Enqueue, EnqueueBatch), or into a
// TransactWriteItems the caller sends itself (Prepare). Build messages with outbox.NewMessage: the
// writer assigns each its bucket (outbox.ComputeBucket at Options.BucketCount)
// and its sequence number, and returns the messages as stored.
//
// DynamoDB has no auto-increment, so every message first takes the next
// number of its bucket's counter, outside the transaction. The order of two
// messages in a bucket is the order of their reservations; a reservation
// that never commits leaves a harmless gap. Build the items inside your retry
// loop: a transaction rebuilt from fresh state must reserve again. Each
// message is stamped with the block its transaction reserved in its
// bucket (TxFirst, TxCount), so a relay never hands out part of a
// transaction that a query overlapping its commit showed in part.
//
// Every method stores the caller's trace context on each message as
// headers (traceparent/tracestate, X-Amzn-Trace-Id), so the published record
// links back to the request that enqueued it: outbox.TraceContextFrom(ctx),
// its X-Ray header completed inside Lambda from the invocation (see
// outbox.InvocationTraceContext). Trace headers a message already carries
// win; a message with no trace context to add keeps its headers unchanged.
//
// Before its first write a Writer reads the table's layout record once and
// refuses to write with another bucket count (CheckLayout).
//
// A Writer is safe for concurrent use.
type Writer struct {
	client Client
	opts   WriterOptions
	keys   keys
	tel    telemetry

	// prev writes the generation this one replaces (WriterOptions.Previous…),
	// checking that it is open, until switched; nil without one.
	prev *Writer
	// switched: the writer saw the previous generation sealed. Sealed is
	// permanent, so it never goes back.
	switched atomic.Bool
	// layout is the check of the table's layout record (CheckLayout).
	layout layoutGate
}

// NewWriter returns a writer for the outbox described by opts.
func NewWriter(client Client, opts WriterOptions) (*Writer, error) {
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	if client == nil {
		return nil, outbox.Misconfigured("new writer", "DynamoDB client is nil")
	}
	client = explain(client)
	w := newWriter(client, opts)
	if opts.PreviousKeyPrefix != "" {
		popts := opts
		popts.KeyPrefix, popts.BucketCount = opts.PreviousKeyPrefix, opts.PreviousBucketCount
		popts.PreviousKeyPrefix, popts.PreviousBucketCount = "", 0
		popts.GenerationCheck = true
		w.prev = newWriter(client, popts)
	}
	return w, nil
}

func newWriter(client Client, opts WriterOptions) *Writer {
	return &Writer{client: client, opts: opts, keys: newKeys(opts.Options), tel: newTelemetry(opts.Hooks), layout: newLayoutGate()}
}

// Enqueue stores one message that has no business write, with one PutItem,
// and then notifies. It is safe under the SDK's retries: a retried request
// whose first attempt was applied is refused by its own item, which counts
// as success. Running Enqueue again after an ambiguous error stores a second
// copy under a new sequence number with the same message id (consumers
// deduplicate on the id).
//
// With WriterOptions.GenerationCheck, and with a previous generation it still
// writes to, it sends one TransactWriteItems with the generation check
// instead, as EnqueueBatch does.
func (w *Writer) Enqueue(ctx context.Context, msg outbox.Message) (outbox.Message, error) {
	if w.prev != nil {
		msgs, err := w.enqueueSwitching(ctx, []outbox.Message{msg})
		if err != nil {
			return outbox.Message{}, err
		}
		return msgs[0], nil
	}
	return w.enqueue(ctx, msg)
}

func (w *Writer) enqueue(ctx context.Context, msg outbox.Message) (outbox.Message, error) {
	if w.opts.GenerationCheck {
		msgs, err := w.enqueueBatch(ctx, []outbox.Message{msg})
		if err != nil {
			return outbox.Message{}, err
		}
		return msgs[0], nil
	}
	msgs, puts, err := w.prepare(ctx, []outbox.Message{msg})
	if err != nil {
		return outbox.Message{}, err
	}
	m, put := msgs[0], puts[0]
	_, err = w.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           put.TableName,
		Item:                                put.Item,
		ConditionExpression:                 put.ConditionExpression,
		ExpressionAttributeNames:            put.ExpressionAttributeNames,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			w.tel.failed("", OpEnqueue, m.Bucket(), err)
			return outbox.Message{}, fmt.Errorf("outboxddb: enqueue message %s (bucket %d, sequence %d): %w", m.ID, m.Bucket(), m.Sequence(), err)
		}
		w.tel.refused("", OpEnqueue, m.Bucket())
		held := storedMessageID(ccf.Item)
		if held != m.ID {
			return outbox.Message{}, &SequenceTakenError{Bucket: m.Bucket(), Sequence: m.Sequence(), MessageID: m.ID, HeldBy: held, Err: err}
		}
		// The SDK retried a request whose first attempt was applied.
	}
	w.notify(ctx, m)
	return m, nil
}

// EnqueueBatch stores up to MaxTransactionItems messages that have no
// business write, all or nothing, in one TransactWriteItems, and then
// notifies. Each call sends a fresh ClientRequestToken, so the SDK's retries
// of the call are idempotent; a retry that arrives after the token expired
// is refused by the call's own items, which counts as success. An empty list
// makes no request; a longer one is rejected before any request.
func (w *Writer) EnqueueBatch(ctx context.Context, msgs []outbox.Message) ([]outbox.Message, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	if len(msgs) > MaxTransactionItems {
		return nil, fmt.Errorf("outboxddb: enqueue %d messages: %w: at most %d per transaction", len(msgs), outbox.ErrInvalidMessage, MaxTransactionItems)
	}
	if w.prev != nil {
		return w.enqueueSwitching(ctx, msgs)
	}
	return w.enqueueBatch(ctx, msgs)
}

func (w *Writer) enqueueBatch(ctx context.Context, msgs []outbox.Message) ([]outbox.Message, error) {
	msgs, puts, err := w.prepare(ctx, msgs)
	if err != nil {
		return nil, err
	}
	items := make([]types.TransactWriteItem, len(puts), len(puts)+1)
	for i := range puts {
		items[i] = types.TransactWriteItem{Put: &puts[i]}
	}
	if w.opts.GenerationCheck {
		items = append(items, w.generationCheck())
	}
	_, err = w.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems:      items,
		ClientRequestToken: aws.String(newRequestToken()),
	})
	if err != nil {
		what := fmt.Sprintf("enqueue %d messages (first %s, bucket %d)", len(msgs), msgs[0].ID, msgs[0].Bucket())
		if sealed := w.sealed(err, items, what); sealed != nil {
			w.tel.refused("", OpEnqueueBatch, noBucket)
			return nil, sealed
		}
		if w.ownRetry(err, msgs) {
			w.tel.refused("", OpEnqueueBatch, noBucket)
		} else {
			w.tel.failed("", OpEnqueueBatch, noBucket, err)
			return nil, w.explain(err, items, "outboxddb: "+what)
		}
	}
	w.notify(ctx, msgs...)
	return msgs, nil
}

// notify wakes the relays for the buckets of msgs, after the transaction
// carrying msgs committed. Without a Notifier it does nothing; a
// notifier's error is logged, never returned: relays still find the
// messages by polling.
func (w *Writer) notify(ctx context.Context, msgs ...outbox.Message) {
	if w.opts.Notifier == nil || len(msgs) == 0 {
		return
	}
	buckets := make([]int, 0, len(msgs))
	for _, m := range msgs {
		buckets = append(buckets, m.Bucket())
	}
	slices.Sort(buckets)
	buckets = slices.Compact(buckets)
	if err := w.opts.Notifier.Notify(ctx, outbox.WakeUp{Buckets: buckets}); err != nil {
		w.opts.Logger.WarnContext(ctx, "outboxddb: wake-up after commit failed; the relay finds the messages by polling",
			"buckets", buckets, "error", err)
	}
}

// explainTransaction turns the error of a transaction that carried the
// writer's items (in request order: items[i] is the action of
// cancellation reason i) into a *SequenceTakenError or a
// *GenerationSealedError, learning from a seal of the previous generation;
// any other error comes back unchanged.
func (w *Writer) explainTransaction(err error, items []types.TransactWriteItem) error {
	if err == nil {
		return nil
	}
	if sealed := w.sealed(err, items, "transaction"); sealed != nil {
		return sealed
	}
	if w.prev != nil {
		if sealed := w.prev.sealed(err, items, "transaction"); sealed != nil {
			return w.learn(sealed)
		}
	}
	if taken := w.sequenceTaken(err, items); taken != nil {
		return taken
	}
	return err
}

// prepare validates msgs, reserves their numbers and builds their Puts.
func (w *Writer) prepare(ctx context.Context, msgs []outbox.Message) ([]outbox.Message, []types.Put, error) {
	if len(msgs) == 0 {
		return nil, nil, nil
	}
	out := make([]outbox.Message, len(msgs))
	total := 0
	tc := outbox.InvocationTraceContext(ctx, w.opts.Getenv)
	for i, m := range msgs {
		if m.CreatedAt.IsZero() {
			m.CreatedAt = w.opts.Clock.Now()
		}
		if err := w.validate(m); err != nil {
			return nil, nil, err
		}
		bucket, err := outbox.ComputeBucket(m.Key, m.ID, w.opts.BucketCount, m.Partition)
		if err != nil {
			return nil, nil, fmt.Errorf("outboxddb: enqueue message %s: %w", m.ID, err)
		}
		m = outbox.Stored(m, bucket, 0)
		headers, err := withTrace(m.Headers, tc)
		if err != nil {
			return nil, nil, fmt.Errorf("outboxddb: enqueue message %s: %w", m.ID, err)
		}
		m.Headers = headers
		size := ItemSize(w.keys.encodeMessage(m, w.opts.BucketCount, largestReservation))
		if size > MaxItemSize {
			return nil, nil, &ItemTooLargeError{MessageID: m.ID, Size: size, Limit: MaxItemSize}
		}
		total += size
		out[i] = m
	}
	if total > MaxTransactionSize {
		return nil, nil, &ItemTooLargeError{Size: total, Limit: MaxTransactionSize}
	}
	if err := w.checkLayout(ctx); err != nil {
		return nil, nil, err
	}
	reserved, err := w.reserve(ctx, out)
	if err != nil {
		return nil, nil, err
	}
	puts := make([]types.Put, len(out))
	for i, m := range out {
		puts[i] = types.Put{
			TableName:                           aws.String(w.opts.TableName),
			Item:                                w.keys.encodeMessage(m, w.opts.BucketCount, reserved[m.Bucket()]),
			ConditionExpression:                 aws.String(exprMessageIsNew),
			ExpressionAttributeNames:            names("#pk", w.opts.PartitionKey),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}
	}
	return out, puts, nil
}

// withTrace returns blob with tc's trace headers merged in (the blob's own
// trace headers win). Without a header to add it returns blob itself, so a
// message that had no blob gets none.
func withTrace(blob []byte, tc outbox.TraceContext) ([]byte, error) {
	add := tc.Headers()
	if len(add) == 0 {
		return blob, nil
	}
	existing, err := outbox.DecodeHeaders(blob)
	if err != nil {
		return nil, err
	}
	merged := outbox.MergeTraceHeaders(existing, tc)
	if len(merged) == len(existing) {
		return blob, nil
	}
	return outbox.EncodeHeaders(merged), nil
}

// Validate reports, without any request, the first of msgs the writer would
// refuse: a zero id, an empty topic, a topic outside WriterOptions.Topics, a
// negative partition. The error matches outbox.ErrInvalidMessage. Every
// enqueue validates its messages; Tx.Enqueue and the inbox's call this to
// report a bad message where the caller adds it. Sizes are checked when
// the items are built.
func (w *Writer) Validate(msgs ...outbox.Message) error {
	for _, m := range msgs {
		if err := w.validate(m); err != nil {
			return err
		}
	}
	return nil
}

func (w *Writer) validate(m outbox.Message) error {
	var problem string
	switch {
	case m.ID.IsZero():
		problem = "message id is zero"
	case m.Topic == "":
		problem = "topic is empty"
	case len(w.opts.Topics) > 0 && !slices.Contains(w.opts.Topics, m.Topic):
		problem = fmt.Sprintf("topic %q is not one of the writer's topics %v (WriterOptions.Topics); the relay could not publish it", m.Topic, w.opts.Topics)
	case m.Partition != nil && *m.Partition < 0:
		problem = fmt.Sprintf("partition %d is negative", *m.Partition)
	default:
		return nil
	}
	return fmt.Errorf("outboxddb: enqueue message %s: %w: %s", m.ID, outbox.ErrInvalidMessage, problem)
}

// reserve takes one block of numbers per distinct bucket and hands them out
// in list order, setting each message's sequence; it returns each bucket's
// block, which stamps the bucket's messages: every number of a block is a
// message of the one transaction that carries them (docs/protocol.md,
// "Fetching a bucket in order").
func (w *Writer) reserve(ctx context.Context, msgs []outbox.Message) (map[int]reservation, error) {
	var buckets []int
	counts := map[int]int64{}
	for _, m := range msgs {
		if counts[m.Bucket()] == 0 {
			buckets = append(buckets, m.Bucket())
		}
		counts[m.Bucket()]++
	}
	last := make([]int64, len(buckets))
	err := forEach(ctx, w.opts.MaxConcurrency, len(buckets), func(ctx context.Context, i int) error {
		n, err := w.reserveBlock(ctx, buckets[i], counts[buckets[i]])
		last[i] = n
		return err
	})
	if err != nil {
		return nil, err
	}
	blocks := make(map[int]reservation, len(buckets))
	next := make(map[int]int64, len(buckets))
	for i, b := range buckets {
		blocks[b] = reservation{first: last[i] - counts[b] + 1, count: counts[b]}
		next[b] = blocks[b].first
	}
	for i := range msgs {
		b := msgs[i].Bucket()
		msgs[i] = outbox.Stored(msgs[i], b, next[b])
		next[b]++
	}
	return blocks, nil
}

// reserveBlock adds n to the bucket's counter and returns the new value, the
// last number reserved. ADD creates a missing counter at zero, so a bucket's
// first number is 1.
func (w *Writer) reserveBlock(ctx context.Context, bucket int, n int64) (int64, error) {
	out, err := w.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(w.opts.TableName),
		Key:                       w.keys.counterKey(bucket),
		UpdateExpression:          aws.String(exprReserve),
		ExpressionAttributeNames:  names("#sequence", attrSequence),
		ExpressionAttributeValues: map[string]types.AttributeValue{":count": num(n)},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		w.tel.failed("", OpReserve, bucket, err)
		return 0, fmt.Errorf("outboxddb: reserve %d sequence number(s) in bucket %d: %w", n, bucket, err)
	}
	last, ok := intAttr(out.Attributes, attrSequence)
	if !ok {
		return 0, fmt.Errorf("outboxddb: reserve %d sequence number(s) in bucket %d: response carries no integer %s", n, bucket, attrSequence)
	}
	return last, nil
}

// ownRetry reports a transaction refused only by its own items: every
// cancellation reason is a failed condition whose stored item is the
// message at the same index. That is the SDK retrying a transaction that
// was applied after its idempotency token expired.
func (w *Writer) ownRetry(err error, msgs []outbox.Message) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false
	}
	reasons := tce.CancellationReasons
	if w.opts.GenerationCheck && len(reasons) == len(msgs)+1 {
		// The generation check passed (a refused one is reported as
		// sealed before this is asked).
		reasons = reasons[:len(msgs)]
	}
	if len(reasons) != len(msgs) {
		return false
	}
	for i, r := range reasons {
		if aws.ToString(r.Code) != "ConditionalCheckFailed" || storedMessageID(r.Item) != msgs[i].ID || msgs[i].ID.IsZero() {
			return false
		}
	}
	return true
}

func (w *Writer) explain(err error, items []types.TransactWriteItem, op string) error {
	if taken := w.sequenceTaken(err, items); taken != nil {
		return taken
	}
	return fmt.Errorf("%s: %w", op, err)
}

// sequenceTaken finds an outbox Put among items that a cancelled
// transaction refused on its condition: the first one held by another
// message, else the first one refused.
func (w *Writer) sequenceTaken(err error, items []types.TransactWriteItem) *SequenceTakenError {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil
	}
	var first *SequenceTakenError
	for i, r := range tce.CancellationReasons {
		if i >= len(items) || aws.ToString(r.Code) != "ConditionalCheckFailed" {
			continue
		}
		put := items[i].Put
		if put == nil || aws.ToString(put.TableName) != w.opts.TableName {
			continue
		}
		pk, _ := stringAttr(put.Item, w.opts.PartitionKey)
		sk, _ := stringAttr(put.Item, w.opts.SortKey)
		bucket, isMessage := w.keys.parseMessagePartition(pk)
		seq, isSeq := parseDigits(sk)
		raw, _ := stringAttr(put.Item, attrMessageID)
		id, idErr := outbox.ParseMessageID(raw)
		if !isMessage || !isSeq || idErr != nil {
			continue
		}
		taken := &SequenceTakenError{Bucket: bucket, Sequence: seq, MessageID: id, HeldBy: storedMessageID(r.Item), Err: err}
		if !taken.HeldBy.IsZero() && taken.HeldBy != id {
			return taken
		}
		if first == nil {
			first = taken
		}
	}
	return first
}

// storedMessageID parses the MessageId of an item DynamoDB returned; zero
// when absent or not a GUID. Ids are compared parsed, so a writer in another
// language that stored another GUID spelling still matches.
func storedMessageID(item map[string]types.AttributeValue) outbox.MessageID {
	raw, ok := stringAttr(item, attrMessageID)
	if !ok {
		return outbox.MessageID{}
	}
	id, err := outbox.ParseMessageID(raw)
	if err != nil {
		return outbox.MessageID{}
	}
	return id
}

// newRequestToken returns a fresh idempotency token: a random GUID as 32
// lowercase hex digits.
func newRequestToken() string {
	id := outbox.NewMessageID()
	return hex.EncodeToString(id[:])
}

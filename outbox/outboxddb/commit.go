package outboxddb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/internal/sleep"
)

// DefaultMaxCommitAttempts is how many times Commit builds and sends a
// transaction that loses to concurrent writes before it gives up.
const DefaultMaxCommitAttempts = 4

// commitBackoff is the wait before Commit's second attempt; it doubles for
// each later one, plus up to as much again at random so writers that lost
// to each other do not collide again.
const commitBackoff = 10 * time.Millisecond

// ErrConflict matches a *ConflictError: Commit gave up on a transaction
// that kept losing to concurrent writes.
var ErrConflict = errors.New("outboxddb: the transaction kept losing to concurrent writes")

// ConflictError reports a Commit that gave up after MaxCommitAttempts: each
// attempt was cancelled because a business item's condition failed or
// another transaction was writing the same item. It matches ErrConflict.
type ConflictError struct {
	// Attempts is how many transactions were sent.
	Attempts int
	// Items are the positions, in the order the Tx received them, of the
	// business items whose condition failed in the last attempt; empty when
	// it lost to a concurrent transaction.
	Items []int
	// Err is the last DynamoDB error.
	Err error
}

// Error implements error.
func (e *ConflictError) Error() string {
	if len(e.Items) == 0 {
		return fmt.Sprintf("outboxddb: commit gave up after %d attempts: every attempt lost to a concurrent transaction on the same items", e.Attempts)
	}
	return fmt.Sprintf("outboxddb: commit gave up after %d attempts: the condition of business item(s) %v failed each time", e.Attempts, e.Items)
}

// Unwrap returns the last DynamoDB error.
func (e *ConflictError) Unwrap() error { return e.Err }

// Is reports whether target is ErrConflict.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Tx collects one business transaction for Writer.Commit: the caller's own
// items and the messages to enqueue with them. A Tx lives for one attempt.
type Tx struct {
	w     *Writer
	items []types.TransactWriteItem
	msgs  []outbox.Message
}

// Add adds business items (Put, Update, Delete or ConditionCheck on any
// table) to the transaction, in order.
func (tx *Tx) Add(items ...types.TransactWriteItem) { tx.items = append(tx.items, items...) }

// Put adds a business Put to the transaction.
func (tx *Tx) Put(put types.Put) { tx.Add(types.TransactWriteItem{Put: &put}) }

// Enqueue adds messages to the transaction; Commit places them in their
// buckets and reserves their sequence numbers when it sends the attempt.
// A message the writer would refuse (Writer.Validate) is reported here, so
// build can return the error where it added the message, and is not added.
// Build messages with outbox.NewMessage, outside the build function when a
// rebuilt transaction should keep their ids.
func (tx *Tx) Enqueue(msgs ...outbox.Message) error {
	if err := tx.w.Validate(msgs...); err != nil {
		return err
	}
	tx.msgs = append(tx.msgs, msgs...)
	return nil
}

// Commit writes a business transaction and its messages all or nothing,
// then wakes the relays (WriterOptions.Notifier) and returns the messages as
// stored. build fills a fresh Tx on every attempt, so it must read the
// state it decides on inside, as any optimistic transaction does.
//
// Each attempt reserves the messages' sequence numbers anew and sends one
// TransactWriteItems: the business items in order, then the messages'
// Puts, then the generation check with WriterOptions.GenerationCheck. A writer
// with a previous generation writes that one, with its check, as Enqueue
// does; the attempt its seal refuses is built again for the new one. When
// DynamoDB cancels it because a business item's condition failed or
// another transaction held an item, Commit waits briefly and builds again,
// up to MaxCommitAttempts, then returns a *ConflictError. A numbered gap
// left by a lost attempt is harmless: the relays skip it.
//
// Other errors end Commit at once: build's own error (wrapped, so errors.Is
// still finds it), a *SequenceTakenError when a message's number holds
// another message, an error matching generation.ErrSealed, a
// an error matching outbox.ErrInvalidMessage before any request,
// ctx's error, or the DynamoDB error. An empty Tx sends nothing.
func (w *Writer) Commit(ctx context.Context, build func(ctx context.Context, tx *Tx) error) ([]outbox.Message, error) {
	for attempt := 1; ; attempt++ {
		tx := &Tx{w: w}
		if err := build(ctx, tx); err != nil {
			return nil, fmt.Errorf("outboxddb: build transaction (attempt %d): %w", attempt, err)
		}
		msgs, err := w.commitOnce(ctx, tx)
		var sealed *GenerationSealedError
		if errors.As(err, &sealed) && sealed.Switched {
			// The writer switched to its new generation for good: build
			// the transaction again for it, at once.
			continue
		}
		var lost *ConflictError
		if !errors.As(err, &lost) {
			if err == nil {
				w.notify(ctx, msgs...)
			}
			return msgs, err
		}
		lost.Attempts = attempt
		if attempt >= w.opts.MaxCommitAttempts {
			return nil, lost
		}
		wait := commitBackoff << (attempt - 1)
		wait += rand.N(wait)
		if !sleep.For(wait, ctx.Done()) {
			return nil, fmt.Errorf("outboxddb: commit: %w after %d attempt(s) lost to concurrent writes", ctx.Err(), attempt)
		}
	}
}

// commitOnce reserves, builds and sends one attempt. A cancellation that a
// rebuild may cure comes back as a *ConflictError.
func (w *Writer) commitOnce(ctx context.Context, tx *Tx) ([]outbox.Message, error) {
	// The generation the writer writes now: the previous one, with its
	// check, until the writer saw it sealed.
	t := w.target()
	extra := 0
	if t.opts.GenerationCheck && len(tx.msgs) > 0 {
		extra = 1
	}
	if n := len(tx.items) + len(tx.msgs) + extra; n > MaxTransactionItems {
		return nil, fmt.Errorf("outboxddb: commit %d items and %d messages: %w: at most %d actions per transaction",
			len(tx.items), len(tx.msgs), outbox.ErrInvalidMessage, MaxTransactionItems)
	}
	if len(tx.items) == 0 && len(tx.msgs) == 0 {
		return nil, nil
	}
	msgs, puts, err := t.prepare(ctx, tx.msgs)
	if err != nil {
		return nil, err
	}
	items := make([]types.TransactWriteItem, 0, len(tx.items)+len(puts)+extra)
	items = append(items, tx.items...)
	for i := range puts {
		items = append(items, types.TransactWriteItem{Put: &puts[i]})
	}
	if extra == 1 {
		items = append(items, t.generationCheck())
	}
	_, err = w.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems:      items,
		ClientRequestToken: aws.String(newRequestToken()),
	})
	if err == nil {
		return msgs, nil
	}
	what := fmt.Sprintf("commit %d business items and %d messages", len(tx.items), len(msgs))
	if sealed := t.sealed(err, items, what); sealed != nil {
		w.tel.refused("", OpCommit, noBucket)
		if t != w {
			return nil, w.learn(sealed)
		}
		return nil, sealed
	}
	if taken := t.sequenceTaken(err, items); taken != nil {
		w.tel.refused("", OpCommit, noBucket)
		return nil, taken
	}
	if lost := lostRace(err, len(tx.items)); lost != nil {
		w.tel.refused("", OpCommit, noBucket)
		return nil, lost
	}
	w.tel.failed("", OpCommit, noBucket, err)
	return nil, fmt.Errorf("outboxddb: %s: %w", what, err)
}

// lostRace returns a *ConflictError when err cancelled the transaction only
// for reasons a rebuild may cure: failed conditions of the first business
// items, or a concurrent transaction on any item. nil otherwise.
func lostRace(err error, business int) *ConflictError {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		var conflict *types.TransactionConflictException
		if errors.As(err, &conflict) {
			return &ConflictError{Err: err}
		}
		return nil
	}
	lost := &ConflictError{Err: err}
	cured := false
	for i, r := range tce.CancellationReasons {
		switch code := aws.ToString(r.Code); {
		case code == "" || code == "None":
		case code == "TransactionConflict":
			cured = true
		case code == "ConditionalCheckFailed" && i < business:
			lost.Items = append(lost.Items, i)
			cured = true
		default:
			return nil
		}
	}
	if !cured {
		return nil
	}
	return lost
}

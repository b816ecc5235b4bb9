package outboxinbox

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// Tx is the transaction a Handler fills for one record: its business
// writes and, for consume-transform-produce, outbox messages. The inbox
// appends its marker and commits everything in one TransactWriteItems. A
// Tx is built afresh for every run of the handler (a run whose transaction
// lost a conflict is repeated from scratch, so its outbox messages reserve
// new sequence numbers, as the writer requires). It is not safe for
// concurrent use.
type Tx struct {
	items []types.TransactWriteItem
	// writer is Options.Writer; msgs are the messages added for it,
	// prepared when the transaction is sealed (for the wake-up after the
	// commit and the explanation of a refusal).
	writer   *outboxddb.Writer
	msgs     []outbox.Message
	prepared *outboxddb.Prepared
}

// Add appends business writes, in order. Conditions on them are checked by
// DynamoDB with the marker's: a refused one cancels the whole transaction
// and Process returns the error.
func (tx *Tx) Add(items ...types.TransactWriteItem) { tx.items = append(tx.items, items...) }

// Enqueue adds outbox messages through the inbox's writer (Options.Writer),
// as outboxddb.Tx.Enqueue does for Writer.Commit: a message the writer
// would refuse (outboxddb.Writer.Validate) is reported here and not added;
// the inbox places the messages and reserves their sequence numbers when it
// commits the record's transaction, which publishes them only if it
// commits, and wakes the relays after it did. An inbox without a writer
// refuses every message (a misconfiguration).
func (tx *Tx) Enqueue(msgs ...outbox.Message) error {
	if tx.writer == nil {
		return outbox.Misconfigured("enqueue in inbox transaction", "the inbox has no outbox writer (Options.Writer)")
	}
	if err := tx.writer.Validate(msgs...); err != nil {
		return fmt.Errorf("outboxinbox: enqueue %d messages: %w", len(msgs), err)
	}
	tx.msgs = append(tx.msgs, msgs...)
	return nil
}

// Len is the number of business writes and messages added so far; the
// marker makes one more.
func (tx *Tx) Len() int {
	return len(tx.items) + len(tx.msgs)
}

// seal prepares the messages, checks the limits with the marker counted
// and returns the items to send, the marker last.
func (tx *Tx) seal(ctx context.Context, id outbox.MessageID, marker types.TransactWriteItem) ([]types.TransactWriteItem, error) {
	items := slices.Clone(tx.items)
	if len(tx.msgs) > 0 {
		p, err := tx.writer.Prepare(ctx, tx.msgs...)
		if err != nil {
			return nil, fmt.Errorf("outboxinbox: enqueue %d messages: %w", len(tx.msgs), err)
		}
		tx.prepared = p
		items = append(items, p.Items()...)
	}
	items = append(items, marker)
	n := len(items)
	if n > outboxddb.MaxTransactionItems {
		return nil, &LimitError{MessageID: id.String(), Items: n, MaxItems: outboxddb.MaxTransactionItems, MaxSize: outboxddb.MaxTransactionSize}
	}
	size := 0
	for _, it := range items {
		size += actionSize(it)
	}
	if size > outboxddb.MaxTransactionSize {
		return nil, &LimitError{MessageID: id.String(), Items: n, Size: size, MaxItems: outboxddb.MaxTransactionItems, MaxSize: outboxddb.MaxTransactionSize}
	}
	return items, nil
}

// actionSize approximates what an action counts toward the 4 MB limit: a
// Put its item, an Update its key and values, a Delete or ConditionCheck
// its key.
func actionSize(it types.TransactWriteItem) int {
	switch {
	case it.Put != nil:
		return outboxddb.ItemSize(it.Put.Item)
	case it.Update != nil:
		return outboxddb.ItemSize(it.Update.Key) + outboxddb.ItemSize(it.Update.ExpressionAttributeValues)
	case it.Delete != nil:
		return outboxddb.ItemSize(it.Delete.Key)
	case it.ConditionCheck != nil:
		return outboxddb.ItemSize(it.ConditionCheck.Key)
	}
	return 0
}

// notify wakes the relays for the messages of a committed transaction.
func (tx *Tx) notify(ctx context.Context) {
	if tx.prepared != nil {
		tx.prepared.Committed(ctx)
	}
}

// explain lets the writer recognise a refusal of its own items (a reset
// sequence counter, a sealed generation); other errors come back as they
// are.
func (tx *Tx) explain(err error) error {
	if tx.prepared == nil {
		return err
	}
	return tx.prepared.Explain(err)
}

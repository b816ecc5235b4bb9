package outboxinbox

import (
	"context"
	"fmt"

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
	sent  []sentMessages
}

// sentMessages are the outbox messages one writer added, for the wake-up
// after the commit and the explanation of a refusal.
type sentMessages struct {
	writer *outboxddb.Writer
	msgs   []outbox.Message
	first  int // index of the writer's first item in Tx.items
	n      int
}

// Add appends business writes, in order. Conditions on them are checked by
// DynamoDB with the marker's: a refused one cancels the whole transaction
// and Process returns the error.
func (tx *Tx) Add(items ...types.TransactWriteItem) { tx.items = append(tx.items, items...) }

// Enqueue reserves sequence numbers for msgs through w and adds their Puts:
// the messages are published only if the record's transaction commits, and
// the relays are woken after it did.
func (tx *Tx) Enqueue(ctx context.Context, w *outboxddb.Writer, msgs ...outbox.Message) error {
	if w == nil {
		return outbox.Misconfigured("enqueue in inbox transaction", "writer is nil")
	}
	items, stored, err := w.TransactItems(ctx, msgs)
	if err != nil {
		return fmt.Errorf("outboxinbox: enqueue %d messages: %w", len(msgs), err)
	}
	tx.sent = append(tx.sent, sentMessages{writer: w, msgs: stored, first: len(tx.items), n: len(items)})
	tx.items = append(tx.items, items...)
	return nil
}

// Len is the number of actions added so far; the marker makes one more.
func (tx *Tx) Len() int { return len(tx.items) }

// seal checks the limits with the marker counted and returns the items to
// send, the marker last.
func (tx *Tx) seal(id outbox.MessageID, marker types.TransactWriteItem) ([]types.TransactWriteItem, error) {
	n := len(tx.items) + 1
	if n > outboxddb.MaxTransactionItems {
		return nil, &LimitError{MessageID: id.String(), Items: n, MaxItems: outboxddb.MaxTransactionItems, MaxSize: outboxddb.MaxTransactionSize}
	}
	items := append(tx.items[:len(tx.items):len(tx.items)], marker)
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
	for _, s := range tx.sent {
		s.writer.NotifyCommitted(ctx, s.msgs...)
	}
}

// explain lets each writer recognise a refusal of its own items (a reset
// sequence counter, a sealed generation); other errors come back as they
// are.
func (tx *Tx) explain(err error) error {
	for _, s := range tx.sent {
		items := make([]types.TransactWriteItem, len(tx.items))
		// Only the writer's own items are shown to it, at their indexes,
		// so a refused business item is never mistaken for a message.
		copy(items[s.first:s.first+s.n], tx.items[s.first:s.first+s.n])
		if explained := s.writer.ExplainTransactionError(err, items); explained != err {
			return explained
		}
	}
	return err
}

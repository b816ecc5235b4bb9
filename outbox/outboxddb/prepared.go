package outboxddb

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
)

// Prepared is an enqueue for a TransactWriteItems the caller builds and
// sends itself; Writer.Commit does all of it in one call and is the path to
// prefer. Put Items in the transaction, then call Committed after it
// committed, or pass its error to Explain.
type Prepared struct {
	w     *Writer
	items []types.TransactWriteItem
	msgs  []outbox.Message
}

// Prepare places msgs (each in its bucket, outbox.ComputeBucket at the
// bucket count of the generation the writer writes), reserves their
// sequence numbers (one reservation per distinct bucket, numbers in list
// order) and builds their Puts, each stamped with its bucket's block: a
// relay hands out a block whole or not yet, so prepare all of one
// transaction's messages in one call (two calls stamp two blocks, and the
// second can go while the first still commits). Each Put carries attribute_not_exists, so a
// counter someone reset fails the transaction instead of overwriting a
// pending message. Every message is validated before any request: errors
// match outbox.ErrInvalidMessage. No message makes no request and no item.
//
// With WriterOptions.GenerationCheck, or while a writer with a previous
// generation (WriterOptions.PreviousKeyPrefix) still writes that one, the items
// end with the generation check: one item more than msgs. Prepare inside
// your retry loop: a transaction rebuilt from fresh state must reserve
// again, and after a refusal for the seal the items are for the new
// generation.
func (w *Writer) Prepare(ctx context.Context, msgs ...outbox.Message) (*Prepared, error) {
	p := &Prepared{w: w}
	if len(msgs) == 0 {
		return p, nil
	}
	t := w.target()
	if n := len(msgs) + btoi(t.opts.GenerationCheck); n > MaxTransactionItems {
		return nil, fmt.Errorf("outboxddb: prepare %d messages: %w: %d items, at most %d per transaction", len(msgs), outbox.ErrInvalidMessage, n, MaxTransactionItems)
	}
	stored, puts, err := t.prepare(ctx, msgs)
	if err != nil {
		return nil, err
	}
	p.msgs = stored
	p.items = make([]types.TransactWriteItem, len(puts), len(puts)+1)
	for i := range puts {
		p.items[i] = types.TransactWriteItem{Put: &puts[i]}
	}
	if t.opts.GenerationCheck {
		p.items = append(p.items, t.generationCheck())
	}
	return p, nil
}

// Items returns the actions to include in the transaction, in any position.
func (p *Prepared) Items() []types.TransactWriteItem { return p.items }

// Messages returns the messages as they will be stored once the
// transaction commits: bucket and sequence set.
func (p *Prepared) Messages() []outbox.Message { return p.msgs }

// Committed wakes the relays for the messages' buckets (WriterOptions.Notifier).
// Call it only after the transaction committed. A notifier's error is
// logged, never returned: relays still find the messages by polling.
func (p *Prepared) Committed(ctx context.Context) { p.w.notify(ctx, p.msgs...) }

// Explain turns the error of the transaction that carried Items into a
// *SequenceTakenError when one of the Puts was refused because its
// sequence number holds another message, and into a *GenerationSealedError
// (matching generation.ErrSealed) when the generation check was
// refused; a writer with a previous generation then writes the new one, so
// Prepare again. It recognises its items by the item DynamoDB returns with
// a refusal (ReturnValuesOnConditionCheckFailure ALL_OLD, which the items
// ask for), wherever they stood in the transaction. Any other error comes
// back unchanged; nil stays nil.
func (p *Prepared) Explain(err error) error {
	var tce *types.TransactionCanceledException
	if err == nil || len(p.items) == 0 || !errors.As(err, &tce) {
		return err
	}
	// The writer's explanations read items by the reasons' positions.
	aligned := make([]types.TransactWriteItem, len(tce.CancellationReasons))
	for i, r := range tce.CancellationReasons {
		if it, ok := p.itemHolding(r.Item); ok {
			aligned[i] = it
		}
	}
	return p.w.explainTransaction(err, aligned)
}

// itemHolding returns the item of p whose key is stored's.
func (p *Prepared) itemHolding(stored map[string]types.AttributeValue) (types.TransactWriteItem, bool) {
	pkName, skName := p.w.opts.PartitionKey, p.w.opts.SortKey
	pk, okP := stringAttr(stored, pkName)
	sk, okS := stringAttr(stored, skName)
	if !okP || !okS {
		return types.TransactWriteItem{}, false
	}
	for _, it := range p.items {
		key := map[string]types.AttributeValue(nil)
		switch {
		case it.Put != nil:
			key = it.Put.Item
		case it.ConditionCheck != nil:
			key = it.ConditionCheck.Key
		}
		ipk, _ := stringAttr(key, pkName)
		isk, _ := stringAttr(key, skName)
		if ipk == pk && isk == sk {
			return it, true
		}
	}
	return types.TransactWriteItem{}, false
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

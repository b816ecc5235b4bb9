package fleetsim

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/internal/sleep"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// Writer retry policy: an application that got an error enqueues the same
// messages again (same ids, fresh reservations) after a pause.
const (
	writerAttempts = 8
	writerBackoff  = 250 * time.Millisecond
)

// writerProc is one writer process: it runs its operations one at a time,
// in time order, so its keys have a defined enqueue order.
type writerProc struct {
	sim *sim
	n   int
	w   *outboxddb.Writer
	// client is the process's, for the business transactions.
	client outboxddb.Client
	ops    chan *writerOp
}

func (p *writerProc) loop(ctx context.Context) {
	for op := range p.ops {
		p.exec(ctx, op)
		p.sim.opsDone.Add(1)
		p.sim.lab.Poke()
	}
}

func (p *writerProc) exec(ctx context.Context, op *writerOp) {
	s := p.sim
	for attempt := 1; attempt <= writerAttempts; attempt++ {
		stored, err := p.try(ctx, op, attempt)
		if err == nil {
			for i, m := range op.msgs {
				m.state = msgCommitted
				m.copies = append(m.copies, stored[i].Sequence())
			}
			s.trace.add("enqueue", fmt.Sprintf("writer-%d", p.n), -1, "op=%d %s %s", op.seq, op.kind, describe(stored))
			return
		}
		if op.kind == opTxnRejected && businessRefused(err) {
			for _, m := range op.msgs {
				m.state = msgRejected
			}
			s.trace.add("enqueue", fmt.Sprintf("writer-%d", p.n), -1, "op=%d %s cancelled by the business condition", op.seq, op.kind)
			return
		}
		for _, m := range op.msgs {
			if m.state != msgCommitted {
				m.state = msgUncertain
			}
		}
		s.trace.add("enqueue-error", fmt.Sprintf("writer-%d", p.n), -1, "op=%d %s attempt %d: %v", op.seq, op.kind, attempt, err)
		if !sleep.For(writerBackoff, ctx.Done()) {
			return
		}
	}
	s.add(&s.rep.AbandonedOps, 1)
}

// try runs attempt of op and returns the stored messages in op order.
func (p *writerProc) try(ctx context.Context, op *writerOp, attempt int) ([]outbox.Message, error) {
	s := p.sim
	msgs := make([]outbox.Message, len(op.msgs))
	for i, m := range op.msgs {
		msg, err := outbox.NewMessage(m.topic, m.key, m.value, outbox.MessageOptions{
			Headers: m.headers, Partition: m.partition, ID: m.id, CreatedAt: s.clock.Now(),
		})
		if err != nil {
			return nil, err
		}
		msgs[i] = msg
	}
	switch op.kind {
	case opSingle:
		m, err := p.w.Enqueue(ctx, msgs[0])
		return []outbox.Message{m}, err
	case opList:
		return p.w.EnqueueBatch(ctx, msgs)
	default:
		prepared, err := p.w.Prepare(ctx, msgs...)
		if err != nil {
			return nil, err
		}
		business := types.TransactWriteItem{Put: &types.Put{
			TableName:                aws.String(ordersTable),
			Item:                     orderItem(op.order),
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": outboxddb.DefaultPartitionKey},
		}}
		// The attempt's idempotency token, drawn from the seed.
		id := randomID(newRand(s.cfg.Seed, "request-token", uint64(op.seq), uint64(attempt)))
		_, err = p.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems:      append([]types.TransactWriteItem{business}, prepared.Items()...),
			ClientRequestToken: aws.String(hex.EncodeToString(id[:])),
		})
		if businessRefused(err) {
			// Counted before the writer can block again, so the driver
			// never sees the Counter's refusal without its explanation.
			s.bizRefused.Add(1)
		}
		if err != nil {
			return nil, prepared.Explain(err)
		}
		prepared.Committed(ctx)
		return prepared.Messages(), nil
	}
}

// businessRefused reports a transaction cancelled because its business
// Put (the first action) found the order already placed.
func businessRefused(err error) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || len(tce.CancellationReasons) == 0 {
		return false
	}
	return aws.ToString(tce.CancellationReasons[0].Code) == "ConditionalCheckFailed"
}

func describe(msgs []outbox.Message) string {
	out := ""
	for i, m := range msgs {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("b%d#%d", m.Bucket(), m.Sequence())
	}
	return out
}

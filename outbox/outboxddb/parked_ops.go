package outboxddb

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
)

// ParkedMessage is one item of a parked partition, as operators see it.
type ParkedMessage struct {
	Bucket int
	// Sequence is the message's original sequence, the parked sort key.
	Sequence int64
	// MessageID is the stored id as text (it may be malformed in an
	// undecodable item); Topic and Key as stored (Key nil when keyless).
	MessageID string
	Topic     string
	Key       []byte
	Reason    outbox.ParkReason
	Error     string
	Attempts  int
	// FirstFailedAt is zero for a message parked behind its key;
	// ParkedAt is the last failure or the move.
	FirstFailedAt, ParkedAt time.Time
	item                    map[string]types.AttributeValue
}

// ListParked returns the parked messages of the given buckets (every bucket
// when none is given), bucket by bucket in original order: one strongly
// consistent query per bucket (all pages).
func (s *Store) ListParked(ctx context.Context, buckets ...int) ([]ParkedMessage, error) {
	if len(buckets) == 0 {
		for b := range s.opts.BucketCount {
			buckets = append(buckets, b)
		}
	}
	var out []ParkedMessage
	for _, b := range buckets {
		if b < 0 || b >= s.opts.BucketCount {
			return nil, fmt.Errorf("outboxddb: list parked messages: bucket %d outside [0, %d)", b, s.opts.BucketCount)
		}
		items, err := s.queryAll(ctx, OpParkedList, &dynamodb.QueryInput{
			TableName:                 aws.String(s.opts.TableName),
			KeyConditionExpression:    aws.String(exprPartitionIs),
			ExpressionAttributeNames:  names("#pk", s.opts.PartitionKey),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(s.keys.parkedPartition(b))},
			ConsistentRead:            aws.Bool(true),
			ScanIndexForward:          aws.Bool(true),
		})
		if err != nil {
			return nil, fmt.Errorf("outboxddb: list the parked messages of bucket %d: %w", b, err)
		}
		for _, item := range items {
			sk, _ := stringAttr(item, s.opts.SortKey)
			seq, ok := parseDigits(sk)
			if !ok {
				continue
			}
			p := ParkedMessage{Bucket: b, Sequence: seq, item: item,
				FirstFailedAt: timeOfTicks(item, attrFirstFailedAt), ParkedAt: timeOfTicks(item, attrParkedAt)}
			p.MessageID, _ = stringAttr(item, attrMessageID)
			p.Topic, _ = stringAttr(item, attrTopic)
			if k, ok := item[attrKey].(*types.AttributeValueMemberB); ok {
				p.Key = append([]byte{}, k.Value...)
			}
			reason, _ := stringAttr(item, attrParkedReason)
			p.Reason = outbox.ParkReason(reason)
			p.Error, _ = stringAttr(item, attrParkedError)
			attempts, _ := intAttr(item, attrAttempts)
			p.Attempts = int(attempts)
			out = append(out, p)
		}
	}
	return out, nil
}

// DropParked deletes one parked message for good, conditioned on its
// message id, so a message replayed or dropped meanwhile is reported as
// outbox.ErrParkConflict rather than deleted twice.
func (s *Store) DropParked(ctx context.Context, p ParkedMessage) error {
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.opts.TableName),
		Key:                       s.keys.key(s.keys.parkedPartition(p.Bucket), sequenceSortKeyOf(p.Sequence)),
		ConditionExpression:       aws.String(exprMessageIDIs),
		ExpressionAttributeNames:  names("#mid", attrMessageID),
		ExpressionAttributeValues: map[string]types.AttributeValue{":mid": str(p.MessageID)},
	})
	if conditionFailed(err) {
		return fmt.Errorf("outboxddb: drop parked message %s (bucket %d, sequence %d): %w", p.MessageID, p.Bucket, p.Sequence, outbox.ErrParkConflict)
	}
	if err != nil {
		s.tel.failed("", OpDrop, p.Bucket, err)
		return fmt.Errorf("outboxddb: drop parked message %s (bucket %d, sequence %d): %w", p.MessageID, p.Bucket, p.Sequence, err)
	}
	return nil
}

// message decodes the parked item as the message it was, with topic
// replacing the stored topic when not empty (how a row without a usable
// topic is repaired). The result has no sequence: replay assigns one.
func (p ParkedMessage) message(k keys, topic string) (outbox.Message, error) {
	item := maps.Clone(p.item)
	if topic != "" {
		item[attrTopic] = str(topic)
	}
	m, err := k.decodeMessage(item, p.Bucket)
	if err != nil {
		return outbox.Message{}, fmt.Errorf("outboxddb: parked message %q (bucket %d, sequence %d) cannot be replayed: %w; drop it, or replay it with another topic if its topic is the problem",
			p.MessageID, p.Bucket, p.Sequence, err)
	}
	m.Sequence = 0
	return m, nil
}

// maxReplayChunk is how many parked messages one replay transaction moves:
// each takes a Put and a Delete of DynamoDB's 100 actions.
const maxReplayChunk = MaxTransactionItems / 2

// ReplayParked re-enqueues parked messages through the writer's path, in
// the order given (list them with Store.ListParked: a key's messages are in
// their original order): each gets a new sequence at the tail of its bucket
// and keeps its message id, headers and payload; topic, when not empty,
// replaces the stored topic. Consecutive messages of one bucket move
// together, up to 50 per TransactWriteItems, each Put with the Delete of its
// parked item conditioned on its message id, so a replay interrupted and run
// again neither loses nor doubles a message: what moved is no longer
// parked. A parked item replayed or dropped meanwhile fails its transaction
// with outbox.ErrParkConflict. It returns the re-enqueued messages and
// notifies the relay after each transaction.
func (w *Writer) ReplayParked(ctx context.Context, parked []ParkedMessage, topic string) ([]outbox.Message, error) {
	var done []outbox.Message
	for start := 0; start < len(parked); {
		end := start + 1
		for end < len(parked) && end-start < maxReplayChunk && parked[end].Bucket == parked[start].Bucket {
			end++
		}
		moved, err := w.replayChunk(ctx, parked[start:end], topic)
		if err != nil {
			return done, err
		}
		done = append(done, moved...)
		start = end
	}
	return done, nil
}

func (w *Writer) replayChunk(ctx context.Context, parked []ParkedMessage, topic string) ([]outbox.Message, error) {
	msgs := make([]outbox.Message, len(parked))
	for i, p := range parked {
		m, err := p.message(w.keys, topic)
		if err != nil {
			return nil, err
		}
		msgs[i] = m
	}
	msgs, puts, err := w.prepare(ctx, msgs)
	if err != nil {
		return nil, err
	}
	actions := make([]types.TransactWriteItem, 0, 2*len(puts))
	for i := range puts {
		p := parked[i]
		actions = append(actions, types.TransactWriteItem{Put: &puts[i]}, types.TransactWriteItem{Delete: &types.Delete{
			TableName:                 aws.String(w.opts.TableName),
			Key:                       w.keys.key(w.keys.parkedPartition(p.Bucket), sequenceSortKeyOf(p.Sequence)),
			ConditionExpression:       aws.String(exprMessageIDIs),
			ExpressionAttributeNames:  names("#mid", attrMessageID),
			ExpressionAttributeValues: map[string]types.AttributeValue{":mid": str(p.MessageID)},
		}})
	}
	_, err = w.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: actions, ClientRequestToken: aws.String(newRequestToken()),
	})
	if conditionFailed(err) {
		w.tel.refused("", OpReplay, parked[0].Bucket)
		return nil, fmt.Errorf("outboxddb: replay %d parked message(s) of bucket %d from sequence %d: %w: %v",
			len(parked), parked[0].Bucket, parked[0].Sequence, outbox.ErrParkConflict, err)
	}
	if err != nil {
		w.tel.failed("", OpReplay, parked[0].Bucket, err)
		return nil, fmt.Errorf("outboxddb: replay %d parked message(s) of bucket %d from sequence %d: %w",
			len(parked), parked[0].Bucket, parked[0].Sequence, err)
	}
	w.NotifyCommitted(ctx, msgs...)
	return msgs, nil
}

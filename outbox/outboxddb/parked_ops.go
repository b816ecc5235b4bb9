package outboxddb

import (
	"context"
	"fmt"
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
	// ReplayRequested is when an operator marked the message for replay
	// (zero: not marked); ReplayTopic the topic it is replayed to (empty:
	// its own).
	ReplayRequested time.Time
	ReplayTopic     string
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
			p := ParkedMessage{Bucket: b, Sequence: seq,
				FirstFailedAt: timeOfTicks(item, attrFirstFailedAt), ParkedAt: timeOfTicks(item, attrParkedAt),
				ReplayRequested: timeOfTicks(item, attrReplayRequested)}
			p.ReplayTopic, _ = stringAttr(item, attrReplayTopic)
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

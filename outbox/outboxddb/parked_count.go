package outboxddb

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ParkedCount is one bucket's parked partition in figures: what an
// operator must know before calling an outbox empty.
type ParkedCount struct {
	Bucket int
	// Parked counts the parked messages, capped at PendingCountLimit.
	Parked int64
	// Marked counts those an operator marked for replay: a relay of any
	// poison policy publishes them under the bucket's lease.
	Marked int64
	// HeldBackKeys counts the distinct keys with parked messages: each
	// key's later messages are parked behind them until they are replayed
	// or dropped. Keyless parked messages hold nothing back.
	HeldBackKeys int
}

// ParkedCounts counts the parked messages, the marked ones and the
// held-back keys of every bucket (up to MaxConcurrency buckets at once):
// one strongly consistent query per bucket, projecting the key and the
// mark. DynamoDB bills the items read whatever the projection, so a bucket
// costs what counting its parked messages costs.
func (s *Store) ParkedCounts(ctx context.Context) ([]ParkedCount, error) {
	n := s.opts.BucketCount
	out := make([]ParkedCount, n)
	err := forEach(ctx, s.opts.MaxConcurrency, n, func(ctx context.Context, b int) error {
		c, err := s.countParked(ctx, b)
		out[b] = c
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Store) countParked(ctx context.Context, bucket int) (ParkedCount, error) {
	limit := int64(s.opts.PendingCountLimit)
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.opts.TableName),
		KeyConditionExpression:    aws.String(exprPartitionIs),
		ProjectionExpression:      aws.String("#k, #rr"),
		ExpressionAttributeNames:  names("#pk", s.opts.PartitionKey, "#k", attrKey, "#rr", attrReplayRequested),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(s.keys.parkedPartition(bucket))},
		ConsistentRead:            aws.Bool(true),
	}
	c := ParkedCount{Bucket: bucket}
	keys := map[string]bool{}
	for c.Parked < limit {
		in.Limit = aws.Int32(int32(min(limit-c.Parked, maxInt32)))
		page, err := s.client.Query(ctx, in)
		if err != nil {
			s.tel.failed("", OpParkedList, bucket, err)
			return c, fmt.Errorf("outboxddb: count the parked messages of bucket %d: %w", bucket, err)
		}
		for _, item := range page.Items {
			c.Parked++
			if _, marked := item[attrReplayRequested]; marked {
				c.Marked++
			}
			if k, ok := item[attrKey].(*types.AttributeValueMemberB); ok {
				keys[string(k.Value)] = true
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	c.HeldBackKeys = len(keys)
	return c, nil
}

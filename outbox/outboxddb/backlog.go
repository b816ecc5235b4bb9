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

// Backlog samples the pending messages of every bucket (up to MaxConcurrency
// buckets at once). DynamoDB has no aggregate and bills a count as a read of
// every counted item, so each bucket is counted up to PendingCountLimit; a
// bucket at the limit reports the limit. Oldest is the earliest CreatedAt of
// the bucket heads, the messages a stalled outbox is stuck on. All reads are
// eventually consistent.
func (s *Store) Backlog(ctx context.Context) (outbox.Backlog, error) {
	buckets, err := s.SampleBuckets(ctx)
	if err != nil {
		return outbox.Backlog{}, err
	}
	var sample outbox.Backlog
	for _, b := range buckets {
		sample.Pending += b.Pending
		sample.Parked += b.Parked
		if !b.Oldest.IsZero() && (sample.Oldest.IsZero() || b.Oldest.Before(sample.Oldest)) {
			sample.Oldest = b.Oldest
		}
	}
	return sample, nil
}

// BucketSample is one bucket's part of a backlog sample.
type BucketSample struct {
	Bucket int
	// Pending counts the bucket's messages, capped at PendingCountLimit.
	Pending int64
	// Oldest is the CreatedAt of the bucket's head; zero when empty.
	Oldest time.Time
	// Parked counts the bucket's parked messages, capped like Pending;
	// zero unless StoreOptions.CountParked.
	Parked int64
}

// SampleBuckets samples every bucket as Backlog does and returns the
// per-bucket figures in bucket order (operators' status view).
func (s *Store) SampleBuckets(ctx context.Context) ([]BucketSample, error) {
	n := s.opts.BucketCount
	out := make([]BucketSample, n)
	err := forEach(ctx, s.opts.MaxConcurrency, n, func(ctx context.Context, b int) error {
		head, count, err := s.sampleBucket(ctx, b)
		out[b] = BucketSample{Bucket: b, Pending: count, Oldest: timeOf(head)}
		if err != nil || !s.opts.CountParked {
			return err
		}
		out[b].Parked, err = s.countPartition(ctx, s.keys.parkedPartition(b), b, "parked messages")
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// sampleBucket returns the head's CreatedAtUtc ticks (0 when the bucket is
// empty or the head has none) and the bucket's count, capped at the limit.
func (s *Store) sampleBucket(ctx context.Context, bucket int) (head, count int64, err error) {
	out, err := s.client.Query(ctx, s.headQuery(bucket, attrCreatedAt))
	if err != nil {
		s.tel.failed("", OpBacklog, bucket, err)
		return 0, 0, fmt.Errorf("outboxddb: read the head of bucket %d: %w", bucket, err)
	}
	if len(out.Items) == 0 {
		return 0, 0, nil
	}
	head, _ = intAttr(out.Items[0], attrCreatedAt)
	count, err = s.countPartition(ctx, s.keys.messagePartition(bucket), bucket, "messages")
	return head, count, err
}

// countPartition counts a partition's items up to PendingCountLimit with
// eventually consistent COUNT queries.
func (s *Store) countPartition(ctx context.Context, pk string, bucket int, what string) (int64, error) {
	limit := int64(s.opts.PendingCountLimit)
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.opts.TableName),
		KeyConditionExpression:    aws.String(exprPartitionIs),
		ExpressionAttributeNames:  names("#pk", s.opts.PartitionKey),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk)},
		Select:                    types.SelectCount,
	}
	var count int64
	for count < limit {
		in.Limit = aws.Int32(int32(min(limit-count, maxInt32)))
		out, err := s.client.Query(ctx, in)
		if err != nil {
			s.tel.failed("", OpBacklog, bucket, err)
			return 0, fmt.Errorf("outboxddb: count the %s of bucket %d: %w", what, bucket, err)
		}
		count += int64(out.Count)
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	return min(count, limit), nil
}

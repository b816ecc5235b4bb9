package outboxddb

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
)

// maxGapProbes bounds the gap probes of one fetch; a batch with more gaps is
// accepted as read.
const maxGapProbes = 8

// PendingBuckets returns, ascending, which of buckets hold at least one
// message: one eventually consistent, one-key query per bucket (up to
// MaxConcurrency at once). A stale answer costs at most an empty fetch or
// one poll interval. An empty list makes no request.
func (s *Store) PendingBuckets(ctx context.Context, buckets []int) ([]int, error) {
	pending := make([]bool, len(buckets))
	err := forEach(ctx, s.opts.MaxConcurrency, len(buckets), func(ctx context.Context, i int) error {
		out, err := s.client.Query(ctx, s.headQuery(buckets[i], s.opts.SortKey))
		if err != nil {
			s.tel.failed("", OpPendingProbe, buckets[i], err)
			return fmt.Errorf("outboxddb: probe bucket %d for pending messages: %w", buckets[i], err)
		}
		pending[i] = len(out.Items) > 0
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []int
	for i, p := range pending {
		if p {
			out = append(out, buckets[i])
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// headQuery reads the first message of a bucket, projecting one attribute,
// eventually consistent.
func (s *Store) headQuery(bucket int, projected string) *dynamodb.QueryInput {
	return &dynamodb.QueryInput{
		TableName:                 aws.String(s.opts.TableName),
		KeyConditionExpression:    aws.String(exprPartitionIs),
		ProjectionExpression:      aws.String(exprProjected),
		ExpressionAttributeNames:  names("#pk", s.opts.PartitionKey, "#projected", projected),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(s.keys.messagePartition(bucket))},
		ScanIndexForward:          aws.Bool(true),
		Limit:                     aws.Int32(1),
	}
}

// FetchBatch returns up to maxCount messages of bucket in enqueue order, with a
// strongly consistent query (following pages until maxCount messages or the end).
//
// DynamoDB queries are only read-committed against transactions: a query
// that runs while a transaction commits can return its message n+1 without
// n. So FetchBatch probes the gaps in the fetched sequence numbers, from the
// last number this store deleted from the bucket (or from 1 when it deleted
// none: after a start or a handover everything below the head is a gap), up
// to 8 probes per fetch. When a probe finds a message it fetches again and
// probes the new result from the gap that was found on, within the same 8
// probes: the second read can overlap another commit as well as the first.
// A gap that stays empty (an abandoned reservation) costs one minimal read.
//
// The batch stops at the first row it cannot use: it returns the messages
// before that row with an *outbox.UnreadableRowError for a malformed row
// (matching outbox.ErrInvalidItem), or a misconfiguration for a row stamped
// with another bucket count, so the valid prefix is relayed and the bad row
// becomes the bucket's head. A row whose sort key is not a sequence number
// fails the fetch the same way with an *InvalidItemError.
func (s *Store) FetchBatch(ctx context.Context, bucket, maxCount int) ([]outbox.Message, error) {
	if bucket < 0 || maxCount < 1 {
		return nil, fmt.Errorf("outboxddb: fetch batch: bucket %d must be >= 0 and max count %d >= 1", bucket, maxCount)
	}
	batch, rowErr, err := s.fetch(ctx, bucket, maxCount)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	expected := s.lastDeleted[bucket] + 1
	s.mu.Unlock()
	probes := 0
	for {
		// Below the gap a probe found, every number was read or probed
		// empty: only the rest of the new result needs probing.
		found, at, err := s.probeGaps(ctx, bucket, expected, batch, &probes)
		if err != nil {
			return nil, err
		}
		if !found {
			return batch, rowErr
		}
		if batch, rowErr, err = s.fetch(ctx, bucket, maxCount); err != nil {
			return nil, err
		}
		expected = at
	}
}

// fetch reads up to maxCount messages; rowErr reports the row the batch
// stopped at, err a failed read.
func (s *Store) fetch(ctx context.Context, bucket, maxCount int) (batch []outbox.Message, rowErr, err error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.opts.TableName),
		KeyConditionExpression:    aws.String(exprPartitionIs),
		ExpressionAttributeNames:  names("#pk", s.opts.PartitionKey),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(s.keys.messagePartition(bucket))},
		ConsistentRead:            aws.Bool(true),
		ScanIndexForward:          aws.Bool(true),
	}
	for {
		in.Limit = aws.Int32(int32(min(maxCount-len(batch), maxInt32)))
		out, err := s.client.Query(ctx, in)
		if err != nil {
			s.tel.failed("", OpFetch, bucket, err)
			return nil, nil, fmt.Errorf("outboxddb: fetch batch from bucket %d: %w", bucket, err)
		}
		for _, item := range out.Items {
			if err := s.keys.checkBucketCount(item, bucket, s.opts.BucketCount); err != nil {
				return batch, err, nil
			}
			m, err := s.keys.decodeMessage(item, bucket)
			if err != nil {
				return batch, s.unreadable(item, bucket, err), nil
			}
			batch = append(batch, m)
		}
		if len(out.LastEvaluatedKey) == 0 || len(batch) >= maxCount {
			return batch, nil, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// unreadable wraps a decode failure: with the row's sequence when its sort
// key has one, so the relay can treat the row as its bucket's head.
func (s *Store) unreadable(item map[string]types.AttributeValue, bucket int, err error) error {
	sk, _ := stringAttr(item, s.keys.sk)
	seq, ok := parseDigits(sk)
	if !ok {
		return fmt.Errorf("outboxddb: fetch batch from bucket %d: %w", bucket, err)
	}
	row := &outbox.UnreadableRowError{Bucket: bucket, Sequence: seq, Err: err}
	// The key quarantines the row's later messages when it reads as
	// ParkedKeys reads it, so every relay treats the row alike.
	if k, ok := item[attrKey].(*types.AttributeValueMemberB); ok {
		row.Key = append([]byte{}, k.Value...)
	}
	return row
}

// probeGaps reports whether a message exists in a gap of batch's sequence
// numbers, starting at expected, and where the gap it found starts. It
// stops at the first probe that finds something, and once *probes, shared
// by the reads of one fetch, would pass maxGapProbes.
func (s *Store) probeGaps(ctx context.Context, bucket int, expected int64, batch []outbox.Message, probes *int) (bool, int64, error) {
	for _, m := range batch {
		if m.Sequence() > expected {
			*probes++
			if *probes > maxGapProbes {
				return false, 0, nil
			}
			found, err := s.probe(ctx, bucket, expected, m.Sequence()-1)
			if err != nil || found {
				return found, expected, err
			}
		}
		expected = max(expected, m.Sequence()+1)
	}
	return false, 0, nil
}

// probe counts, strongly consistent, whether any message exists in
// [first, last] of bucket.
func (s *Store) probe(ctx context.Context, bucket int, first, last int64) (bool, error) {
	out, err := s.client.Query(ctx, &dynamodb.QueryInput{
		TableName:                aws.String(s.opts.TableName),
		KeyConditionExpression:   aws.String(exprPartitionBetween),
		ExpressionAttributeNames: names("#pk", s.opts.PartitionKey, "#sk", s.opts.SortKey),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk":    str(s.keys.messagePartition(bucket)),
			":first": str(sequenceSortKeyOf(first)),
			":last":  str(sequenceSortKeyOf(last)),
		},
		ConsistentRead: aws.Bool(true),
		Select:         types.SelectCount,
		Limit:          aws.Int32(1),
	})
	if err != nil {
		s.tel.failed("", OpGapProbe, bucket, err)
		return false, fmt.Errorf("outboxddb: probe bucket %d for messages %d..%d: %w", bucket, first, last, err)
	}
	return out.Count > 0, nil
}

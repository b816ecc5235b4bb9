package outboxddb

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
)

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

// FetchBatch returns up to maxCount messages of bucket in enqueue order,
// read with a strongly consistent query (following pages until maxCount
// messages or the end), cut before the first message that an earlier
// committed message of its key could still be missing from.
//
// DynamoDB queries are only read-committed against transactions: a query
// that runs while a transaction commits can return its message n+1 without
// n, and so can a count. Spillway's writers stamp each message with its
// transaction's block of numbers in the bucket (TxFirst, TxCount), and a
// fetch hands out a block whole, or as far as maxCount let it read, never
// with a number missing: when the block that starts the batch lacks some,
// one TransactGetItems of them, which DynamoDB refuses while the
// transaction commits, tells a commit in progress (the block waits) from
// rows deleted or parked after it completed; a block further in ends the
// batch. Rows without the stamp (writers of other languages, or from
// before it), and rows read by a later page, have the numbers below them
// probed by count queries sent after they were read, from 1: the last
// delete is no baseline. Probes and snapshots are at most 8 per fetch
// (maxFetchReads); the batch ends before the first row they could not
// settle, and a probe that finds a row fetches again. The rule, and why a
// stamped row needs no probe of what its own page scanned, are in
// docs/protocol.md ("Fetching a bucket in order") and docs/order.md. The
// store keeps no state between fetches, so a start or a handover changes
// nothing. A batch cut before rows the fetch read (a block that goes
// whole next time, a row not settled within the reads) comes with
// outbox.ErrBatchCut, so the relay fetches again at once rather than wait
// for its next probe; a fetch with nothing to hand out yet (the head's
// transaction still committing) returns no messages and no error.
//
// The batch stops at the first row it cannot use: it returns the messages
// before that row with an *outbox.UnreadableRowError for a malformed row
// (matching outbox.ErrInvalidItem; a stamp that names no block holding the
// row is malformed), or a misconfiguration for a row stamped with another
// bucket count, so the valid prefix is relayed and the bad row becomes the
// bucket's head; when the prefix is cut earlier, the bad row is not
// reported yet. A row whose sort key is not a sequence number fails the
// fetch the same way with an *InvalidItemError.
func (s *Store) FetchBatch(ctx context.Context, bucket, maxCount int) ([]outbox.Message, error) {
	if bucket < 0 || maxCount < 1 {
		return nil, fmt.Errorf("outboxddb: fetch batch: bucket %d must be >= 0 and max count %d >= 1", bucket, maxCount)
	}
	var v fetchView
	for {
		batch, rows, rowErr, err := s.fetch(ctx, bucket, maxCount)
		if err != nil {
			return nil, err
		}
		v.rows, v.complete, v.probed = rows, rowErr == nil && len(rows) < maxCount, nil
		again, err := s.settle(ctx, bucket, &v)
		if err != nil {
			return nil, err
		}
		if again {
			continue
		}
		step := planFetch(v)
		switch {
		case step.accept == len(batch):
			return batch, rowErr
		case step.accept == 0:
			return batch[:0], nil
		default:
			return batch[:step.accept], outbox.ErrBatchCut
		}
	}
}

// settle sends the probes and snapshots planFetch asks for until it
// accepts a prefix of v.rows; it reports whether one found a row the fetch
// has not read, so the fetch reads again.
func (s *Store) settle(ctx context.Context, bucket int, v *fetchView) (again bool, err error) {
	for {
		step := planFetch(*v)
		switch {
		case step.snapshot != nil:
			v.reads++
			committing, present, err := s.snapshot(ctx, bucket, step.snapshot)
			switch {
			case err != nil:
				return false, err
			case committing:
				v.committing = step.of.first
			case slices.Contains(present, true):
				return true, nil
			default:
				v.gone = append(v.gone, step.snapshot...)
			}
		case step.probe != (seqRun{}):
			v.reads++
			found, err := s.probe(ctx, bucket, step.probe.first, step.probe.last)
			if err != nil || found {
				return found, err
			}
			v.probed = append(v.probed, step.probe)
		default:
			return false, nil
		}
	}
}

// fetch reads up to maxCount messages, with each row's page and stamp;
// rowErr reports the row the batch stopped at, err a failed read.
func (s *Store) fetch(ctx context.Context, bucket, maxCount int) (batch []outbox.Message, rows []fetchedRow, rowErr, err error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.opts.TableName),
		KeyConditionExpression:    aws.String(exprPartitionIs),
		ExpressionAttributeNames:  names("#pk", s.opts.PartitionKey),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(s.keys.messagePartition(bucket))},
		ConsistentRead:            aws.Bool(true),
		ScanIndexForward:          aws.Bool(true),
	}
	for page := 0; ; page++ {
		in.Limit = aws.Int32(int32(min(maxCount-len(batch), maxInt32)))
		out, err := s.client.Query(ctx, in)
		if err != nil {
			s.tel.failed("", OpFetch, bucket, err)
			return nil, nil, nil, fmt.Errorf("outboxddb: fetch batch from bucket %d: %w", bucket, err)
		}
		for _, item := range out.Items {
			if err := s.keys.checkBucketCount(item, bucket, s.opts.BucketCount); err != nil {
				return batch, rows, err, nil
			}
			m, err := s.keys.decodeMessage(item, bucket)
			if err != nil {
				return batch, rows, s.unreadable(item, bucket, err), nil
			}
			res, stamped, err := s.keys.stampOf(item, m.Sequence())
			if err != nil {
				return batch, rows, s.unreadable(item, bucket, err), nil
			}
			batch = append(batch, m)
			rows = append(rows, fetchedRow{seq: m.Sequence(), page: page, res: res, stamped: stamped})
		}
		if len(out.LastEvaluatedKey) == 0 || len(batch) >= maxCount {
			return batch, rows, nil, nil
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

// snapshot reads the rows seqs of bucket with one TransactGetItems, which
// DynamoDB answers as one serializable view and refuses while a
// transaction writing one of them commits: committing reports that
// refusal, present which rows exist.
func (s *Store) snapshot(ctx context.Context, bucket int, seqs []int64) (committing bool, present []bool, err error) {
	gets := make([]types.TransactGetItem, len(seqs))
	for i, seq := range seqs {
		gets[i] = types.TransactGetItem{Get: &types.Get{
			TableName:                aws.String(s.opts.TableName),
			Key:                      s.keys.messageKey(bucket, seq),
			ProjectionExpression:     aws.String(exprProjected),
			ExpressionAttributeNames: names("#projected", s.opts.SortKey),
		}}
	}
	out, err := s.client.TransactGetItems(ctx, &dynamodb.TransactGetItemsInput{TransactItems: gets})
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) && slices.ContainsFunc(tce.CancellationReasons, func(r types.CancellationReason) bool {
		return aws.ToString(r.Code) == "TransactionConflict"
	}) {
		return true, nil, nil
	}
	if err == nil && len(out.Responses) != len(seqs) {
		err = fmt.Errorf("%d responses for %d rows", len(out.Responses), len(seqs))
	}
	if err != nil {
		s.tel.failed("", OpSnapshot, bucket, err)
		return false, nil, fmt.Errorf("outboxddb: read bucket %d rows %d..%d as one snapshot: %w", bucket, seqs[0], seqs[len(seqs)-1], err)
	}
	present = make([]bool, len(seqs))
	for i, r := range out.Responses {
		present[i] = len(r.Item) > 0
	}
	return false, present, nil
}

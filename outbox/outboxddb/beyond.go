package outboxddb

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// What lies beyond the bucket count: messages no relay reads (stranded,
// written by a writer with a larger count) and lease items no relay plans
// with (stale, left by a relay with a larger count). Neither is reached by
// anything else the store does.

// Operation names of these requests, for telemetry.
const (
	OpStranded   = "stranded"
	OpStaleLease = "stale_lease_remove"
)

// exprStaleLeaseRemovable deletes a stale lease item only while nobody
// holds it (no owner, or an expiry passed); one already gone is no
// refusal.
const exprStaleLeaseRemovable = "attribute_not_exists(#pk) OR attribute_not_exists(#owner) OR attribute_not_exists(#expires) OR #expires <= :now"

var _ outbox.StrandedCounter = (*Store)(nil)

// Stranded implements outbox.StrandedCounter over the buckets
// [BucketCount, 2 × BucketCount): a writer with any larger count puts
// messages there (and in higher buckets, when its count is more than twice
// the table's). It costs what StrandedIn costs for those buckets.
func (s *Store) Stranded(ctx context.Context) (outbox.Stranded, error) {
	n := s.opts.BucketCount
	buckets := make([]int, n)
	for i := range buckets {
		buckets[i] = n + i
	}
	return s.StrandedIn(ctx, buckets)
}

// StrandedIn counts the messages in the given buckets at or beyond the
// bucket count (others are skipped): one eventually consistent head query
// (Limit 1, half a read unit) per bucket, as PendingBuckets probes, then a
// count of each bucket that holds something, capped at PendingCountLimit
// as Backlog caps it.
func (s *Store) StrandedIn(ctx context.Context, buckets []int) (outbox.Stranded, error) {
	var beyond []int
	for _, b := range buckets {
		if b >= s.opts.BucketCount && b <= maxInt32 {
			beyond = append(beyond, b)
		}
	}
	found, err := s.PendingBuckets(ctx, beyond)
	if err != nil {
		return outbox.Stranded{}, err
	}
	counts := make([]int64, len(found))
	err = forEach(ctx, s.opts.MaxConcurrency, len(found), func(ctx context.Context, i int) error {
		var err error
		counts[i], err = s.countPartition(ctx, s.keys.messagePartition(found[i]), found[i], "stranded messages")
		return err
	})
	if err != nil {
		return outbox.Stranded{}, err
	}
	st := outbox.Stranded{Buckets: found}
	for _, c := range counts {
		st.Messages += c
	}
	return st, nil
}

// StaleLeases returns the lease items at or beyond the bucket count, which
// every relay, writer and command ignores, with one strongly consistent
// Query of the lease items: left by a relay or a drain run with a larger
// count, or by a relay of another language still running with one (then
// held and unexpired).
func (s *Store) StaleLeases(ctx context.Context) ([]lease.State, error) {
	items, err := s.readCoordinationItems(ctx, leasePrefix)
	if err != nil {
		return nil, err
	}
	leases, _ := s.keys.coordinationItems(items)
	var out []lease.State
	for _, l := range leases {
		if l.bucket >= s.opts.BucketCount {
			out = append(out, lease.State{Bucket: l.bucket, Owner: l.owner, ExpiresAt: timeOf(l.expires)})
		}
	}
	return out, nil
}

// RemoveStaleLeases deletes the lease items of the given buckets at or
// beyond the bucket count (others are skipped), one conditional DeleteItem
// each (one write unit), each only while nobody holds it at the store
// clock's now: removed lists the deleted buckets, held those a relay holds
// (refused: a relay with a larger count still runs and would claim the item
// again; stop it first).
func (s *Store) RemoveStaleLeases(ctx context.Context, buckets []int) (removed, held []int, err error) {
	var stale []int
	for _, b := range buckets {
		if b >= s.opts.BucketCount && b <= maxInt32 {
			stale = append(stale, b)
		}
	}
	now := s.now()
	outcomes := make([]leaseOutcome, len(stale))
	err = forEach(ctx, s.opts.MaxConcurrency, len(stale), func(ctx context.Context, i int) error {
		_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName:                 aws.String(s.opts.TableName),
			Key:                       s.keys.leaseKey(stale[i]),
			ConditionExpression:       aws.String(exprStaleLeaseRemovable),
			ExpressionAttributeNames:  names("#pk", s.opts.PartitionKey, "#owner", attrOwner, "#expires", attrExpiresAt),
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(now)},
		})
		switch {
		case err == nil:
			outcomes[i] = outcomeAccepted
		case isConditionFailed(err):
			outcomes[i] = outcomeRefused
			s.tel.refused("", OpStaleLease, stale[i])
		default:
			s.tel.failed("", OpStaleLease, stale[i], err)
			return fmt.Errorf("outboxddb: remove the stale lease item of bucket %d: %w", stale[i], err)
		}
		return nil
	})
	for i, o := range outcomes {
		switch o {
		case outcomeAccepted:
			removed = append(removed, stale[i])
		case outcomeRefused:
			held = append(held, stale[i])
		}
	}
	return removed, held, err
}

// rehomeBatch bounds the messages of one rehome step: one read, one
// EnqueueBatch transaction, one delete chunk.
const rehomeBatch = 25

// Rehome moves the stranded messages of bucket (at or beyond the bucket
// count) into the buckets the store's count gives them, in their order,
// with w, a writer of the same table, key prefix and count. Each step reads
// up to 25 of them (one strongly consistent Query), enqueues them with their
// ids, topics, keys, values, headers, partitions and creation times in one
// transaction (w.EnqueueBatch: a reservation per bucket and the puts),
// then deletes them (one BatchWriteItem). A step cut short between the
// enqueue and the delete leaves them in both places; running Rehome again
// enqueues them again under the same ids, which consumers deduplicate:
// nothing is lost. No relay of the table reads a bucket beyond the count,
// so the move needs no lease; the caller leaves alone a bucket whose stale
// lease a relay with a larger count holds (RemoveStaleLeases says which).
// It returns how many messages moved; an unreadable row stops it there.
func (s *Store) Rehome(ctx context.Context, bucket int, w *Writer) (int, error) {
	const op = "rehome stranded messages"
	if bucket < s.opts.BucketCount || bucket > maxInt32 {
		return 0, outbox.Misconfigured(op, "bucket %d is not beyond the bucket count %d", bucket, s.opts.BucketCount)
	}
	if w.opts.TableName != s.opts.TableName || w.opts.KeyPrefix != s.opts.KeyPrefix || w.opts.BucketCount != s.opts.BucketCount {
		return 0, outbox.Misconfigured(op, "the writer writes %s/%s/%d, not this store's %s/%s/%d",
			w.opts.TableName, w.opts.KeyPrefix, w.opts.BucketCount, s.opts.TableName, s.opts.KeyPrefix, s.opts.BucketCount)
	}
	moved := 0
	for {
		out, err := s.client.Query(ctx, &dynamodb.QueryInput{
			TableName:                 aws.String(s.opts.TableName),
			KeyConditionExpression:    aws.String(exprPartitionIs),
			ExpressionAttributeNames:  names("#pk", s.opts.PartitionKey),
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(s.keys.messagePartition(bucket))},
			ConsistentRead:            aws.Bool(true),
			Limit:                     aws.Int32(rehomeBatch),
		})
		if err != nil {
			s.tel.failed("", OpStranded, bucket, err)
			return moved, fmt.Errorf("outboxddb: %s of bucket %d: %w", op, bucket, err)
		}
		if len(out.Items) == 0 {
			return moved, nil
		}
		msgs := make([]outbox.Message, 0, len(out.Items))
		for _, item := range out.Items {
			m, err := s.keys.decodeMessage(item, bucket)
			if err != nil {
				return moved, fmt.Errorf("outboxddb: %s of bucket %d: %w", op, bucket, err)
			}
			msgs = append(msgs, m)
		}
		if err := s.moveMessages(ctx, bucket, msgs, w); err != nil {
			return moved, err
		}
		moved += len(msgs)
	}
}

// moveMessages enqueues msgs anew with w and then deletes them from
// bucket; a transaction over DynamoDB's 4 MB limit is split in halves.
func (s *Store) moveMessages(ctx context.Context, bucket int, msgs []outbox.Message, w *Writer) error {
	fresh := make([]outbox.Message, len(msgs))
	for i, m := range msgs {
		fresh[i] = outbox.Message{ID: m.ID, Topic: m.Topic, Key: m.Key, Value: m.Value, Headers: m.Headers, Partition: m.Partition, CreatedAt: m.CreatedAt}
	}
	_, err := w.EnqueueBatch(ctx, fresh)
	var tooLarge *ItemTooLargeError
	if errors.As(err, &tooLarge) && tooLarge.MessageID.IsZero() && len(msgs) > 1 {
		half := len(msgs) / 2
		if err := s.moveMessages(ctx, bucket, msgs[:half], w); err != nil {
			return err
		}
		return s.moveMessages(ctx, bucket, msgs[half:], w)
	}
	if err != nil {
		return fmt.Errorf("outboxddb: rehome the messages of bucket %d (first %s): %w", bucket, msgs[0].ID, err)
	}
	return s.MarkPublished(ctx, bucket, msgs)
}

// exprRestampable: the message is still there, with the stamp read.
const exprRestampable = "#id = :id AND #count = :old"

// Restamp rewrites, in bucket (within the bucket count), the stamp of every
// message written with another bucket count to the store's count, so relays
// publish them where they are instead of stopping at them (StampError).
// It reads the whole bucket with one strongly consistent Query (pages
// followed) that filters the stamped messages, and sends one conditional
// UpdateItem each (the message is still there with that stamp: a message a
// relay deleted meanwhile is skipped). Only the stamp changes: the sequence
// number, so the bucket's order, stays. misplaced counts the restamped
// messages whose key the store's count puts in another bucket (a writer's
// count that is not a multiple of the table's): their key's messages are
// already split between two buckets, and publishing them from here is the
// only way they leave.
func (s *Store) Restamp(ctx context.Context, bucket int) (restamped, misplaced int, err error) {
	const op = "restamp messages"
	if bucket < 0 || bucket >= s.opts.BucketCount {
		return 0, 0, outbox.Misconfigured(op, "bucket %d is outside [0, %d)", bucket, s.opts.BucketCount)
	}
	n := num(int64(s.opts.BucketCount))
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.opts.TableName),
		KeyConditionExpression:    aws.String(exprPartitionIs),
		FilterExpression:          aws.String("attribute_exists(#count) AND #count <> :n"),
		ExpressionAttributeNames:  names("#pk", s.opts.PartitionKey, "#count", attrBucketCount),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(s.keys.messagePartition(bucket)), ":n": n},
		ConsistentRead:            aws.Bool(true),
	}
	items, err := s.queryAll(ctx, OpStranded, in)
	if err != nil {
		return 0, 0, fmt.Errorf("outboxddb: %s of bucket %d: %w", op, bucket, err)
	}
	for _, item := range items {
		old, ok := item[attrBucketCount].(*types.AttributeValueMemberN)
		m, decodeErr := s.keys.decodeMessage(item, bucket)
		if !ok || decodeErr != nil {
			return restamped, misplaced, fmt.Errorf("outboxddb: %s of bucket %d: %w", op, bucket, decodeErr)
		}
		_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(s.opts.TableName),
			Key:                       s.keys.messageKey(bucket, m.Sequence()),
			UpdateExpression:          aws.String("SET #count = :n"),
			ConditionExpression:       aws.String(exprRestampable),
			ExpressionAttributeNames:  names("#id", attrMessageID, "#count", attrBucketCount),
			ExpressionAttributeValues: map[string]types.AttributeValue{":id": item[attrMessageID], ":old": old, ":n": n},
		})
		switch {
		case isConditionFailed(err):
			continue
		case err != nil:
			return restamped, misplaced, fmt.Errorf("outboxddb: %s: sequence number %d of bucket %d: %w", op, m.Sequence(), bucket, err)
		}
		restamped++
		if b, err := outbox.ComputeBucket(m.Key, m.ID, s.opts.BucketCount, m.Partition); err == nil && b != bucket {
			misplaced++
		}
	}
	return restamped, misplaced, nil
}

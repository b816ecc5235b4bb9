package outboxddb

import (
	"context"
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

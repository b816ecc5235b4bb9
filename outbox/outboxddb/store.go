package outboxddb

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// Store is the DynamoDB implementation of outbox.Store: leases and
// heartbeats in one coordination partition, messages in one partition per
// bucket, deletes in BatchWriteItem chunks, backlog samples by bounded
// counts.
//
// A Store reads its Clock once per call and uses that instant for every
// request of the call. The lease protocol is the core's (lease.AcquireRound):
// the store only sends its requests. It keeps one value in memory per
// instance: the latest heartbeat timestamp it sent (so a stopped stamp is
// later than every heartbeat). A Store is safe for concurrent use; one
// relay uses one Store.
type Store struct {
	client Client
	opts   StoreOptions
	keys   keys
	tel    telemetry
	log    *slog.Logger

	mu                sync.Mutex
	lastHeartbeatSent int64 // ticks

	// predecessorDrained: CheckServable saw the generation this one
	// replaces drained, which is permanent.
	predecessorDrained atomic.Bool
}

var _ outbox.Store = (*Store)(nil)

// NewStore returns a store for the outbox described by opts.
func NewStore(client Client, opts StoreOptions) (*Store, error) {
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	if client == nil {
		return nil, outbox.Misconfigured("new store", "DynamoDB client is nil")
	}
	return &Store{
		client: explain(client),
		opts:   opts,
		keys:   newKeys(opts.Options),
		tel:    newTelemetry(opts.Hooks),
		log:    opts.Logger,
	}, nil
}

// Options returns the store's options with defaults applied.
func (s *Store) Options() StoreOptions { return s.opts }

// now reads the clock once, in ticks.
func (s *Store) now() int64 { return lease.Ticks(s.opts.Clock.Now()) }

// queryAll runs in and follows LastEvaluatedKey until the result is
// complete, collecting every item. The pages are read one after another.
func (s *Store) queryAll(ctx context.Context, op string, in *dynamodb.QueryInput) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	for {
		out, err := s.client.Query(ctx, in)
		if err != nil {
			s.tel.failed("", op, noBucket, err)
			return nil, err
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// readCoordinationItems reads the coordination partition with one
// strongly consistent query (all pages), optionally only the sort keys
// starting with prefix.
func (s *Store) readCoordinationItems(ctx context.Context, prefix string) ([]map[string]types.AttributeValue, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.opts.TableName),
		KeyConditionExpression:    aws.String(exprPartitionIs),
		ExpressionAttributeNames:  names("#pk", s.opts.PartitionKey),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(s.keys.coordinationPartition())},
		ConsistentRead:            aws.Bool(true),
	}
	if prefix != "" {
		in.KeyConditionExpression = aws.String(exprPartitionAndPrefix)
		in.ExpressionAttributeNames["#sk"] = s.opts.SortKey
		in.ExpressionAttributeValues[":prefix"] = str(prefix)
	}
	items, err := s.queryAll(ctx, OpCoordination, in)
	if err != nil {
		return nil, fmt.Errorf("outboxddb: read coordination partition %q: %w", s.keys.coordinationPartition(), err)
	}
	return items, nil
}

// ReadCoordination returns one consistent view of the leases (buckets below
// the bucket count) and the heartbeats, without writing anything. A relay
// woken for some buckets uses it to decide whether a live peer holds them.
// A layout record with another bucket count is a *LayoutError.
func (s *Store) ReadCoordination(ctx context.Context) (lease.Coordination, error) {
	now := s.opts.Clock.Now()
	view, err := s.coordination(ctx)
	view.ReadAt = now
	return view, err
}

// coordination reads the coordination partition into a view without
// reading the clock (ReadAt stays zero). The read carries the layout
// record: a bucket count other than the recorded one is a *LayoutError,
// so a relay with another count stops at its round's read, before any
// lease write.
func (s *Store) coordination(ctx context.Context) (lease.Coordination, error) {
	items, err := s.readCoordinationItems(ctx, "")
	if err != nil {
		return lease.Coordination{}, err
	}
	if err := s.keys.layoutIn(items, s.opts.TableName, "relay", s.opts.BucketCount); err != nil {
		return lease.Coordination{}, err
	}
	return s.coordinationView(items), nil
}

// coordinationView decodes coordination items into a view without ReadAt.
func (s *Store) coordinationView(items []map[string]types.AttributeValue) lease.Coordination {
	leases, relays := s.keys.coordinationItems(items)
	var view lease.Coordination
	for _, l := range leases {
		if l.bucket >= s.opts.BucketCount {
			continue
		}
		view.Leases = append(view.Leases, lease.State{Bucket: l.bucket, Owner: l.owner, ExpiresAt: timeOf(l.expires)})
	}
	for _, r := range relays {
		view.Relays = append(view.Relays, r.state())
	}
	// The query returns sort-key order: LEASE# before RELAY#, buckets
	// zero-padded, relay ids as DynamoDB orders bytes. Sort anyway: the
	// view's order is part of its contract, not the server's.
	slices.SortFunc(view.Leases, func(a, b lease.State) int { return cmp.Compare(a.Bucket, b.Bucket) })
	slices.SortFunc(view.Relays, func(a, b lease.RelayState) int { return strings.Compare(a.RelayID, b.RelayID) })
	return view
}

// timeOf converts stored ticks to a time; 0 (never set) stays the zero time.
func timeOf(ticks int64) time.Time {
	if ticks == 0 {
		return time.Time{}
	}
	return lease.TimeFromTicks(ticks)
}

// leaseOutcome is the result of one conditional lease write.
type leaseOutcome int8

const (
	outcomeAccepted leaseOutcome = iota + 1
	outcomeRefused
)

// updateLeases sends one conditional UpdateItem per write, up to
// MaxConcurrency at once, and splits the buckets into accepted and refused.
// A refusal is reported to the observer; any other error fails the call.
func (s *Store) updateLeases(ctx context.Context, relayID string, op lease.Op, writes []lease.Write) (accepted, refused []int, err error) {
	outcomes := make([]leaseOutcome, len(writes))
	err = forEach(ctx, s.opts.MaxConcurrency, len(writes), func(ctx context.Context, i int) error {
		w := writes[i]
		in, err := s.leaseUpdate(relayID, op, w)
		if err != nil {
			return err
		}
		_, err = s.client.UpdateItem(ctx, in)
		switch {
		case err == nil:
			outcomes[i] = outcomeAccepted
		case isConditionFailed(err):
			outcomes[i] = outcomeRefused
			s.tel.refused(relayID, string(op), w.Bucket)
		default:
			s.tel.failed(relayID, string(op), w.Bucket, err)
			return fmt.Errorf("outboxddb: %s lease of bucket %d for relay %q: %w", op, w.Bucket, relayID, err)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	for i, o := range outcomes {
		switch o {
		case outcomeAccepted:
			accepted = append(accepted, writes[i].Bucket)
		case outcomeRefused:
			refused = append(refused, writes[i].Bucket)
		}
	}
	return accepted, refused, nil
}

// leaseUpdate builds the request of one lease write, as the table contract
// spells it for op.
func (s *Store) leaseUpdate(relayID string, op lease.Op, w lease.Write) (*dynamodb.UpdateItemInput, error) {
	me := str(relayID)
	var update, condition string
	var values map[string]types.AttributeValue
	switch op {
	case lease.OpKeep:
		update, condition = exprSetExpiry, exprKeepCondition
		values = map[string]types.AttributeValue{":me": me, ":seen": num(lease.Ticks(w.Seen)), ":expiry": num(lease.Ticks(w.Expiry))}
	case lease.OpRelease:
		update, condition = exprRelease, exprReleaseCondition
		values = map[string]types.AttributeValue{":me": me, ":seen": num(lease.Ticks(w.Seen)), ":now": num(lease.Ticks(w.Now))}
	case lease.OpClaim:
		update, condition = exprClaim, exprClaimCondition
		values = map[string]types.AttributeValue{":me": me, ":now": num(lease.Ticks(w.Now)), ":expiry": num(lease.Ticks(w.Expiry))}
	case lease.OpRenew:
		update, condition = exprSetExpiry, exprRenewCondition
		values = map[string]types.AttributeValue{":me": me, ":now": num(lease.Ticks(w.Now)), ":expiry": num(lease.Ticks(w.Expiry))}
	default:
		return nil, outbox.Misconfigured("lease write", "unknown lease operation %q", op)
	}
	return &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.opts.TableName),
		Key:                       s.keys.leaseKey(w.Bucket),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(condition),
		ExpressionAttributeNames:  names("#owner", attrOwner, "#expires", attrExpiresAt),
		ExpressionAttributeValues: values,
	}, nil
}

// heartbeat writes the relay's LastSeenUtc = now, with the keep-ahead mark
// when keepsAhead, conditional on moving it forward, so a request the relay
// gave up on cannot put an older round back. It reports false when
// DynamoDB refused it.
func (s *Store) heartbeat(ctx context.Context, relayID string, now int64, keepsAhead bool) (bool, error) {
	s.mu.Lock()
	s.lastHeartbeatSent = max(s.lastHeartbeatSent, now)
	s.mu.Unlock()
	item := s.keys.relayKey(relayID)
	item[attrLastSeen] = num(now)
	if keepsAhead {
		item[attrKeepsAhead] = &types.AttributeValueMemberBOOL{Value: true}
	}
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.opts.TableName),
		Item:                      item,
		ConditionExpression:       aws.String(exprHeartbeatCondition),
		ExpressionAttributeNames:  names("#lastSeen", attrLastSeen),
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(now)},
	})
	switch {
	case err == nil:
		return true, nil
	case isConditionFailed(err):
		s.tel.refused(relayID, OpHeartbeat, noBucket)
		return false, nil
	default:
		s.tel.failed(relayID, OpHeartbeat, noBucket, err)
		return false, fmt.Errorf("outboxddb: heartbeat of relay %q: %w", relayID, err)
	}
}

// leaseItemsPerReadUnit is about how many lease items one read unit of a
// strongly consistent Query returns (4 KB over items of about 110 bytes):
// it prices the whole coordination read against a coverage read.
const leaseItemsPerReadUnit = 32

// maxCoverageBuckets bounds the buckets of a coverage read: its queries
// run one after the other, and a wake-up names one bucket.
const maxCoverageBuckets = 4

// ReadCoverage implements outbox.CoverageReader. The partial view costs one
// strongly consistent Query per bucket for its lease item (the sort key
// LEASE#{bucket, 10 digits} as the prefix, which no other bucket's key
// extends), then one of the heartbeats (sort keys starting with RELAY#, as
// Heartbeats reads them): at least one read unit each. For more than
// maxCoverageBuckets buckets, or when those queries would cost about as
// much as the whole partition (one lease item per bucket: a table of fewer
// than about 100 buckets), it reads the whole partition instead
// (ReadCoordination) and reports the view whole.
func (s *Store) ReadCoverage(ctx context.Context, buckets []int) (lease.Coordination, bool, error) {
	if len(buckets) > maxCoverageBuckets || len(buckets)+1 >= s.opts.BucketCount/leaseItemsPerReadUnit {
		view, err := s.ReadCoordination(ctx)
		return view, false, err
	}
	now := s.opts.Clock.Now()
	var items []map[string]types.AttributeValue
	for _, prefix := range append(coverageLeaseKeys(buckets, s.opts.BucketCount), relayPrefix) {
		found, err := s.readCoordinationItems(ctx, prefix)
		if err != nil {
			return lease.Coordination{}, true, err
		}
		items = append(items, found...)
	}
	view := s.coordinationView(items)
	view.ReadAt = now
	return view, true, nil
}

// ReadLeases implements outbox.LeaseReader: one strongly consistent Query
// per bucket for its lease item (its sort key as the prefix, as
// ReadCoverage reads it), at least one read unit each; for more than
// maxCoverageBuckets buckets, or when that would cost about as much, one
// Query of every lease item (sort keys starting with LEASE#).
func (s *Store) ReadLeases(ctx context.Context, buckets []int) ([]lease.State, error) {
	prefixes := coverageLeaseKeys(buckets, s.opts.BucketCount)
	if len(prefixes) > maxCoverageBuckets || len(prefixes) >= s.opts.BucketCount/leaseItemsPerReadUnit {
		prefixes = []string{leasePrefix}
	}
	var items []map[string]types.AttributeValue
	for _, prefix := range prefixes {
		found, err := s.readCoordinationItems(ctx, prefix)
		if err != nil {
			return nil, err
		}
		items = append(items, found...)
	}
	var out []lease.State
	for _, l := range s.coordinationView(items).Leases {
		if slices.Contains(buckets, l.Bucket) {
			out = append(out, l)
		}
	}
	return out, nil
}

// coverageLeaseKeys returns the lease sort keys of the distinct buckets of
// bs within [0, bucketCount).
func coverageLeaseKeys(bs []int, bucketCount int) []string {
	var keys []string
	for _, b := range bs {
		if k := leaseSortKey(b); b >= 0 && b < bucketCount && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

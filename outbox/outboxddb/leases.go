package outboxddb

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// maxReleasePasses bounds the read-and-release passes of a graceful stop.
const maxReleasePasses = 3

// The lease primitives (lease.IO): the relay runs the protocol over them
// (lease.AcquireRound, lease.Renew) and the store sends each request as
// the table contract spells it, deciding nothing.

var _ lease.IO = (*Store)(nil)

// BucketCount is the store's bucket count (Options.BucketCount).
func (s *Store) BucketCount() int { return s.opts.BucketCount }

// Heartbeat is the conditional heartbeat PutItem: relayID's LastSeenUtc
// = now, with the keep-ahead mark when keepsAhead, only if it moves the
// stored one forward; false when DynamoDB refused it.
func (s *Store) Heartbeat(ctx context.Context, relayID string, now time.Time, keepsAhead bool) (bool, error) {
	return s.heartbeat(ctx, relayID, lease.Ticks(now), keepsAhead)
}

// Snapshot is the strongly consistent read of the coordination partition
// (every page): the leases below the bucket count and every heartbeat.
func (s *Store) Snapshot(ctx context.Context) (lease.Coordination, error) {
	return s.coordination(ctx)
}

// WriteLeases sends one conditional UpdateItem per write, up to
// MaxConcurrency at once, with the condition of op.
func (s *Store) WriteLeases(ctx context.Context, relayID string, op lease.Op, writes []lease.Write) (accepted, refused []int, err error) {
	return s.updateLeases(ctx, relayID, op, writes)
}

// Prune deletes stale heartbeat records and returns how many deletes were
// refused (the relay came back). The attribute_not_exists branch lets
// several relays prune the same record without a refusal. Other errors are
// logged, not returned: pruning is housekeeping and must not cost a relay
// its round.
func (s *Store) Prune(ctx context.Context, relayID string, p lease.PruneWrite) int {
	refused := make([]bool, len(p.Relays))
	_ = forEach(ctx, s.opts.MaxConcurrency, len(p.Relays), func(ctx context.Context, i int) error {
		_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName:                aws.String(s.opts.TableName),
			Key:                      s.keys.relayKey(p.Relays[i]),
			ConditionExpression:      aws.String(exprPruneCondition),
			ExpressionAttributeNames: names("#pk", s.opts.PartitionKey, "#lastSeen", attrLastSeen, "#stopped", attrStoppedAt),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":dead":    num(lease.Ticks(p.DeadBefore)),
				":stopped": num(lease.Ticks(p.StoppedBefore)),
			},
		})
		switch {
		case err == nil:
		case isConditionFailed(err):
			refused[i] = true
			s.tel.refused(relayID, OpPrune, noBucket)
		default:
			s.tel.failed(relayID, OpPrune, noBucket, err)
			s.log.WarnContext(ctx, "outboxddb: pruning a stale heartbeat record failed; retried on a later round",
				"relayId", relayID, "staleRelayId", p.Relays[i], "error", err)
		}
		return nil
	})
	count := 0
	for _, r := range refused {
		if r {
			count++
		}
	}
	return count
}

// ReleaseLeases is the graceful stop. It first stamps the relay's heartbeat
// record stopped (later than every heartbeat this store sent), so peers stop
// counting it even if the release is cut short, and then frees every lease
// naming the relay, guarded by owner and the expiry it read, whatever the
// bucket count. Because a claim of the round the stop cancelled may still
// land, it reads the leases again, up to three passes; leases still named
// after the last pass lapse after the lease duration.
func (s *Store) ReleaseLeases(ctx context.Context, relayID string) (lease.Release, error) {
	if err := outbox.ValidateRelayID(relayID); err != nil {
		return lease.Release{}, err
	}
	var rel lease.Release
	for pass := range maxReleasePasses {
		now := s.now()
		if pass == 0 {
			if err := s.stampStopped(ctx, relayID, now); err != nil {
				return rel, err
			}
		}
		items, err := s.readCoordinationItems(ctx, leasePrefix)
		if err != nil {
			return rel, err
		}
		leases, _ := s.keys.coordinationItems(items)
		var mine []lease.Write
		for _, l := range leases {
			if l.owner == relayID {
				mine = append(mine, lease.Write{Bucket: l.bucket, Seen: timeOf(l.expires), Now: lease.TimeFromTicks(now)})
			}
		}
		if pass > 0 && len(mine) == 0 {
			return rel, nil
		}
		released, refused, err := s.updateLeases(ctx, relayID, lease.OpRelease, mine)
		if err != nil {
			return rel, err
		}
		rel.Released = append(rel.Released, released...)
		slices.Sort(rel.Released)
		rel.Released = slices.Compact(rel.Released)
		rel.Refused += len(refused)
	}
	rel.Unfinished = true
	s.log.WarnContext(ctx, "outboxddb: release unfinished: leases still name the relay; peers take over after the lease duration", "relayId", relayID)
	return rel, nil
}

// stampStopped replaces the relay's heartbeat record with a stopped one,
// unconditionally, at max(now, latest heartbeat sent + 1 tick): a heartbeat
// this process already sent, still in flight, is refused by it instead of
// reviving the record.
func (s *Store) stampStopped(ctx context.Context, relayID string, now int64) error {
	s.mu.Lock()
	stamp := max(now, s.lastHeartbeatSent+1)
	s.mu.Unlock()
	item := s.keys.relayKey(relayID)
	item[attrLastSeen] = num(stamp)
	item[attrStoppedAt] = num(stamp)
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.opts.TableName), Item: item})
	if err != nil {
		s.tel.failed(relayID, OpStoppedRecord, noBucket, err)
		return fmt.Errorf("outboxddb: stamp relay %q stopped: %w", relayID, err)
	}
	return nil
}

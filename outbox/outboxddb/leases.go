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

// AcquireLeases runs one acquisition round for req.RelayID: the core's
// protocol (lease.AcquireRound) over this store's primitives, with one
// reading of the store's clock as the round's now. The store decides
// nothing itself: resting, the keep guard, claims after a refused heartbeat
// and the prune cadence are the protocol's, and st carries what it needs
// from the relay's earlier rounds.
//
// A bucket count that differs from the store's is a misconfiguration. A
// write error other than a refusal fails the round: the relay should then
// treat its ownership as unknown.
func (s *Store) AcquireLeases(ctx context.Context, req lease.Request, st lease.RoundState) (lease.Acquisition, error) {
	const op = "acquire leases"
	if req.BucketCount != s.opts.BucketCount {
		return lease.Acquisition{}, outbox.Misconfigured(op,
			"the relay's bucket count %d differs from the store's %d; writers, store and relays must use one count", req.BucketCount, s.opts.BucketCount)
	}
	if err := checkLeaseRequest(op, req); err != nil {
		return lease.Acquisition{}, err
	}
	return lease.AcquireRound(ctx, leaseIO{s}, s.log, s.opts.Clock.Now(), req, st)
}

// leaseIO gives the lease round the store's primitives.
type leaseIO struct{ s *Store }

var _ lease.IO = leaseIO{}

// Heartbeat is the conditional heartbeat PutItem.
func (io leaseIO) Heartbeat(ctx context.Context, relayID string, now time.Time, keepsAhead bool) (bool, error) {
	return io.s.heartbeat(ctx, relayID, lease.Ticks(now), keepsAhead)
}

// Snapshot is the strongly consistent coordination read.
func (io leaseIO) Snapshot(ctx context.Context) (lease.Coordination, error) {
	return io.s.coordination(ctx)
}

// WriteLeases sends one conditional UpdateItem per write.
func (io leaseIO) WriteLeases(ctx context.Context, relayID string, op lease.Op, writes []lease.Write) (accepted, refused []int, err error) {
	return io.s.updateLeases(ctx, relayID, op, writes)
}

// Prune deletes stale heartbeat records and returns how many deletes were
// refused (the relay came back). The attribute_not_exists branch lets
// several relays prune the same record without a refusal. Other errors are
// logged, not returned: pruning is housekeeping and must not cost a relay
// its round.
func (io leaseIO) Prune(ctx context.Context, relayID string, p lease.PruneWrite) int {
	s := io.s
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

// RenewLeases extends the relay's leases on buckets during a slow publish:
// each only while it still names the relay and has not expired (a renewal
// never revives a lapsed lease, even one nobody took), and never backwards.
// It reports false when any renewal was refused, or a bucket is outside
// [0, BucketCount) (then without a request). When every renewal succeeded it
// also refreshes the heartbeat; a refused heartbeat is ignored. An empty list
// reports true without a request.
func (s *Store) RenewLeases(ctx context.Context, req lease.Request, buckets []int) (bool, error) {
	if len(buckets) == 0 {
		return true, nil
	}
	if err := checkLeaseRequest("renew leases", req); err != nil {
		return false, err
	}
	for _, b := range buckets {
		if b < 0 || b >= s.opts.BucketCount {
			return false, nil
		}
	}
	now := s.now()
	at, expiry := lease.TimeFromTicks(now), lease.TimeFromTicks(now+durationTicks(req.LeaseDuration))
	writes := make([]lease.Write, len(buckets))
	for i, b := range buckets {
		writes[i] = lease.Write{Bucket: b, Now: at, Expiry: expiry}
	}
	_, refused, err := s.updateLeases(ctx, req.RelayID, leaseRenew, writes)
	if err != nil {
		return false, err
	}
	if len(refused) > 0 {
		// A relay that lost a bucket must not look alive on the strength of
		// this renewal.
		return false, nil
	}
	if _, err := s.heartbeat(ctx, req.RelayID, now, req.KeepsAhead()); err != nil {
		return false, err
	}
	return true, nil
}

// ReleaseLeases is the graceful stop. It first stamps the relay's heartbeat
// record stopped (later than every heartbeat this store sent), so peers stop
// counting it even if the release is cut short, and then frees every lease
// naming the relay, guarded by owner and the expiry it read, whatever the
// bucket count. Because a claim of the round the stop cancelled may still
// land, it reads the leases again, up to three passes; leases still named
// after the last pass lapse after the lease duration.
func (s *Store) ReleaseLeases(ctx context.Context, req lease.Request) (lease.Release, error) {
	if err := outbox.ValidateRelayID(req.RelayID); err != nil {
		return lease.Release{}, err
	}
	relayID := req.RelayID
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

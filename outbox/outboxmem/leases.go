package outboxmem

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// leaseRenew is RenewLeases' write: like a keep, but guarded by the lease
// still lasting instead of by the expiry read, so a renewal never revives a
// lapsed lease.
const leaseRenew lease.Op = "renew"

// AcquireLeases implements outbox.Store: one round of the core's protocol
// (lease.AcquireRound) over this store's conditional writes, at one
// reading of the store's clock. A bucket count other than the store's is a
// misconfiguration.
func (s *Store) AcquireLeases(ctx context.Context, req lease.Request, st lease.RoundState) (lease.Acquisition, error) {
	const op = "acquire leases"
	s.count("acquire")
	if req.BucketCount != s.buckets {
		return lease.Acquisition{}, outbox.Misconfigured(op,
			"the relay's bucket count %d differs from the store's %d; writers, store and relays must use one count", req.BucketCount, s.buckets)
	}
	if err := checkLeaseRequest(op, req); err != nil {
		return lease.Acquisition{}, err
	}
	return lease.AcquireRound(ctx, leaseIO{s}, s.log, s.clock.Now(), req, st)
}

// RenewLeases implements outbox.Store: each lease only while it still
// names the relay and lasts, never backwards; false when any was refused or
// a bucket is outside the store. When all were renewed it refreshes the
// heartbeat.
func (s *Store) RenewLeases(_ context.Context, req lease.Request, buckets []int) (bool, error) {
	if len(buckets) == 0 {
		return true, nil
	}
	if err := checkLeaseRequest("renew leases", req); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["renew"]++
	now := s.now()
	expiry := now + int64(req.LeaseDuration/100) // ticks are 100 ns
	for _, b := range buckets {
		if b < 0 || b >= s.buckets {
			return false, nil
		}
	}
	renewed := true
	for _, b := range buckets {
		if !s.writeLease(req.RelayID, leaseRenew, lease.Write{Bucket: b, Now: timeOf(now), Expiry: timeOf(expiry)}) {
			renewed = false
		}
	}
	if renewed {
		s.heartbeat(req.RelayID, now, req.KeepsAhead())
	}
	return renewed, nil
}

// ReleaseLeases implements outbox.Store: it stamps the relay stopped,
// later than every heartbeat it sent, then frees every lease naming it.
// The store is atomic, so one pass frees them all.
func (s *Store) ReleaseLeases(_ context.Context, req lease.Request) (lease.Release, error) {
	if err := outbox.ValidateRelayID(req.RelayID); err != nil {
		return lease.Release{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["release"]++
	now := s.now()
	stamp := max(now, s.lastSent[req.RelayID]+1)
	s.relays[req.RelayID] = relay{lastSeen: stamp, stopped: true}
	var rel lease.Release
	for b := range s.buckets {
		if l, ok := s.leases[b]; ok && l.owner == req.RelayID {
			s.leases[b] = leaseItem{expires: now}
			rel.Released = append(rel.Released, b)
		}
	}
	return rel, nil
}

// ReadCoordination implements outbox.Store.
func (s *Store) ReadCoordination(context.Context) (lease.Coordination, error) {
	s.count("coordination")
	return leaseIO{s}.Snapshot(context.Background())
}

func (s *Store) count(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op]++
}

// heartbeat writes relayID's record at now unless a later one is stored.
// The caller holds s.mu.
func (s *Store) heartbeat(relayID string, now int64, keepsAhead bool) bool {
	s.lastSent[relayID] = max(s.lastSent[relayID], now)
	if r, ok := s.relays[relayID]; ok && r.lastSeen > now {
		return false
	}
	s.relays[relayID] = relay{lastSeen: now, keepsAhead: keepsAhead}
	return true
}

// writeLease applies one conditional lease write with the DynamoDB store's
// condition for op and reports whether it was accepted. The caller holds
// s.mu.
func (s *Store) writeLease(relayID string, op lease.Op, w lease.Write) bool {
	l, ok := s.leases[w.Bucket]
	now, seen, expiry := lease.Ticks(w.Now), lease.Ticks(w.Seen), lease.Ticks(w.Expiry)
	switch op {
	case lease.OpKeep:
		if !ok || l.owner != relayID || l.expires != seen || l.expires > expiry {
			return false
		}
		l.expires = expiry
	case leaseRenew:
		if !ok || l.owner != relayID || l.expires <= now || l.expires > expiry {
			return false
		}
		l.expires = expiry
	case lease.OpRelease:
		if !ok || l.owner != relayID || l.expires != seen {
			return false
		}
		l = leaseItem{expires: now}
	case lease.OpClaim:
		if ok && l.owner != "" && l.expires != 0 && l.expires > now {
			return false
		}
		l = leaseItem{owner: relayID, expires: expiry}
	default:
		return false
	}
	s.leases[w.Bucket] = l
	return true
}

func checkLeaseRequest(op string, req lease.Request) error {
	if err := outbox.ValidateRelayID(req.RelayID); err != nil {
		return err
	}
	if req.LeaseDuration <= 0 {
		return outbox.Misconfigured(op, "lease duration must be > 0, got %v", req.LeaseDuration)
	}
	return nil
}

// leaseIO gives the core's lease round the store's primitives.
type leaseIO struct{ s *Store }

var _ lease.IO = leaseIO{}

// Heartbeat implements lease.IO.
func (io leaseIO) Heartbeat(_ context.Context, relayID string, now time.Time, keepsAhead bool) (bool, error) {
	io.s.mu.Lock()
	defer io.s.mu.Unlock()
	return io.s.heartbeat(relayID, lease.Ticks(now), keepsAhead), nil
}

// Snapshot implements lease.IO: the leases below the bucket count,
// ascending, and every heartbeat record, ascending by id.
func (io leaseIO) Snapshot(ctx context.Context) (lease.Coordination, error) {
	s := io.s
	relays, _ := io.Heartbeats(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := lease.Coordination{ReadAt: s.clock.Now(), Relays: relays}
	for b := range s.buckets {
		if l, ok := s.leases[b]; ok {
			c.Leases = append(c.Leases, lease.State{Bucket: b, Owner: l.owner, ExpiresAt: timeOf(l.expires)})
		}
	}
	return c, nil
}

// Heartbeats implements lease.IO.
func (io leaseIO) Heartbeats(context.Context) ([]lease.RelayState, error) {
	s := io.s
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]lease.RelayState, 0, len(s.relays))
	for id, r := range s.relays {
		out = append(out, lease.RelayState{RelayID: id, LastSeen: timeOf(r.lastSeen), Stopped: r.stopped, KeepsAhead: r.keepsAhead})
	}
	slices.SortFunc(out, func(a, b lease.RelayState) int { return strings.Compare(a.RelayID, b.RelayID) })
	return out, nil
}

// WriteLeases implements lease.IO.
func (io leaseIO) WriteLeases(_ context.Context, relayID string, op lease.Op, writes []lease.Write) (accepted, refused []int, err error) {
	s := io.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range writes {
		if s.writeLease(relayID, op, w) {
			accepted = append(accepted, w.Bucket)
		} else {
			refused = append(refused, w.Bucket)
		}
	}
	return accepted, refused, nil
}

// Prune implements lease.IO: a record goes when it is missing
// already, older than DeadBefore, or stopped and older than StoppedBefore.
func (io leaseIO) Prune(_ context.Context, _ string, p lease.PruneWrite) (refused int) {
	s := io.s
	s.mu.Lock()
	defer s.mu.Unlock()
	dead, stopped := lease.Ticks(p.DeadBefore), lease.Ticks(p.StoppedBefore)
	for _, id := range p.Relays {
		r, ok := s.relays[id]
		if ok && r.lastSeen >= dead && (!r.stopped || r.lastSeen >= stopped) {
			refused++
			continue
		}
		delete(s.relays, id)
	}
	return refused
}

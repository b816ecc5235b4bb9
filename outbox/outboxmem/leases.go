package outboxmem

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// The lease primitives (lease.IO) apply each write with the DynamoDB
// store's condition for its operation, atomically under the store's lock;
// the relay runs the protocol over them. Each counts one call under its
// name ("heartbeat", "snapshot", "heartbeats", "prune", and "write " and the
// operation for WriteLeases).

// Heartbeat implements lease.IO: relayID's record at now unless a later
// one is stored.
func (s *Store) Heartbeat(_ context.Context, relayID string, now time.Time, keepsAhead bool) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["heartbeat"]++
	return s.heartbeat(relayID, lease.Ticks(now), keepsAhead), nil
}

// Snapshot implements lease.IO: the leases below the bucket count,
// ascending, and every heartbeat record, ascending by id.
func (s *Store) Snapshot(context.Context) (lease.Coordination, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["snapshot"]++
	return s.coordination(), nil
}

// Heartbeats implements lease.IO.
func (s *Store) Heartbeats(context.Context) ([]lease.RelayState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["heartbeats"]++
	return s.heartbeats(), nil
}

// WriteLeases implements lease.IO.
func (s *Store) WriteLeases(_ context.Context, relayID string, op lease.Op, writes []lease.Write) (accepted, refused []int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["write "+string(op)]++
	for _, w := range writes {
		if s.writeLease(relayID, op, w) {
			accepted = append(accepted, w.Bucket)
		} else {
			refused = append(refused, w.Bucket)
		}
	}
	return accepted, refused, nil
}

// Prune implements lease.IO: a record goes when it is missing already,
// older than DeadBefore, or stopped and older than StoppedBefore.
func (s *Store) Prune(_ context.Context, _ string, p lease.PruneWrite) (refused int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["prune"]++
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

// ReleaseLeases implements outbox.Store: it stamps the relay stopped,
// later than every heartbeat it sent, then frees every lease naming it.
// The store is atomic, so one pass frees them all.
func (s *Store) ReleaseLeases(_ context.Context, relayID string) (lease.Release, error) {
	if err := outbox.ValidateRelayID(relayID); err != nil {
		return lease.Release{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["release"]++
	now := s.now()
	stamp := max(now, s.lastSent[relayID]+1)
	s.relays[relayID] = relay{lastSeen: stamp, stopped: true}
	var rel lease.Release
	for b := range s.buckets {
		if l, ok := s.leases[b]; ok && l.owner == relayID {
			s.leases[b] = leaseItem{expires: now}
			rel.Released = append(rel.Released, b)
		}
	}
	return rel, nil
}

// ReadCoordination implements outbox.Store.
func (s *Store) ReadCoordination(context.Context) (lease.Coordination, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["coordination"]++
	return s.coordination(), nil
}

// coordination is the view of the leases below the bucket count,
// ascending, and every heartbeat record. The caller holds s.mu.
func (s *Store) coordination() lease.Coordination {
	c := lease.Coordination{ReadAt: s.clock.Now(), Relays: s.heartbeats()}
	for b := range s.buckets {
		if l, ok := s.leases[b]; ok {
			c.Leases = append(c.Leases, lease.State{Bucket: b, Owner: l.owner, ExpiresAt: timeOf(l.expires)})
		}
	}
	return c
}

// heartbeats is every heartbeat record, ascending by id. The caller holds
// s.mu.
func (s *Store) heartbeats() []lease.RelayState {
	out := make([]lease.RelayState, 0, len(s.relays))
	for id, r := range s.relays {
		out = append(out, lease.RelayState{RelayID: id, LastSeen: timeOf(r.lastSeen), Stopped: r.stopped, KeepsAhead: r.keepsAhead})
	}
	slices.SortFunc(out, func(a, b lease.RelayState) int { return strings.Compare(a.RelayID, b.RelayID) })
	return out
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
	case lease.OpRenew:
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

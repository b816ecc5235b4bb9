package outboxmem

import (
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// SetLease writes bucket's lease item unconditionally: owner until expires
// (an empty owner is a released lease, freed at expires). It is what a
// peer's round or an operator leaves in the table, for tests of how a
// relay meets them; relays themselves write leases only through the lease
// round's conditions. Times are kept at the table's tick resolution.
func (s *Store) SetLease(bucket int, owner string, expires time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leases[bucket] = leaseItem{owner: owner, expires: lease.Ticks(expires)}
}

// Lease returns bucket's lease item as stored (the zero State when the
// bucket was never leased), without counting a call.
func (s *Store) Lease(bucket int) lease.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.leases[bucket]
	return lease.State{Bucket: bucket, Owner: l.owner, ExpiresAt: timeOf(l.expires)}
}

// SetHeartbeat writes relayID's heartbeat record unconditionally, seen at
// lastSeen and stopped or not: a peer's heartbeat, for tests of how a relay
// reads its fleet.
func (s *Store) SetHeartbeat(relayID string, lastSeen time.Time, stopped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.relays[relayID] = relay{lastSeen: lease.Ticks(lastSeen), stopped: stopped}
}

// Reserve takes bucket's next sequence number and stores nothing under
// it, as a writer whose transaction failed after its reservation: the
// bucket's sequence then has a gap, which fetches read across. It returns
// the number taken.
func (s *Store) Reserve(bucket int) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next[bucket]++
	return s.next[bucket]
}

// Place stores m in bucket under the bucket's next sequence number,
// whatever bucket its key hashes to, as a writer with another bucket count
// or its own hash would leave it: for tests that need a key in a chosen
// bucket. A zero CreatedAt is the store's clock. It returns m as stored.
func (s *Store) Place(bucket int, m outbox.Message) outbox.Message {
	now := lease.TimeFromTicks(lease.Ticks(s.clock.Now()))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next[bucket]++
	m = outbox.Stored(m, bucket, s.next[bucket])
	if m.CreatedAt.IsZero() {
		m.CreatedAt = now
	}
	s.msgs[bucket] = append(s.msgs[bucket], m)
	return m
}

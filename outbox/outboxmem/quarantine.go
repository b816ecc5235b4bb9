package outboxmem

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

var _ outbox.Quarantine = (*Store)(nil)

// parkedRow is a message in its bucket's parked partition.
type parkedRow struct {
	msg    outbox.Message
	marked bool   // for replay, by MarkReplay
	topic  string // the replay's topic; empty: the message's own
}

// Park implements outbox.Quarantine: it moves the row to the bucket's
// parked partition. A row gone, already parked, or waiting behind a parked
// message that is gone or marked for replay is outbox.ErrParkConflict; when
// p.Lease names an owner and the bucket's lease no longer names it or
// expires at or before p.Lease.Beyond, the move is outbox.ErrLeaseLost.
func (s *Store) Park(_ context.Context, p outbox.Parking) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["park"]++
	i := slices.IndexFunc(s.msgs[p.Bucket], func(m outbox.Message) bool { return m.Sequence() == p.Sequence })
	if i < 0 || s.parked[p.Bucket][p.Sequence] != nil {
		return fmt.Errorf("outboxmem: park bucket %d row %d: the row is gone or parked: %w", p.Bucket, p.Sequence, outbox.ErrParkConflict)
	}
	if l := s.leases[p.Bucket]; p.Lease.Owner != "" && (l.owner != p.Lease.Owner || l.expires <= lease.Ticks(p.Lease.Beyond)) {
		return fmt.Errorf("outboxmem: park bucket %d row %d: the lease of %s ran out or passed to another relay: %w",
			p.Bucket, p.Sequence, p.Lease.Owner, outbox.ErrLeaseLost)
	}
	if p.Behind > 0 {
		if behind := s.parked[p.Bucket][p.Behind]; behind == nil || behind.marked {
			return fmt.Errorf("outboxmem: park bucket %d row %d behind %d: that one is gone or marked for replay: %w",
				p.Bucket, p.Sequence, p.Behind, outbox.ErrParkConflict)
		}
	}
	if s.parked[p.Bucket] == nil {
		s.parked[p.Bucket] = map[int64]*parkedRow{}
	}
	s.parked[p.Bucket][p.Sequence] = &parkedRow{msg: s.msgs[p.Bucket][i]}
	s.msgs[p.Bucket] = slices.Delete(s.msgs[p.Bucket], i, i+1)
	return nil
}

// ParkedKeys implements outbox.Quarantine.
func (s *Store) ParkedKeys(_ context.Context, bucket int) (outbox.ParkedSet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["parked"]++
	set := outbox.ParkedSet{Keys: map[string][]int64{}}
	for _, seq := range slices.Sorted(maps.Keys(s.parked[bucket])) {
		row := s.parked[bucket][seq]
		if row.msg.Key != nil {
			set.Keys[string(row.msg.Key)] = append(set.Keys[string(row.msg.Key)], seq)
		}
		if row.marked {
			m := row.msg
			if row.topic != "" {
				m.Topic = row.topic
			}
			set.Replays = append(set.Replays, m)
		}
	}
	return set, nil
}

// MarkReplay is the operator's replay request: it marks the bucket's
// parked messages seqs (those still parked) for replay, to topic when not
// empty, and then raises the bucket's replay request. It returns how many
// it marked.
func (s *Store) MarkReplay(_ context.Context, bucket int, seqs []int64, topic string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	marked := 0
	for _, seq := range seqs {
		if row := s.parked[bucket][seq]; row != nil {
			row.marked, row.topic = true, topic
			marked++
		}
	}
	s.lastRequest++
	s.requests[bucket] = s.lastRequest
	return marked, nil
}

// Parked returns the bucket's parked messages in sequence order.
func (s *Store) Parked(bucket int) []outbox.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []outbox.Message
	for _, seq := range slices.Sorted(maps.Keys(s.parked[bucket])) {
		out = append(out, s.parked[bucket][seq].msg)
	}
	return out
}

// ReplayRequests implements outbox.Quarantine.
func (s *Store) ReplayRequests(context.Context) (map[int]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["replay requests"]++
	return maps.Clone(s.requests), nil
}

// DeleteReplayed implements outbox.Quarantine.
func (s *Store) DeleteReplayed(_ context.Context, bucket int, msgs []outbox.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		delete(s.parked[bucket], m.Sequence())
	}
	return nil
}

// RefuseReplay implements outbox.Quarantine: the mark is cleared (the
// reason is not kept: nothing here lists parked messages with theirs).
func (s *Store) RefuseReplay(_ context.Context, bucket int, seq int64, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if row := s.parked[bucket][seq]; row != nil {
		row.marked = false
	}
	return nil
}

// ReplayDone implements outbox.Quarantine: the request is withdrawn if it
// is still the one read; outbox.ErrParkConflict when it changed (a newer
// request stays) or is gone.
func (s *Store) ReplayDone(_ context.Context, bucket int, request int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if current, ok := s.requests[bucket]; !ok || current != request {
		return fmt.Errorf("outboxmem: withdraw the replay request of bucket %d: %w", bucket, outbox.ErrParkConflict)
	}
	delete(s.requests, bucket)
	return nil
}

package outboxmem

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// Store is one in-memory outbox table. Several relays may share it, as
// they share a DynamoDB table; its methods are safe for concurrent use.
type Store struct {
	clock   outbox.Clock
	buckets int

	mu       sync.Mutex
	msgs     map[int][]outbox.Message // per bucket, ascending by sequence
	next     map[int]int64            // per bucket, the last sequence given
	leases   map[int]leaseItem
	relays   map[string]relay
	lastSent map[string]int64 // per relay, the latest heartbeat tick sent
	calls    map[string]int
	// parked holds each bucket's parked partition by sequence; requests
	// each bucket's replay request, numbered from lastRequest.
	parked      map[int]map[int64]*parkedRow
	requests    map[int]int64
	lastRequest int64
}

type leaseItem struct {
	owner   string // empty when released
	expires int64  // ticks; zero when never set
}

type relay struct {
	lastSeen   int64 // ticks
	stopped    bool
	keepsAhead bool
}

var _ outbox.Store = (*Store)(nil)

// Options configures New.
type Options struct {
	// BucketCount is the table's bucket count, shared with writers and
	// relays. Default outbox.DefaultBucketCount.
	BucketCount int
	// Clock is read once per call. Default outbox.SystemClock.
	Clock outbox.Clock
}

// New returns an empty store. A negative bucket count is a
// misconfiguration.
func New(opts Options) (*Store, error) {
	if opts.BucketCount < 0 {
		return nil, outbox.Misconfigured("new in-memory store", "bucket count must be >= 1, got %d", opts.BucketCount)
	}
	if opts.BucketCount == 0 {
		opts.BucketCount = outbox.DefaultBucketCount
	}
	if opts.Clock == nil {
		opts.Clock = outbox.SystemClock{}
	}
	return &Store{
		clock: opts.Clock, buckets: opts.BucketCount,
		msgs: map[int][]outbox.Message{}, next: map[int]int64{},
		leases: map[int]leaseItem{}, relays: map[string]relay{},
		lastSent: map[string]int64{}, calls: map[string]int{},
		parked: map[int]map[int64]*parkedRow{}, requests: map[int]int64{},
	}, nil
}

// BucketCount returns the store's bucket count.
func (s *Store) BucketCount() int { return s.buckets }

// Enqueue commits msgs as one transaction: each gets its bucket
// (outbox.ComputeBucket at the store's bucket count), the next sequence
// number of that bucket and, when zero, the store clock's now as
// CreatedAt. It returns them as stored. A message without a topic or with a
// negative partition matches outbox.ErrInvalidMessage and nothing is stored.
func (s *Store) Enqueue(_ context.Context, msgs ...outbox.Message) ([]outbox.Message, error) {
	buckets := make([]int, len(msgs))
	for i, m := range msgs {
		b, err := outbox.ComputeBucket(m.Key, m.ID, s.buckets, m.Partition)
		if err == nil && m.Topic == "" {
			err = fmt.Errorf("%w: topic is empty", outbox.ErrInvalidMessage)
		}
		if err != nil {
			return nil, fmt.Errorf("outboxmem: enqueue message %s for topic %q: %w", m.ID, m.Topic, err)
		}
		buckets[i] = b
	}
	now := lease.TimeFromTicks(lease.Ticks(s.clock.Now()))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["enqueue"]++
	stored := make([]outbox.Message, len(msgs))
	for i, m := range msgs {
		b := buckets[i]
		s.next[b]++
		m = outbox.Stored(m, b, s.next[b])
		if m.CreatedAt.IsZero() {
			m.CreatedAt = now
		}
		s.msgs[b] = append(s.msgs[b], m)
		stored[i] = m
	}
	return stored, nil
}

// Pending returns the messages of bucket not yet published, in order.
func (s *Store) Pending(bucket int) []outbox.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.msgs[bucket])
}

// Calls returns how many times each operation ran, refused calls
// included, by the names of the methods that count ("enqueue", "acquire",
// "renew", "release", "coordination", "pending", "fetch", "mark",
// "backlog", "park", "parked", "replay requests").
func (s *Store) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

// PendingBuckets implements outbox.Store.
func (s *Store) PendingBuckets(_ context.Context, buckets []int) ([]int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["pending"]++
	var out []int
	for _, b := range buckets {
		if len(s.msgs[b]) > 0 {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// FetchBatch implements outbox.Store: up to limit messages of bucket in
// sequence order. A commit is never half-visible here, so a batch ends
// only at the limit or at the bucket's end: never with outbox.ErrBatchCut.
func (s *Store) FetchBatch(_ context.Context, bucket, limit int) ([]outbox.Message, error) {
	if bucket < 0 || bucket >= s.buckets {
		return nil, outbox.Misconfigured("fetch", "bucket %d outside [0, %d)", bucket, s.buckets)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["fetch"]++
	ms := s.msgs[bucket]
	return slices.Clone(ms[:min(max(0, limit), len(ms))]), nil
}

// MarkPublished implements outbox.Store: it deletes msgs from bucket. A
// message already gone is no error (a retried delete).
func (s *Store) MarkPublished(_ context.Context, bucket int, msgs []outbox.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["mark"]++
	gone := make(map[int64]bool, len(msgs))
	for _, m := range msgs {
		if m.Bucket() != bucket {
			return fmt.Errorf("outboxmem: mark published in bucket %d: message %s is of bucket %d", bucket, m.ID, m.Bucket())
		}
		gone[m.Sequence()] = true
	}
	s.msgs[bucket] = slices.DeleteFunc(s.msgs[bucket], func(m outbox.Message) bool { return gone[m.Sequence()] })
	return nil
}

// Backlog implements outbox.Store: every pending message, uncapped, and
// the earliest CreatedAt among the bucket heads.
func (s *Store) Backlog(context.Context) (outbox.Backlog, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["backlog"]++
	var bl outbox.Backlog
	for _, ms := range s.msgs {
		bl.Pending += int64(len(ms))
		if len(ms) > 0 && (bl.Oldest.IsZero() || ms[0].CreatedAt.Before(bl.Oldest)) {
			bl.Oldest = ms[0].CreatedAt
		}
	}
	return bl, nil
}

// now is the store clock's reading in ticks, the table's resolution.
func (s *Store) now() int64 { return lease.Ticks(s.clock.Now()) }

func timeOf(ticks int64) time.Time {
	if ticks == 0 {
		return time.Time{}
	}
	return lease.TimeFromTicks(ticks)
}

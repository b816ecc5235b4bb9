package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/internal/sleep"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxmem"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// memStore is an outboxmem.Store (mem), whose lease round is the core's
// protocol, and the store a relay is given (observed): mem observed
// (outboxtest.ObservedStore) with the hooks engine tests script: faults,
// delays, and callbacks at the moments where a peer's or a commit's timing
// matters.
type memStore struct {
	mem      *outboxmem.Store
	observed outbox.Store
	clock    outbox.Clock
	buckets  int

	mu sync.Mutex // guards the records and the hooks set while a relay runs
	// failPending fails that many pending probes (throttled).
	failPending int
	refuseRenew bool
	// beforePending runs before a pending probe reaches the store: a
	// commit landing at the time of the probe.
	beforePending func()
	onRelease     func()
	// afterFetch runs after a fetch computed its answer: a commit landing
	// just after the look.
	afterFetch   func(bucket int)
	deletedOrder map[int][]int64
	// markDelay is how long a delete takes (a throttled BatchWriteItem
	// retried with backoff); onMark runs after that wait, before the rows
	// go: what peers do while the relay still deletes.
	markDelay time.Duration
	onMark    func()
	// unreadable marks rows (bucket, sequence) FetchBatch cannot decode.
	unreadable map[int]map[int64]bool
	// parkings records every applied park in order.
	parkings []outbox.Parking
	// parkDelay is how long a park takes before it reaches the table;
	// beforePark runs then (a park that SDK retries delay until after a
	// peer's claim), and afterParkedKeys runs after a read of a parked
	// partition computed its answer.
	parkDelay       time.Duration
	beforePark      func(outbox.Parking)
	afterParkedKeys func(bucket int)
	// renewErr fails every renewal (throttled requests); renewDelay is
	// how long a renewal takes to answer.
	renewErr   error
	renewDelay time.Duration
}

func newMemStore(clock outbox.Clock, buckets int) *memStore {
	mem, err := outboxmem.New(outboxmem.Options{BucketCount: buckets, Clock: clock})
	if err != nil {
		panic(err)
	}
	s := &memStore{mem: mem, clock: clock, buckets: buckets,
		deletedOrder: map[int][]int64{}, unreadable: map[int]map[int64]bool{}}
	s.observed = outboxtest.Observe(outboxtest.ObservedStore{
		Store:              mem,
		WriteLeasesFunc:    s.writeLeases,
		ReleaseLeasesFunc:  s.releaseLeases,
		PendingBucketsFunc: s.pendingBuckets,
		FetchBatchFunc:     s.fetchBatch,
		MarkPublishedFunc:  s.markPublished,
		ParkedKeysFunc:     s.parkedKeys,
		ParkFunc:           s.park,
	})
	return s
}

// count is how many times op reached the store (outboxmem's names).
func (s *memStore) count(op string) int { return s.mem.Calls()[op] }

// newMsg is the message add enqueues into bucket b of buckets: the one
// place the engine tests build a message.
func newMsg(key string) outbox.Message {
	return outbox.Message{ID: outbox.NewMessageID(), Topic: "t", Key: []byte(key), Value: []byte(key)}
}

// add stores a message with key k in bucket b.
func (s *memStore) add(b int, key string) outbox.Message { return s.put(b, newMsg(key)) }

// put stores m in bucket b, whatever its key hashes to, and returns it as
// stored.
func (s *memStore) put(b int, m outbox.Message) outbox.Message { return s.mem.Place(b, m) }

func (s *memStore) pending() int {
	n := 0
	for b := range s.buckets {
		n += len(s.mem.Pending(b))
	}
	return n
}

func (s *memStore) hold(b int, owner string, until time.Time) { s.mem.SetLease(b, owner, until) }

func (s *memStore) heartbeat(id string, stopped bool) { s.mem.SetHeartbeat(id, s.clock.Now(), stopped) }

func (s *memStore) leaseOwner(b int) string {
	if l := s.mem.Lease(b); !l.Expired(s.clock.Now()) {
		return l.Owner
	}
	return ""
}

// writeLeases scripts the renewals (lease.OpRenew): a delay, a failure, a
// refusal of every bucket.
func (s *memStore) writeLeases(ctx context.Context, relayID string, op lease.Op, writes []lease.Write, next func(context.Context, string, lease.Op, []lease.Write) ([]int, []int, error)) ([]int, []int, error) {
	if op != lease.OpRenew {
		return next(ctx, relayID, op, writes)
	}
	if s.renewDelay > 0 && !sleep.For(s.renewDelay, ctx.Done()) {
		return nil, nil, ctx.Err()
	}
	if s.renewErr != nil {
		return nil, nil, s.renewErr
	}
	if s.refuseRenew {
		refused := make([]int, len(writes))
		for i, w := range writes {
			refused[i] = w.Bucket
		}
		return nil, refused, nil
	}
	return next(ctx, relayID, op, writes)
}

func (s *memStore) releaseLeases(ctx context.Context, relayID string, next func(context.Context, string) (lease.Release, error)) (lease.Release, error) {
	if s.onRelease != nil {
		s.onRelease()
	}
	return next(ctx, relayID)
}

func (s *memStore) pendingBuckets(ctx context.Context, buckets []int, next func(context.Context, []int) ([]int, error)) ([]int, error) {
	if s.beforePending != nil {
		s.beforePending()
	}
	s.mu.Lock()
	fail := s.failPending > 0
	if fail {
		s.failPending--
	}
	s.mu.Unlock()
	if fail {
		return nil, errors.New("throttled")
	}
	return next(ctx, buckets)
}

// fetchBatch stops at the first unreadable row as a table store does: the
// rows before it and an UnreadableRowError.
func (s *memStore) fetchBatch(ctx context.Context, bucket, max int, next func(context.Context, int, int) ([]outbox.Message, error)) ([]outbox.Message, error) {
	ms, err := next(ctx, bucket, max)
	s.mu.Lock()
	hook := s.afterFetch
	for i, m := range ms {
		if s.unreadable[bucket][m.Sequence()] {
			s.mu.Unlock()
			return ms[:i], &outbox.UnreadableRowError{Bucket: bucket, Sequence: m.Sequence(), Key: m.Key, Err: errors.New("Topic is missing")}
		}
	}
	s.mu.Unlock()
	if hook != nil {
		hook(bucket)
	}
	return ms, err
}

// markPublished also refuses a delete that is not the bucket's head in
// order: the Store contract's prefix rule, which outboxmem does not check.
func (s *memStore) markPublished(ctx context.Context, bucket int, msgs []outbox.Message, next func(context.Context, int, []outbox.Message) error) error {
	s.mu.Lock()
	delay, hook := s.markDelay, s.onMark
	s.onMark = nil
	s.mu.Unlock()
	if delay > 0 && !sleep.For(delay, ctx.Done()) {
		return ctx.Err()
	}
	if hook != nil {
		hook()
	}
	ms := s.mem.Pending(bucket)
	for i, m := range msgs {
		if i >= len(ms) || ms[i].Sequence() != m.Sequence() {
			return fmt.Errorf("mark out of order: bucket %d index %d sequence %d", bucket, i, m.Sequence())
		}
	}
	if err := next(ctx, bucket, msgs); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.deletedOrder[bucket] = append(s.deletedOrder[bucket], m.Sequence())
	}
	return nil
}

func (s *memStore) parkedKeys(ctx context.Context, bucket int, next func(context.Context, int) (outbox.ParkedSet, error)) (outbox.ParkedSet, error) {
	set, err := next(ctx, bucket)
	if s.afterParkedKeys != nil {
		s.afterParkedKeys(bucket)
	}
	return set, err
}

func (s *memStore) park(ctx context.Context, p outbox.Parking, next func(context.Context, outbox.Parking) error) error {
	if s.parkDelay > 0 && !sleep.For(s.parkDelay, ctx.Done()) {
		return ctx.Err()
	}
	if s.beforePark != nil {
		s.beforePark(p)
	}
	if err := next(ctx, p); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.parkings = append(s.parkings, p)
	return nil
}

// replay marks every parked row of key for replay, in order, and raises the
// bucket's request: what `spillway parked replay` does.
func (s *memStore) replay(bucket int, key string) {
	var seqs []int64
	for _, m := range s.mem.Parked(bucket) {
		if string(m.Key) == key {
			seqs = append(seqs, m.Sequence())
		}
	}
	if _, err := s.mem.MarkReplay(context.Background(), bucket, seqs, ""); err != nil {
		panic(err)
	}
}

// marked counts bucket's parked rows marked for replay.
func (s *memStore) marked(bucket int) int {
	set, _ := s.mem.ParkedKeys(context.Background(), bucket)
	return len(set.Replays)
}

// requests is every bucket's replay request not yet carried out.
func (s *memStore) requests() map[int]int64 {
	r, _ := s.mem.ReplayRequests(context.Background())
	return r
}

// memPublisher records what it published and fails rows on request.
type memPublisher struct {
	mu        sync.Mutex
	published []outbox.Message
	// failures maps a message id to how many more publishes of it fail.
	failures map[outbox.MessageID]int
	initErr  error
	// trailingErr is returned with every message of a batch acknowledged,
	// as a custom Publisher whose flush fails after the acks may do.
	trailingErr error
	// poison maps a message id to the PoisonError every publish of it gets.
	poison map[outbox.MessageID]outbox.ParkReason
	// onInit runs when the relay initialises the publisher, before it
	// joins: what peers do meanwhile.
	onInit func()
	// delay is how long Kafka takes to answer: a timer the bubble's clock
	// reaches like any other.
	delay time.Duration
	// onPublish runs when a batch is handed over, before Kafka answers.
	onPublish func(msgs []outbox.Message)
}

func newMemPublisher() *memPublisher {
	return &memPublisher{failures: map[outbox.MessageID]int{}, poison: map[outbox.MessageID]outbox.ParkReason{}}
}

func (p *memPublisher) Init(context.Context) error {
	if p.onInit != nil {
		p.onInit()
	}
	return p.initErr
}

func (p *memPublisher) Publish(ctx context.Context, msgs []outbox.Message) (int, error) {
	if p.onPublish != nil {
		p.onPublish(msgs)
	}
	if p.delay > 0 && !sleep.For(p.delay, ctx.Done()) {
		// Cut before Kafka answered: nothing acknowledged.
		return 0, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, m := range msgs {
		if reason, ok := p.poison[m.ID]; ok {
			return i, fmt.Errorf("produce %s: %w", m.ID, &outbox.PoisonError{Reason: reason, Err: errors.New("UNKNOWN_TOPIC_OR_PARTITION")})
		}
		if n := p.failures[m.ID]; n > 0 {
			p.failures[m.ID] = n - 1
			return i, fmt.Errorf("produce %s: MESSAGE_TOO_LARGE", m.ID)
		}
		p.published = append(p.published, m)
	}
	return len(msgs), p.trailingErr
}

func (p *memPublisher) sent() []outbox.Message {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.published)
}

// notifications records wake-ups.
type notifications struct {
	mu    sync.Mutex
	wakes []outbox.WakeUp
}

func (n *notifications) Notify(_ context.Context, w outbox.WakeUp) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.wakes = append(n.wakes, w)
	return nil
}

func (n *notifications) all() []outbox.WakeUp {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.wakes)
}

// wantPublishedInOrder checks that pub published each key's messages once
// each, in the order of want (each key's commit order).
func wantPublishedInOrder(t *testing.T, pub *memPublisher, want map[string][]outbox.MessageID) {
	t.Helper()
	got := map[string][]outbox.MessageID{}
	for _, m := range pub.sent() {
		got[string(m.Key)] = append(got[string(m.Key)], m.ID)
	}
	for key, ids := range want {
		if !slices.Equal(got[key], ids) {
			t.Errorf("key %s: published %v, want %v (commit order, once each)", key, got[key], ids)
		}
	}
}

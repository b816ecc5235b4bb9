package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// memStore is an in-memory Store for engine tests. Its lease handling is
// deliberately simple (a relay claims every free bucket): the fair-share
// protocol is tested in outboxddb; here the engine's reactions matter.
type memStore struct {
	mu      sync.Mutex
	clock   outbox.Clock
	buckets int
	msgs    map[int][]outbox.Message
	seq     map[int]int64
	leases  map[int]lease.State
	relays  map[string]lease.RelayState
	calls   map[string]int

	// Scripted faults and hooks.
	failPending int
	failMark    int
	refuseRenew bool
	// unrenewed makes rounds leave leases that still last KeepAhead
	// unrenewed, as the table store does when the request carries the
	// round interval.
	unrenewed  bool
	acquireErr error
	// beforePending runs before a pending probe takes the lock: a commit
	// landing at the time of the probe.
	beforePending func()
	onRelease     func()
	// afterFetch runs after a fetch computed its answer (without the
	// lock): a commit landing just after the look.
	afterFetch    func(bucket int)
	deletedOrder  map[int][]int64
	renewedBefore []time.Time
	rounds        []int // RoundState.Round of every acquisition
	// markDelay is how long a delete takes (a throttled BatchWriteItem
	// retried with backoff); onMark runs after that wait, before the rows
	// go: what peers do while the relay still deletes.
	markDelay time.Duration
	onMark    func()
	// unreadable marks rows (bucket, sequence) FetchBatch cannot decode.
	unreadable map[int]map[int64]bool
	// parked holds each bucket's parked rows in sequence order; parkings
	// every move in order.
	parked   map[int][]outbox.Message
	parkings []outbox.Parking
	// marked holds the parked rows (bucket, sequence) marked for replay;
	// requests each bucket's replay request.
	marked   map[int]map[int64]bool
	requests map[int]int64
	// lostParks makes the next parks apply and still fail, as a
	// transaction whose response was lost and whose retries were
	// throttled.
	lostParks int
	// parkDelay is how long a park takes before it reaches the table;
	// beforePark runs then, without the lock (a park that SDK retries
	// delay until after a peer's claim), and afterParkedKeys runs after a
	// read of a parked partition computed its answer.
	parkDelay       time.Duration
	beforePark      func(outbox.Parking)
	afterParkedKeys func(bucket int)
	// renewErr fails every renewal (throttled requests); renewDelay is
	// how long a renewal takes to answer.
	renewErr   error
	renewDelay time.Duration
}

func newMemStore(clock outbox.Clock, buckets int) *memStore {
	return &memStore{
		clock: clock, buckets: buckets,
		msgs: map[int][]outbox.Message{}, seq: map[int]int64{},
		leases: map[int]lease.State{}, relays: map[string]lease.RelayState{},
		calls: map[string]int{}, deletedOrder: map[int][]int64{},
		unreadable: map[int]map[int64]bool{}, parked: map[int][]outbox.Message{},
		marked: map[int]map[int64]bool{}, requests: map[int]int64{},
	}
}

func (s *memStore) count(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// add enqueues a message with key k into bucket b.
func (s *memStore) add(b int, key string) outbox.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq[b]++
	m := outbox.Stored(outbox.Message{ID: outbox.NewMessageID(), Topic: "t", Key: []byte(key), Value: []byte(key),
		CreatedAt: s.clock.Now()}, b, s.seq[b])
	s.msgs[b] = append(s.msgs[b], m)
	return m
}

func (s *memStore) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, ms := range s.msgs {
		n += len(ms)
	}
	return n
}

func (s *memStore) hold(b int, owner string, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leases[b] = lease.State{Bucket: b, Owner: owner, ExpiresAt: until}
}

func (s *memStore) heartbeat(id string, stopped bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.relays[id] = lease.RelayState{RelayID: id, LastSeen: s.clock.Now(), Stopped: stopped}
}

// lease returns bucket b's lease item as stored.
func (s *memStore) lease(b int) lease.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leases[b]
}

func (s *memStore) leaseOwner(b int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.leases[b]
	if l.Expired(s.clock.Now()) {
		return ""
	}
	return l.Owner
}

func (s *memStore) AcquireLeases(_ context.Context, req lease.Request, st lease.RoundState) (lease.Acquisition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["acquire"]++
	s.rounds = append(s.rounds, st.Round)
	if s.acquireErr != nil {
		return lease.Acquisition{}, s.acquireErr
	}
	if req.BucketCount != s.buckets {
		return lease.Acquisition{}, outbox.Misconfigured("acquire", "bucket count %d != %d", req.BucketCount, s.buckets)
	}
	now := s.clock.Now()
	s.relays[req.RelayID] = lease.RelayState{RelayID: req.RelayID, LastSeen: now}
	acq := lease.Acquisition{StandbyRank: -1}
	for b := range s.buckets {
		l := s.leases[b]
		ahead := lease.KeepAhead(req.LeaseDuration, req.RenewInterval)
		switch {
		case l.Owner == req.RelayID && s.unrenewed && req.KeepsAhead() && l.ExpiresAt.Sub(now) >= ahead:
			acq.Owned = append(acq.Owned, b)
			acq.Unrenewed = append(acq.Unrenewed, b)
			if acq.UnrenewedExpiry.IsZero() || l.ExpiresAt.Before(acq.UnrenewedExpiry) {
				acq.UnrenewedExpiry = l.ExpiresAt
			}
			continue
		case l.Owner == req.RelayID:
			acq.Owned = append(acq.Owned, b)
		case l.Owner == "" || l.Expired(now):
			acq.Owned = append(acq.Owned, b)
			acq.Claimed = append(acq.Claimed, b)
		default:
			continue
		}
		s.leases[b] = lease.State{Bucket: b, Owner: req.RelayID, ExpiresAt: now.Add(req.LeaseDuration)}
	}
	return acq, nil
}

func (s *memStore) RenewLeases(ctx context.Context, req lease.Request, buckets []int) (bool, error) {
	if s.renewDelay > 0 && !outbox.Sleep(s.renewDelay, ctx.Done()) {
		return false, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["renew"]++
	now := s.clock.Now()
	s.renewedBefore = append(s.renewedBefore, now)
	if s.renewErr != nil {
		return false, s.renewErr
	}
	if s.refuseRenew {
		return false, nil
	}
	for _, b := range buckets {
		if l := s.leases[b]; l.Owner != req.RelayID || l.Expired(now) {
			return false, nil
		}
	}
	for _, b := range buckets {
		s.leases[b] = lease.State{Bucket: b, Owner: req.RelayID, ExpiresAt: now.Add(req.LeaseDuration)}
	}
	// As the table contract's renewal: all accepted, then the heartbeat.
	s.relays[req.RelayID] = lease.RelayState{RelayID: req.RelayID, LastSeen: now}
	return true, nil
}

func (s *memStore) ReleaseLeases(_ context.Context, req lease.Request) (lease.Release, error) {
	if s.onRelease != nil {
		s.onRelease()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["release"]++
	now := s.clock.Now()
	s.relays[req.RelayID] = lease.RelayState{RelayID: req.RelayID, LastSeen: now, Stopped: true}
	var rel lease.Release
	for b := range s.buckets {
		if l := s.leases[b]; l.Owner == req.RelayID {
			s.leases[b] = lease.State{Bucket: b, ExpiresAt: now}
			rel.Released = append(rel.Released, b)
		}
	}
	return rel, nil
}

func (s *memStore) ReadCoordination(context.Context) (lease.Coordination, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["coordination"]++
	c := lease.Coordination{ReadAt: s.clock.Now()}
	for b := range s.buckets {
		if l, ok := s.leases[b]; ok {
			c.Leases = append(c.Leases, l)
		}
	}
	for _, r := range s.relays {
		c.Relays = append(c.Relays, r)
	}
	return c, nil
}

func (s *memStore) PendingBuckets(_ context.Context, buckets []int) ([]int, error) {
	if s.beforePending != nil {
		s.beforePending()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["pending"]++
	if s.failPending > 0 {
		s.failPending--
		return nil, errors.New("throttled")
	}
	var out []int
	for _, b := range buckets {
		if len(s.msgs[b]) > 0 {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (s *memStore) FetchBatch(_ context.Context, bucket, max int) ([]outbox.Message, error) {
	s.mu.Lock()
	s.calls["fetch"]++
	ms := s.msgs[bucket]
	hook := s.afterFetch
	for i, m := range ms[:min(max, len(ms))] {
		if s.unreadable[bucket][m.Sequence()] {
			s.mu.Unlock()
			return slices.Clone(ms[:i]), &outbox.UnreadableRowError{Bucket: bucket, Sequence: m.Sequence(), Key: m.Key, Err: errors.New("Topic is missing")}
		}
	}
	out := slices.Clone(ms[:min(max, len(ms))])
	s.mu.Unlock()
	if hook != nil {
		hook(bucket)
	}
	return out, nil
}

func (s *memStore) MarkPublished(ctx context.Context, bucket int, msgs []outbox.Message) error {
	s.mu.Lock()
	delay, hook := s.markDelay, s.onMark
	s.onMark = nil
	s.mu.Unlock()
	if delay > 0 && !outbox.Sleep(delay, ctx.Done()) {
		return ctx.Err()
	}
	if hook != nil {
		hook()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["mark"]++
	if s.failMark > 0 {
		s.failMark--
		return errors.New("deletes left unprocessed")
	}
	ms := s.msgs[bucket]
	for i, m := range msgs {
		if i >= len(ms) || ms[i].Sequence() != m.Sequence() {
			return fmt.Errorf("mark out of order: bucket %d index %d sequence %d", bucket, i, m.Sequence())
		}
		s.deletedOrder[bucket] = append(s.deletedOrder[bucket], m.Sequence())
	}
	s.msgs[bucket] = ms[len(msgs):]
	return nil
}

func (s *memStore) Backlog(context.Context) (outbox.Backlog, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var bl outbox.Backlog
	for _, ms := range s.msgs {
		bl.Pending += int64(len(ms))
		if len(ms) > 0 && (bl.Oldest.IsZero() || ms[0].CreatedAt.Before(bl.Oldest)) {
			bl.Oldest = ms[0].CreatedAt
		}
	}
	return bl, nil
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
	if p.delay > 0 {
		outbox.Sleep(p.delay, ctx.Done())
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

// recorder is an Observer keeping every event.
type recorder struct {
	mu     sync.Mutex
	events []outbox.Event
}

func (r *recorder) Observe(e outbox.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) count(k outbox.EventKind) (n, sum int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Kind == k {
			n++
			sum += e.Count
		}
	}
	return n, sum
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

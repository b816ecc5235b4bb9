package e2e

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/internal/simtime"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// t0 is where manual clocks start.
var t0 = time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC)

const topic = "orders"

// backend is one outbox table and one Kafka cluster. act counts the store
// and publisher calls in flight through the relays built here, so the
// manual-clock driver moves time only while every relay is parked.
type backend struct {
	ddb    *outboxlocal.DynamoDB
	kafka  *outboxlocal.Kafka
	clock  outbox.Clock
	manual *outboxlocal.ManualClock // nil on the system clock
	opts   outboxddb.Options
	writer *outboxddb.Writer
	act    *simtime.Activity

	mu     sync.Mutex
	parked func(ctx context.Context, now time.Time) // see whenParked
}

// newBackend starts the backends with clock (a *outboxlocal.ManualClock or
// the system clock) and the given topics besides "orders".
func newBackend(t testing.TB, clock outbox.Clock, topics ...string) *backend {
	t.Helper()
	b := &backend{clock: clock, act: simtime.NewActivity()}
	b.manual, _ = clock.(*outboxlocal.ManualClock)
	b.ddb = outboxtest.NewDynamoDB(t, outboxlocal.WithClock(clock))
	b.kafka = outboxtest.NewKafka(t, append([]string{topic}, topics...)...)
	b.opts = outboxddb.Options{TableName: outboxtest.CreateTable(t, b.ddb), Clock: clock, Logger: quiet()}
	w, err := outboxddb.NewWriter(b.ddb.Client, b.opts)
	if err != nil {
		t.Fatal(err)
	}
	b.writer = w
	return b
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// rig is one relay with its own store and publisher, both tracked.
type rig struct {
	relay *outbox.Relay
	store *trackedStore
	pub   *trackedPublisher
	obs   *recorder
}

// newRig builds relay id with opts; tweak edits the config last.
func (b *backend) newRig(t testing.TB, opts outbox.RelayOptions, tweak func(*outbox.RelayConfig)) *rig {
	t.Helper()
	s, err := outboxddb.NewStore(b.ddb.Client, b.opts)
	if err != nil {
		t.Fatal(err)
	}
	p, err := outboxkafka.New(outboxkafka.Config{Brokers: b.kafka.Brokers, Clock: b.publisherClock(), ExtraOpts: outboxlocal.TestClientOpts()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	r := &rig{store: &trackedStore{Store: s, act: b.act}, pub: &trackedPublisher{inner: p, act: b.act, clock: b.manual}, obs: &recorder{}}
	cfg := outbox.RelayConfig{Options: opts, Store: r.store, Publisher: r.pub, Clock: b.clock, Observer: r.obs, Logger: quiet()}
	if tweak != nil {
		tweak(&cfg)
	}
	relay, err := outbox.NewRelay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.relay = relay
	return r
}

// publisherClock is the clock of the Kafka publishers built here. On a
// manual clock a publisher's own wait (the second look at a topic its
// metadata did not list) is no call in flight (simtime's CallClock).
func (b *backend) publisherClock() outbox.Clock {
	if b.manual == nil {
		return b.clock
	}
	return b.act.CallClock(b.manual)
}

// drive moves the manual clock to its next timer whenever every
// participant is parked (internal/simtime's rule): the test's goroutine
// from now on, and every goroutine it starts, relays included. It runs
// until the test ends.
func (b *backend) drive(t testing.TB) {
	t.Helper()
	ctx, leave := b.act.Join(t.Context())
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for b.manual.BlockUntilContext(ctx, 1) == nil {
			// A settle that runs out of wall time (a participant
			// computing long) is only looked at again.
			if b.act.Settle(ctx, time.Minute) == nil {
				b.runParked(ctx)
				b.manual.AdvanceToNext()
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		leave()
	})
}

// whenParked has the driver call fn each time every participant is
// parked, before it moves the clock: what fn reads of the backends is a
// state no relay is changing, and what fn writes a relay sees once its
// timer fires. fn runs on the driver's goroutine.
func (b *backend) whenParked(fn func(ctx context.Context, now time.Time)) {
	b.mu.Lock()
	b.parked = fn
	b.mu.Unlock()
}

func (b *backend) runParked(ctx context.Context) {
	b.mu.Lock()
	fn := b.parked
	b.mu.Unlock()
	if fn != nil {
		fn(ctx, b.manual.Now())
	}
}

// run runs the relay and fails the test on an error.
func (r *rig) run(t testing.TB, in outbox.RunInput) outbox.RunResult {
	t.Helper()
	res, err := r.relay.Run(t.Context(), in)
	if err != nil {
		t.Fatalf("run %+v: %v", in, err)
	}
	return res
}

// trackedStore counts its calls in flight; the hooks run before a call,
// outside the count, so a hook may block or run another relay (or cancel
// the call's context: a crash).
type trackedStore struct {
	outbox.Store
	act *simtime.Activity

	mu            sync.Mutex
	beforeRelease func()
	beforeRenew   func()
	beforeCall    func() // before every call, after the call's own hook
}

func (s *trackedStore) hook(p *func()) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *p
}

func (s *trackedStore) setBeforeRelease(fn func()) {
	s.mu.Lock()
	s.beforeRelease = fn
	s.mu.Unlock()
}

func (s *trackedStore) setBeforeRenew(fn func()) {
	s.mu.Lock()
	s.beforeRenew = fn
	s.mu.Unlock()
}

func (s *trackedStore) setBeforeCall(fn func()) {
	s.mu.Lock()
	s.beforeCall = fn
	s.mu.Unlock()
}

// call runs fn as one call in flight, after the hook at points to (nil for
// none) and then the hook for every call.
func call[T any](s *trackedStore, at *func(), fn func() (T, error)) (T, error) {
	for _, p := range []*func(){at, &s.beforeCall} {
		if p == nil {
			continue
		}
		if h := s.hook(p); h != nil {
			h()
		}
	}
	return simtime.Track(s.act, fn)
}

func (s *trackedStore) AcquireLeases(ctx context.Context, req outbox.LeaseRequest, st outbox.RoundState) (outbox.Acquisition, error) {
	return call(s, nil, func() (outbox.Acquisition, error) { return s.Store.AcquireLeases(ctx, req, st) })
}

func (s *trackedStore) RenewLeases(ctx context.Context, req outbox.LeaseRequest, buckets []int) (bool, error) {
	return call(s, &s.beforeRenew, func() (bool, error) { return s.Store.RenewLeases(ctx, req, buckets) })
}

func (s *trackedStore) ReleaseLeases(ctx context.Context, req outbox.LeaseRequest) (outbox.Release, error) {
	return call(s, &s.beforeRelease, func() (outbox.Release, error) { return s.Store.ReleaseLeases(ctx, req) })
}

func (s *trackedStore) ReadCoordination(ctx context.Context) (outbox.Coordination, error) {
	return call(s, nil, func() (outbox.Coordination, error) { return s.Store.ReadCoordination(ctx) })
}

func (s *trackedStore) PendingBuckets(ctx context.Context, buckets []int) ([]int, error) {
	return call(s, nil, func() ([]int, error) { return s.Store.PendingBuckets(ctx, buckets) })
}

func (s *trackedStore) FetchBatch(ctx context.Context, bucket, max int) ([]outbox.Message, error) {
	return call(s, nil, func() ([]outbox.Message, error) { return s.Store.FetchBatch(ctx, bucket, max) })
}

func (s *trackedStore) MarkPublished(ctx context.Context, bucket int, msgs []outbox.Message) error {
	_, err := call(s, nil, func() (struct{}, error) { return struct{}{}, s.Store.MarkPublished(ctx, bucket, msgs) })
	return err
}

// The quarantine passes through, tracked like the rest.
func (s *trackedStore) quarantine() outbox.Quarantine { return s.Store.(outbox.Quarantine) }

func (s *trackedStore) ParkedKeys(ctx context.Context, bucket int) (outbox.ParkedSet, error) {
	return call(s, nil, func() (outbox.ParkedSet, error) { return s.quarantine().ParkedKeys(ctx, bucket) })
}

func (s *trackedStore) Park(ctx context.Context, p outbox.Parking) error {
	_, err := call(s, nil, func() (struct{}, error) { return struct{}{}, s.quarantine().Park(ctx, p) })
	return err
}

func (s *trackedStore) ReplayRequests(ctx context.Context) (map[int]int64, error) {
	return call(s, nil, func() (map[int]int64, error) { return s.quarantine().ReplayRequests(ctx) })
}

func (s *trackedStore) DeleteReplayed(ctx context.Context, bucket int, msgs []outbox.Message) error {
	_, err := call(s, nil, func() (struct{}, error) { return struct{}{}, s.quarantine().DeleteReplayed(ctx, bucket, msgs) })
	return err
}

func (s *trackedStore) RefuseReplay(ctx context.Context, bucket int, seq int64, reason string) error {
	_, err := call(s, nil, func() (struct{}, error) { return struct{}{}, s.quarantine().RefuseReplay(ctx, bucket, seq, reason) })
	return err
}

func (s *trackedStore) ReplayDone(ctx context.Context, bucket int, request int64) error {
	_, err := call(s, nil, func() (struct{}, error) { return struct{}{}, s.quarantine().ReplayDone(ctx, bucket, request) })
	return err
}

func (s *trackedStore) Backlog(ctx context.Context) (outbox.Backlog, error) {
	return call(s, nil, func() (outbox.Backlog, error) { return s.Store.Backlog(ctx) })
}

// trackedPublisher counts its calls in flight. latency, on a manual clock,
// is how long each publish takes in simulated time: the clock advances by
// it when the publish is acknowledged. wrap, when set, replaces a publish:
// it may block before calling publish (outside the count) or change what
// the relay is told.
type trackedPublisher struct {
	inner *outboxkafka.Publisher
	act   *simtime.Activity
	clock *outboxlocal.ManualClock

	mu      sync.Mutex
	latency time.Duration
	wrap    func(ctx context.Context, msgs []outbox.Message, publish func() (int, error)) (int, error)
}

func (p *trackedPublisher) Init(ctx context.Context) error {
	_, err := simtime.Track(p.act, func() (struct{}, error) { return struct{}{}, p.inner.Init(ctx) })
	return err
}

func (p *trackedPublisher) Publish(ctx context.Context, msgs []outbox.Message) (int, error) {
	p.mu.Lock()
	latency, wrap := p.latency, p.wrap
	p.mu.Unlock()
	publish := func() (int, error) {
		return simtime.Track(p.act, func() (int, error) {
			n, err := p.inner.Publish(ctx, msgs)
			if latency > 0 {
				p.clock.Advance(latency)
			}
			return n, err
		})
	}
	if wrap != nil {
		return wrap(ctx, msgs, publish)
	}
	return publish()
}

func (p *trackedPublisher) setLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

func (p *trackedPublisher) setWrap(fn func(ctx context.Context, msgs []outbox.Message, publish func() (int, error)) (int, error)) {
	p.mu.Lock()
	p.wrap = fn
	p.mu.Unlock()
}

// recorder keeps every event in the order observed.
type recorder struct {
	mu      sync.Mutex
	events  []outbox.Event
	waiters []eventWaiter
}

type eventWaiter struct {
	match func(outbox.Event) bool
	ch    chan struct{}
}

func (r *recorder) Observe(e outbox.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	kept := r.waiters[:0]
	for _, w := range r.waiters {
		if w.match(e) {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	r.waiters = kept
}

// when returns a channel closed once an event matching match is observed
// (at once if one was).
func (r *recorder) when(match func(outbox.Event) bool) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := make(chan struct{})
	for _, e := range r.events {
		if match(e) {
			close(ch)
			return ch
		}
	}
	r.waiters = append(r.waiters, eventWaiter{match, ch})
	return ch
}

// of returns the events of kind, in order, with their positions in the
// whole sequence.
func (r *recorder) of(kind outbox.EventKind) (events []outbox.Event, at []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, e := range r.events {
		if e.Kind == kind {
			events = append(events, e)
			at = append(at, i)
		}
	}
	return events, at
}

// tableState scans the table: the message items left and the owners the
// lease items still name.
func (b *backend) tableState(t testing.TB) (messages int, owners []string) {
	t.Helper()
	p := dynamodb.NewScanPaginator(b.ddb.Client, &dynamodb.ScanInput{TableName: aws.String(b.opts.TableName), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range page.Items {
			pk := stringAttr(item, "PK")
			sk := stringAttr(item, "SK")
			switch {
			case strings.HasPrefix(pk, "OUTBOX#MESSAGES#"):
				messages++
			case pk == "OUTBOX#COORDINATION" && strings.HasPrefix(sk, "LEASE#"):
				if owner := stringAttr(item, "Owner"); owner != "" {
					owners = append(owners, owner)
				}
			}
		}
	}
	slices.Sort(owners)
	return messages, owners
}

func stringAttr(item map[string]types.AttributeValue, name string) string {
	if s, ok := item[name].(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

package e2e

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// t0 is where the bubble's clock stands when a test's backends are up.
var t0 = time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC)

const topic = "orders"

// backend is one outbox table and one Kafka cluster; clock, the system
// clock, is every relay's, store's and publisher's.
type backend struct {
	ddb    *outboxlocal.DynamoDB
	kafka  *outboxlocal.Kafka
	clock  outbox.Clock
	opts   outboxddb.Options
	writer *outboxddb.Writer
	// link carries the publishes that take simulated time (a rig's
	// latency), one at a time: the publishes of every relay add up on the
	// clock, as one link to the brokers would make them.
	link chan struct{}
}

// newBackend starts the backends with the given topics besides "orders":
// in memory for a test in a synctest bubble, on loopback sockets (or the
// external endpoints of the environment) otherwise.
func newBackend(t testing.TB, inMemory bool, topics ...string) *backend {
	t.Helper()
	b := &backend{clock: outbox.SystemClock{}, link: make(chan struct{}, 1)}
	var ddbOpts []outboxlocal.DynamoOption
	if inMemory {
		ddbOpts = append(ddbOpts, outboxlocal.InMemory())
	}
	b.ddb = outboxtest.NewDynamoDB(t, ddbOpts...)
	b.kafka = outboxtest.NewKafkaWith(t, outboxlocal.KafkaConfig{Topics: append([]string{topic}, topics...), InMemory: inMemory})
	b.opts = outboxddb.Options{TableName: outboxtest.CreateTable(t, b.ddb), Clock: b.clock, Logger: quiet()}
	w, err := outboxddb.NewWriter(b.ddb.Client, outboxddb.WriterOptions{Options: b.opts})
	if err != nil {
		t.Fatal(err)
	}
	b.writer = w
	return b
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// rig is one relay with its own store and publisher, both with hooks.
type rig struct {
	relay *outbox.Relay
	store *trackedStore
	pub   *trackedPublisher
	obs   *recorder
}

// newRig builds relay id with opts; tweak edits the config last.
func (b *backend) newRig(t testing.TB, opts outbox.RelayOptions, tweak func(*outbox.RelayConfig)) *rig {
	t.Helper()
	s, err := outboxddb.NewStore(b.ddb.Client, outboxddb.StoreOptions{Options: b.opts})
	if err != nil {
		t.Fatal(err)
	}
	// The cluster's options carry TestClientOpts and, in memory, the dialer.
	p, err := outboxkafka.New(outboxkafka.Config{Brokers: b.kafka.Brokers, Clock: b.clock, ExtraOpts: b.kafka.ClientOpts()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	r := &rig{store: newTrackedStore(s), pub: &trackedPublisher{inner: p, link: b.link}, obs: &recorder{}}
	cfg := outbox.RelayConfig{Options: opts, Store: r.store.Store, Publisher: r.pub, Clock: b.clock, Hooks: []outbox.Hook{r.obs}, Logger: quiet()}
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

// run runs the relay and fails the test on an error.
func (r *rig) run(t testing.TB, in outbox.RunInput) outbox.RunResult {
	t.Helper()
	res, err := r.relay.Run(t.Context(), in)
	if err != nil {
		t.Fatalf("run %+v: %v", in, err)
	}
	return res
}

// trackedStore is a relay's store (an outboxtest.ObservedStore, Store)
// with the hooks a test runs before its calls: a hook may block or run
// another relay (or cancel the call's context: a crash).
type trackedStore struct {
	outbox.Store

	mu            sync.Mutex
	beforeRelease func()
	beforeRenew   func()
	beforeCall    func() // before every call, after the call's own hook
	// killed refuses every call: the relay's process is gone.
	killed atomic.Bool
}

// newTrackedStore observes s, serving its quarantine but not its trust
// check's narrower reads.
func newTrackedStore(s *outboxddb.Store) *trackedStore {
	t := &trackedStore{}
	t.Store = outboxtest.Observe(outboxtest.ObservedStore{Store: struct {
		outbox.Store
		outbox.Quarantine
	}{s, s}, Call: t.call, WriteLeasesFunc: t.writeLeases})
	return t
}

// writeLeases runs a renewal's hook before its writes.
func (s *trackedStore) writeLeases(ctx context.Context, relayID string, op lease.Op, writes []lease.Write, next func(context.Context, string, lease.Op, []lease.Write) ([]int, []int, error)) ([]int, []int, error) {
	if h := s.hook(&s.beforeRenew); op == lease.OpRenew && h != nil {
		h()
	}
	return next(ctx, relayID, op, writes)
}

// errKilled is what a killed relay's calls return.
var errKilled = errors.New("e2e: the relay's process was killed")

// kill makes every later call of the relay fail without reaching the
// table, as after a crash.
func (s *trackedStore) kill() { s.killed.Store(true) }

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

// call runs a call after a release's own hook and then the hook for every
// call; a renewal's hook runs after those, before its writes
// (writeLeases).
func (s *trackedStore) call(ctx context.Context, c outboxtest.StoreCall, next func(context.Context) error) error {
	if s.killed.Load() {
		return errKilled
	}
	var at *func()
	if c.Method == "ReleaseLeases" {
		at = &s.beforeRelease
	}
	for _, p := range []*func(){at, &s.beforeCall} {
		if p == nil {
			continue
		}
		if h := s.hook(p); h != nil {
			h()
		}
	}
	return next(ctx)
}

// trackedPublisher publishes through inner. latency is how long each
// publish takes on the clock: it holds link for that long once Kafka
// acknowledged it. wrap, when set, replaces a publish: it may block before
// calling publish or change what the relay is told.
type trackedPublisher struct {
	inner *outboxkafka.Publisher
	link  chan struct{}

	mu      sync.Mutex
	latency time.Duration
	wrap    func(ctx context.Context, msgs []outbox.Message, publish func() (int, error)) (int, error)
}

func (p *trackedPublisher) Init(ctx context.Context) error { return p.inner.Init(ctx) }

func (p *trackedPublisher) Publish(ctx context.Context, msgs []outbox.Message) (int, error) {
	p.mu.Lock()
	latency, wrap := p.latency, p.wrap
	p.mu.Unlock()
	publish := func() (int, error) {
		if latency <= 0 {
			return p.inner.Publish(ctx, msgs)
		}
		p.link <- struct{}{}
		defer func() { <-p.link }()
		n, err := p.inner.Publish(ctx, msgs)
		time.Sleep(latency)
		return n, err
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

// event is one hook call: its method, when it came (the bubble's clock,
// every relay's) and its arguments.
type event struct {
	kind          string
	at            time.Time
	bucket, count int
	loss          outbox.LossReason
	err           error
}

// Kinds of event: the hook methods the tests read.
const (
	evClaim        = "claim"
	evLeaseLost    = "lease_lost"
	evPublish      = "publish"
	evDelete       = "delete"
	evBackoff      = "backoff"
	evHeadRowRetry = "head_row_retry"
)

// recorder keeps the relay's lease and batch reports in the order made.
type recorder struct {
	mu      sync.Mutex
	events  []event
	waiters []eventWaiter
}

var (
	_ outbox.HookLease = (*recorder)(nil)
	_ outbox.HookBatch = (*recorder)(nil)
)

type eventWaiter struct {
	match func(event) bool
	ch    chan struct{}
}

func (r *recorder) OnRound(string, time.Duration, lease.Acquisition, error) {}
func (r *recorder) OnReleaseSkipped(string, int)                            {}
func (r *recorder) OnFetch(string, int, int)                                {}

func (r *recorder) OnLeases(_ string, _, claimed, _ int) {
	if claimed > 0 {
		r.add(event{kind: evClaim, count: claimed})
	}
}

func (r *recorder) OnLeaseLost(_ string, lost int, why outbox.LossReason) {
	r.add(event{kind: evLeaseLost, count: lost, loss: why})
}

func (r *recorder) OnPublish(_ string, bucket, acked int, _ []time.Duration, err error) {
	r.add(event{kind: evPublish, bucket: bucket, count: acked, err: err})
}

func (r *recorder) OnDelete(_ string, bucket, deleted int) {
	r.add(event{kind: evDelete, bucket: bucket, count: deleted})
}

func (r *recorder) OnBackoff(_ string, bucket int, _ time.Duration, err error) {
	r.add(event{kind: evBackoff, bucket: bucket, err: err})
}

func (r *recorder) OnHeadRowRetry(_ string, bucket int) {
	r.add(event{kind: evHeadRowRetry, bucket: bucket})
}

func (r *recorder) add(e event) {
	e.at = time.Now()
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
func (r *recorder) when(match func(event) bool) <-chan struct{} {
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
func (r *recorder) of(kind string) (events []event, at []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, e := range r.events {
		if e.kind == kind {
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

package steady

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// env is one simulated execution environment: created on demand, kept warm
// for the rest of the run, one invocation at a time. Like Lambda's, it holds
// its relay (and so its relay id and lease state), its store, its Kafka
// client and its continuation notifier across invocations.
type env struct {
	n        int
	relayID  string
	handler  *outboxlambda.RelayHandler
	notifier *outboxlambda.Notifier
	pub      *simPublisher

	// Guarded by ledger.mu: whether an invocation runs and what its relay
	// believes it owns since leaseAt.
	running bool
	owned   []int
	leaseAt time.Time
}

// Handle runs one invocation in the environment.
func (e *env) Handle(ctx context.Context, payload json.RawMessage) (outboxlambda.RelayResponse, error) {
	return e.handler.Handle(ctx, payload)
}

// newEnv builds environment n the way the relay function's init does.
func (s *sim) newEnv(n int) (*env, error) {
	e := &env{n: n, relayID: fmt.Sprintf("spillway-relay-%02d", n)}
	store, err := outboxddb.NewStore(s.client, outboxddb.Options{
		TableName:   s.table,
		BucketCount: s.cfg.Buckets,
		Clock:       s.clock,
		Logger:      s.cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	e.notifier, err = s.newNotifier()
	if err != nil {
		return nil, err
	}
	e.pub = &simPublisher{s: s, relayID: e.relayID}
	e.handler, err = outboxlambda.NewRelayHandler(outboxlambda.RelayHandlerConfig{
		Config:    s.fn,
		RelayID:   e.relayID,
		Store:     &envStore{inner: store, env: e, s: s},
		Publisher: e.pub,
		Notifier:  e.notifier,
		Clock:     s.clock,
		Logger:    s.cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// envStore is an environment's outbox.Store: it names the store call in the
// context of its requests (for simClient's classification) and tells the
// ledger what the relay now believes it owns, as the engine does: from the
// start of a successful round or renewal, until a release starts, a round
// fails or a renewal is refused.
type envStore struct {
	inner outbox.Store
	env   *env
	s     *sim
}

var _ outbox.Store = (*envStore)(nil)

func (st *envStore) AcquireLeases(ctx context.Context, req outbox.LeaseRequest, rs outbox.RoundState) (outbox.Acquisition, error) {
	start := st.s.clock.Now()
	acq, err := st.inner.AcquireLeases(withMethod(ctx, methodAcquire), req, rs)
	st.s.ledger.acquired(st.env, start, st.s.clock.Now(), acq, err)
	st.s.tracef("%s round: owned %v claimed %v released %v lost %v refused %d rank %d err %v",
		st.env.relayID, acq.Owned, acq.Claimed, acq.Released, acq.Lost, acq.Refused, acq.StandbyRank, err)
	return acq, err
}

func (st *envStore) RenewLeases(ctx context.Context, req outbox.LeaseRequest, buckets []int) (bool, error) {
	start := st.s.clock.Now()
	ok, err := st.inner.RenewLeases(withMethod(ctx, methodRenew), req, buckets)
	st.s.ledger.renewed(st.env, start, st.s.clock.Now(), ok, err)
	st.s.tracef("%s renew %v: %v err %v", st.env.relayID, buckets, ok, err)
	return ok, err
}

func (st *envStore) ReleaseLeases(ctx context.Context, req outbox.LeaseRequest) (outbox.Release, error) {
	st.s.ledger.releasing(st.env, st.s.clock.Now())
	rel, err := st.inner.ReleaseLeases(withMethod(ctx, methodRelease), req)
	st.s.tracef("%s release: %v refused %d unfinished %v err %v", st.env.relayID, rel.Released, rel.Refused, rel.Unfinished, err)
	return rel, err
}

func (st *envStore) ReadCoordination(ctx context.Context) (outbox.Coordination, error) {
	c, err := st.inner.ReadCoordination(withMethod(ctx, methodRead))
	if st.s.cfg.Trace != nil {
		st.s.tracef("%s read coordination: %s err %v", st.env.relayID, describeCoordination(c), err)
	}
	return c, err
}

// ReadLeases passes the trust check's second look at a bucket left to a
// claiming peer through to the store (outbox.LeaseReader), as the relay
// function's store serves it.
func (st *envStore) ReadLeases(ctx context.Context, buckets []int) ([]outbox.LeaseState, error) {
	lr, ok := st.inner.(outbox.LeaseReader)
	if !ok {
		c, err := st.ReadCoordination(ctx)
		return c.Leases, err
	}
	leases, err := lr.ReadLeases(withMethod(ctx, methodRead), buckets)
	st.s.tracef("%s read leases %v: %v err %v", st.env.relayID, buckets, leases, err)
	return leases, err
}

func (st *envStore) PendingBuckets(ctx context.Context, buckets []int) ([]int, error) {
	p, err := st.inner.PendingBuckets(ctx, buckets)
	st.s.tracef("%s probe %v: pending %v err %v", st.env.relayID, buckets, p, err)
	return p, err
}

func (st *envStore) FetchBatch(ctx context.Context, bucket, max int) ([]outbox.Message, error) {
	return st.inner.FetchBatch(ctx, bucket, max)
}

func (st *envStore) MarkPublished(ctx context.Context, bucket int, msgs []outbox.Message) error {
	return st.inner.MarkPublished(ctx, bucket, msgs)
}

func (st *envStore) Backlog(ctx context.Context) (outbox.Backlog, error) {
	return st.inner.Backlog(ctx)
}

// simPublisher stands in for Kafka: every record is acknowledged after one
// produce round trip, and the ledger records when. The first initialisation
// of an environment costs the connection set-up, later ones a ping, as with
// the franz-go client the function keeps across warm invocations.
type simPublisher struct {
	s       *sim
	relayID string
	inited  bool // only the environment's one invocation touches it
}

var _ outbox.Publisher = (*simPublisher)(nil)

func (p *simPublisher) Init(ctx context.Context) error {
	d := p.s.cfg.Latency.Kafka
	if !p.inited {
		d = p.s.cfg.Latency.KafkaInit
	}
	if !outbox.Sleep(d, ctx.Done()) {
		return fmt.Errorf("steady: initialise publisher: %w", context.Cause(ctx))
	}
	p.inited = true
	return nil
}

func (p *simPublisher) Publish(ctx context.Context, msgs []outbox.Message) (int, error) {
	if !outbox.Sleep(p.s.cfg.Latency.Kafka, ctx.Done()) {
		return 0, fmt.Errorf("steady: publish %d messages: %w", len(msgs), context.Cause(ctx))
	}
	p.s.ledger.acked(msgs, p.s.clock.Now())
	p.s.tracef("%s published %d of bucket %d", p.relayID, len(msgs), msgs[0].Bucket)
	return len(msgs), nil
}

// describeCoordination renders a coordination view for the trace.
func describeCoordination(c outbox.Coordination) string {
	var b strings.Builder
	for _, l := range c.Leases {
		fmt.Fprintf(&b, "%d:%s@%s ", l.Bucket, l.Owner, l.ExpiresAt.Sub(c.ReadAt).Round(time.Millisecond))
	}
	for _, r := range c.Relays {
		state := "live"
		if r.Stopped {
			state = "stopped"
		}
		fmt.Fprintf(&b, "%s(%s %s ago) ", r.RelayID, state, c.ReadAt.Sub(r.LastSeen).Round(time.Millisecond))
	}
	return strings.TrimSpace(b.String())
}

package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// errCrashed is what a crashed environment's calls return: the process is
// gone, so nothing it would still send reaches DynamoDB or Kafka.
var errCrashed = errors.New("fleetsim: execution environment crashed")

// relayStore is the outbox.Store of one execution environment. It carries
// out the run's crash and pause plan, records the relay's lease beliefs and
// membership, and traces what the relay does.
type relayStore struct {
	env   *env
	inner outbox.Store
}

var (
	_ outbox.Store      = (*relayStore)(nil)
	_ outbox.Quarantine = quarantineStore{}
)

// relayPublisher is the outbox.Publisher of one execution environment.
type relayPublisher struct {
	env   *env
	inner outbox.Publisher
}

var _ outbox.Publisher = (*relayPublisher)(nil)

// enter runs before every call of the environment: it refuses calls of a
// crashed environment and carries out a crash or a pause planned for this
// call. after must be called with the call's outcome; it carries out a
// crash planned after the call (the response is lost).
func (e *env) enter(op string) (after func() error, err error) {
	if e.dead.Load() {
		return nil, errCrashed
	}
	run := e.run.Load()
	if run == nil {
		return func() error { return nil }, nil
	}
	n := run.calls.Add(1)
	p := run.plan
	if p.crashAt == n && !p.crashAfter {
		e.sim.crash(e, run, causeCrash, fmt.Sprintf("before call %d (%s)", n, op))
		return nil, errCrashed
	}
	if p.pauseAt == n {
		e.sim.pause(e, run, op, p.pauseFor)
		if e.dead.Load() {
			return nil, errCrashed
		}
	}
	return func() error {
		if p.crashAt == n && p.crashAfter {
			e.sim.crash(e, run, causeCrash, fmt.Sprintf("after call %d (%s), response lost", n, op))
			return errCrashed
		}
		if e.dead.Load() {
			return errCrashed
		}
		return nil
	}, nil
}

func (s *relayStore) AcquireLeases(ctx context.Context, req outbox.LeaseRequest, st outbox.RoundState) (outbox.Acquisition, error) {
	after, err := s.env.enter("acquire")
	if err != nil {
		return outbox.Acquisition{}, err
	}
	e := s.env
	ref, start := e.clock.Now(), e.sim.clock.Now()
	e.sim.joined(e)
	acq, err := s.inner.AcquireLeases(ctx, e.leaseRequest(req), st)
	ret := e.sim.clock.Now()
	if err != nil {
		e.sim.leases.dropped(e.id, start)
		e.sim.trace.add("acquire-error", e.id, -1, "%v", err)
	} else {
		if u := acq.UnrenewedExpiry; !u.IsZero() && u.Add(-req.LeaseDuration).Before(ref) {
			// Leases the round left unrenewed last only until their stored
			// expiry: the relay trusts them that long, no longer.
			ref = u.Add(-req.LeaseDuration)
		}
		e.sim.leases.acquired(e.id, e.clock, ref, start, ret, acq.Owned, acq.Claimed)
		e.sim.noteRound(start)
		e.sim.trace.add("acquire", e.id, -1, "host=%s owned=%v claimed=%v released=%v lost=%v refused=%d heartbeat_refused=%v",
			e.sim.hostOffset(ref), acq.Owned, acq.Claimed, acq.Released, acq.Lost, acq.Refused, acq.HeartbeatRefused)
	}
	if cerr := after(); cerr != nil {
		return outbox.Acquisition{}, cerr
	}
	return acq, err
}

func (s *relayStore) RenewLeases(ctx context.Context, req outbox.LeaseRequest, buckets []int) (bool, error) {
	after, err := s.env.enter("renew")
	if err != nil {
		return false, err
	}
	e := s.env
	ref, start := e.clock.Now(), e.sim.clock.Now()
	ok, err := s.inner.RenewLeases(ctx, e.leaseRequest(req), buckets)
	ret := e.sim.clock.Now()
	switch {
	case err != nil:
		e.sim.trace.add("renew-error", e.id, -1, "buckets=%v: %v", buckets, err)
	case ok:
		e.sim.leases.renewed(e.id, ref, ret, buckets)
		e.sim.trace.add("renew", e.id, -1, "host=%s buckets=%v", e.sim.hostOffset(ref), buckets)
	default:
		e.sim.leases.dropped(e.id, start)
		e.sim.trace.add("renew-refused", e.id, -1, "buckets=%v", buckets)
	}
	if cerr := after(); cerr != nil {
		return false, cerr
	}
	return ok, err
}

func (s *relayStore) ReleaseLeases(ctx context.Context, req outbox.LeaseRequest) (outbox.Release, error) {
	after, err := s.env.enter("release")
	if err != nil {
		return outbox.Release{}, err
	}
	e := s.env
	e.sim.leases.dropped(e.id, e.sim.clock.Now())
	rel, err := s.inner.ReleaseLeases(ctx, req)
	e.sim.trace.add("release", e.id, -1, "released=%v refused=%d unfinished=%v err=%v", rel.Released, rel.Refused, rel.Unfinished, err)
	if cerr := after(); cerr != nil {
		return outbox.Release{}, cerr
	}
	return rel, err
}

func (s *relayStore) ReadCoordination(ctx context.Context) (outbox.Coordination, error) {
	after, err := s.env.enter("read-coordination")
	if err != nil {
		return outbox.Coordination{}, err
	}
	c, err := s.inner.ReadCoordination(ctx)
	if cerr := after(); cerr != nil {
		return outbox.Coordination{}, cerr
	}
	return c, err
}

func (s *relayStore) PendingBuckets(ctx context.Context, buckets []int) ([]int, error) {
	after, err := s.env.enter("pending")
	if err != nil {
		return nil, err
	}
	s.env.runLate("pending")
	p, err := s.inner.PendingBuckets(ctx, buckets)
	if cerr := after(); cerr != nil {
		return nil, cerr
	}
	return p, err
}

func (s *relayStore) FetchBatch(ctx context.Context, bucket, max int) ([]outbox.Message, error) {
	if err := stagger(ctx, bucket); err != nil {
		return nil, err
	}
	after, err := s.env.enter("fetch")
	if err != nil {
		return nil, err
	}
	s.env.runLate("fetch")
	msgs, err := s.inner.FetchBatch(ctx, bucket, max)
	if cerr := after(); cerr != nil {
		return nil, cerr
	}
	return msgs, err
}

func (s *relayStore) MarkPublished(ctx context.Context, bucket int, msgs []outbox.Message) error {
	if err := stagger(ctx, bucket); err != nil {
		return err
	}
	after, err := s.env.enter("delete")
	if err != nil {
		return err
	}
	e := s.env
	if !e.sim.leases.holds(e.id, bucket, e.sim.clock.Now()) {
		e.sim.outsideLease.Add(1)
		e.sim.trace.add("late-delete", e.id, bucket, "deleting %s outside the relay's lease", seqRange(msgs))
	}
	err = s.inner.MarkPublished(ctx, bucket, msgs)
	e.sim.trace.add("delete", e.id, bucket, "%s err=%v", seqRange(msgs), err)
	if cerr := after(); cerr != nil {
		return cerr
	}
	return err
}

func (s *relayStore) Backlog(ctx context.Context) (outbox.Backlog, error) {
	after, err := s.env.enter("backlog")
	if err != nil {
		return outbox.Backlog{}, err
	}
	s.env.runLate("backlog")
	b, err := s.inner.Backlog(ctx)
	if cerr := after(); cerr != nil {
		return outbox.Backlog{}, cerr
	}
	return b, err
}

// leaseRequest is req as e's relay sends it: a relay that keeps every
// round (FaultMixedSkew) keeps every owned lease each round and
// heartbeats without the keep-ahead mark, as a relay of another language.
func (e *env) leaseRequest(req outbox.LeaseRequest) outbox.LeaseRequest {
	if e.plain {
		req.KeepEveryRound = true
	}
	return req
}

// quarantineStore is an environment's store under PoisonQuarantine: the
// relayStore, and the DynamoDB store's quarantine side, whose calls other
// than Park go to it directly (they take part in no crash or pause plan).
type quarantineStore struct {
	*relayStore
	outbox.Quarantine
}

// Park implements outbox.Quarantine; an armed park-lost fault makes this
// park's transaction apply and its response be lost, its retries
// throttled.
func (s quarantineStore) Park(ctx context.Context, p outbox.Parking) error {
	after, err := s.env.enter("park")
	if err != nil {
		return err
	}
	e := s.env
	lost := e.sim.takeParkLoss()
	if lost {
		ctx = e.sim.ddb.Faults.LoseResponseIn(ctx, "TransactWriteItems", parkThrottles)
	}
	err = s.Quarantine.Park(ctx, p)
	if lost && err != nil {
		e.sim.hit(causeParkLost, 1)
	}
	e.sim.trace.add("park", e.id, p.Bucket, "row %d reason=%s behind=%d response lost=%v err=%v", p.Sequence, p.Reason, p.Behind, lost, err)
	if cerr := after(); cerr != nil {
		return cerr
	}
	return err
}

func (p *relayPublisher) Init(ctx context.Context) error {
	after, err := p.env.enter("kafka-init")
	if err != nil {
		return err
	}
	err = p.inner.Init(ctx)
	if err != nil {
		p.env.sim.trace.add("kafka-init", p.env.id, -1, "%v", err)
	}
	if cerr := after(); cerr != nil {
		return cerr
	}
	return err
}

func (p *relayPublisher) Publish(ctx context.Context, msgs []outbox.Message) (int, error) {
	if len(msgs) > 0 {
		if err := stagger(ctx, msgs[0].Bucket); err != nil {
			return 0, err
		}
	}
	after, err := p.env.enter("publish")
	if err != nil {
		return 0, err
	}
	e := p.env
	bucket := -1
	if len(msgs) > 0 {
		bucket = msgs[0].Bucket
		left, held := e.sim.leases.left(e.id, bucket, e.sim.clock.Now())
		if held {
			e.sim.notePublishMargin(e, bucket, left)
		}
		if !held {
			e.sim.outsideLease.Add(1)
			e.sim.trace.add("late-publish", e.id, bucket, "publishing %s outside the relay's lease", seqRange(msgs))
		}
	}
	var acked int
	h := e.sim.claimHandoverIf(e, msgs)
	acked, err = p.inner.Publish(ctx, msgs)
	if h != nil {
		e.hold.Store(nil)
		e.sim.endHandover(e, h)
	}
	e.sim.trace.add("publish", e.id, bucket, "%s acked=%d err=%v", seqRange(msgs), acked, err)
	if cerr := after(); cerr != nil {
		return 0, cerr
	}
	return acked, err
}

// bucketStagger is the delay per bucket number of stagger.
const bucketStagger = 10 * time.Microsecond

// stagger delays a relay's call for bucket by a few microseconds, more for
// a higher bucket: the goroutines of one relay that fetch, publish or
// delete for several buckets at one instant then reach the backends, the
// shared Kafka flushes and the run's count of calls (which places its
// crash and pause) one after the other in bucket order, not in the order
// the scheduler runs them.
func stagger(ctx context.Context, bucket int) error {
	if !outbox.Sleep(time.Duration(bucket+1)*bucketStagger, ctx.Done()) {
		return context.Cause(ctx)
	}
	return nil
}

// seqRange summarises the sequence numbers of msgs.
func seqRange(msgs []outbox.Message) string {
	switch len(msgs) {
	case 0:
		return "[]"
	case 1:
		return fmt.Sprintf("[%d]", msgs[0].Sequence)
	}
	return fmt.Sprintf("[%d..%d](%d)", msgs[0].Sequence, msgs[len(msgs)-1].Sequence, len(msgs))
}

// notifier is the Lambda service's asynchronous invoke as the writers and
// the relays see it.
type notifier struct{ sim *sim }

var _ outbox.Notifier = notifier{}

func (n notifier) Notify(_ context.Context, w outbox.WakeUp) error {
	n.sim.invoke(invocation{Trigger: string(outboxlambda.SourceWake), Buckets: w.Buckets, Hop: w.Hop, Join: w.Join})
	return nil
}

// runState is one invocation of an environment.
type runState struct {
	n      int
	plan   runPlan
	cancel context.CancelFunc
	calls  atomic.Int64
	joined atomic.Bool
	over   atomic.Bool
}

package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/internal/sleep"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// errCrashed is what a crashed environment's calls return: the process is
// gone, so nothing it would still send reaches DynamoDB or Kafka.
var errCrashed = errors.New("fleetsim: execution environment crashed")

// An environment is its relay's outbox.Publisher, and observes its
// relay's outbox.Store (storeOf): the calls of both carry out the run's
// crash and pause plan, record the relay's lease beliefs and membership,
// and trace what the relay does.
var _ outbox.Publisher = (*env)(nil)

// call runs one call op of e's relay: it refuses the calls of a crashed
// environment, carries out a crash or a pause the run planned before this
// call, runs do, and carries out a crash planned after it (the response is
// lost). Every store and publisher call of an environment goes through it,
// so the run's count of calls places its crash and pause.
func call[T any](e *env, op string, do func() (T, error)) (T, error) {
	var zero T
	if e.dead.Load() {
		return zero, errCrashed
	}
	run := e.run.Load()
	if run == nil {
		return do()
	}
	n := run.calls.Add(1)
	p := run.plan
	if p.crashAt == n && !p.crashAfter {
		e.sim.crash(e, run, causeCrash, fmt.Sprintf("before call %d (%s)", n, op))
		return zero, errCrashed
	}
	if p.pauseAt == n {
		e.sim.pause(e, run, op, p.pauseFor)
		if e.dead.Load() {
			return zero, errCrashed
		}
	}
	v, err := do()
	if p.crashAt == n && p.crashAfter {
		e.sim.crash(e, run, causeCrash, fmt.Sprintf("after call %d (%s), response lost", n, op))
		return zero, errCrashed
	}
	if e.dead.Load() {
		return zero, errCrashed
	}
	return v, err
}

// bucketCall is call for a call on bucket, staggered (see stagger).
func bucketCall[T any](ctx context.Context, e *env, bucket int, op string, do func() (T, error)) (T, error) {
	if err := stagger(ctx, bucket); err != nil {
		var zero T
		return zero, err
	}
	return call(e, op, do)
}

// storeOf is e's relay's store: the environment's outboxddb.Store, with
// its quarantine side under PoisonQuarantine (and neither trust-check read:
// a trust check reads the whole coordination partition), observed
// (outboxtest.ObservedStore) by e.
func (e *env) storeOf(store *outboxddb.Store, quarantine bool) outbox.Store {
	var inner outbox.Store = struct{ outbox.Store }{store}
	if quarantine {
		inner = struct {
			outbox.Store
			outbox.Quarantine
		}{store, store}
	}
	return outboxtest.Observe(outboxtest.ObservedStore{
		Store:              inner,
		Call:               e.storeCall,
		HeartbeatFunc:      e.heartbeat,
		SnapshotFunc:       e.snapshot,
		HeartbeatsFunc:     e.heartbeats,
		WriteLeasesFunc:    e.writeLeases,
		PruneFunc:          e.prune,
		ReleaseLeasesFunc:  e.releaseLeases,
		PendingBucketsFunc: e.pendingBuckets,
		FetchBatchFunc:     e.fetchBatch,
		BacklogFunc:        e.backlog,
		MarkPublishedFunc:  e.markPublished,
		ParkFunc:           e.park,
		ParkedKeysFunc:     e.parkedKeys,
		DeleteReplayedFunc: e.deleteReplayed,
	})
}

// storeOps names the store calls that take part in the run's crash and
// pause plan (call) as they are. A lease round and a renewal take part as
// one call each, which their first request carries (heartbeat, renew), and
// the quarantine's calls other than Park, which runs it itself (park), go
// to the store directly.
var storeOps = map[string]string{
	"ReleaseLeases":    "release",
	"ReadCoordination": "read-coordination",
	"PendingBuckets":   "pending",
	"FetchBatch":       "fetch",
	"Backlog":          "backlog",
	"MarkPublished":    "delete",
}

// storeCall runs a store call of e through call; a fetch or a delete is
// staggered first (see stagger).
func (e *env) storeCall(ctx context.Context, c outboxtest.StoreCall, next func(context.Context) error) error {
	op, ok := storeOps[c.Method]
	if !ok {
		return next(ctx)
	}
	if c.Method == "FetchBatch" || c.Method == "MarkPublished" {
		if err := stagger(ctx, c.Bucket); err != nil {
			return err
		}
	}
	_, err := call(e, op, func() (struct{}, error) { return struct{}{}, next(ctx) })
	return err
}

// leaseRound is what e remembers of its relay's lease round in progress,
// from its heartbeat to the relay's report of it (roundEnded).
type leaseRound struct {
	active     bool
	ref, start time.Time // the relay's clock and the simulation's at its start
}

// leaseRenewal is a renewal whose writes were accepted, until its
// heartbeat.
type leaseRenewal struct {
	pending    bool
	ref, start time.Time
	buckets    []int
}

// heartbeat is a lease round's first request, its one call in the run's
// plan, or the end of a renewal.
func (e *env) heartbeat(ctx context.Context, relayID string, now time.Time, keepsAhead bool, next func(context.Context, string, time.Time, bool) (bool, error)) (bool, error) {
	e.mu.Lock()
	rn := e.renewal
	e.renewal = leaseRenewal{}
	e.mu.Unlock()
	if rn.pending {
		if e.dead.Load() {
			return false, errCrashed
		}
		recorded, err := next(ctx, relayID, now, keepsAhead)
		ret := e.sim.clock.Now()
		if err != nil {
			e.sim.trace.add("renew-error", e.id, -1, "buckets=%v: %v", rn.buckets, err)
		} else {
			e.sim.leases.renewed(e.id, rn.ref, ret, rn.buckets)
			e.sim.trace.add("renew", e.id, -1, "host=%s buckets=%v", e.sim.hostOffset(rn.ref), rn.buckets)
		}
		return recorded, err
	}
	return call(e, "acquire", func() (bool, error) {
		e.mu.Lock()
		e.round = leaseRound{active: true, ref: e.clock.Now(), start: e.sim.clock.Now()}
		e.mu.Unlock()
		e.sim.joined(e)
		return next(ctx, relayID, now, keepsAhead)
	})
}

// roundEnded is the relay's report of a lease round (envHook): what its
// relay now believes it holds, from the round's start.
func (e *env) roundEnded(acq lease.Acquisition, err error) {
	e.mu.Lock()
	r := e.round
	e.round = leaseRound{}
	e.mu.Unlock()
	if !r.active {
		return // refused before its heartbeat: the process is gone
	}
	if err != nil {
		e.sim.leases.dropped(e.id, r.start)
		e.sim.trace.add("acquire-error", e.id, -1, "%v", err)
		return
	}
	ref, ret := r.ref, e.sim.clock.Now()
	if u := acq.UnrenewedExpiry; !u.IsZero() && u.Add(-e.sim.cfg.LeaseDuration).Before(ref) {
		// Leases the round left unrenewed last only until their stored
		// expiry: the relay trusts them that long, no longer.
		ref = u.Add(-e.sim.cfg.LeaseDuration)
	}
	e.sim.leases.acquired(e.id, e.clock, ref, r.start, ret, acq.Owned, acq.Claimed)
	e.sim.noteRound(r.start)
	e.sim.trace.add("acquire", e.id, -1, "host=%s owned=%v claimed=%v released=%v lost=%v refused=%d heartbeat_refused=%v",
		e.sim.hostOffset(ref), acq.Owned, acq.Claimed, acq.Released, acq.Lost, acq.Refused, acq.HeartbeatRefused)
}

// snapshot, heartbeats and prune are a round's requests after its
// heartbeat: refused once the process is gone.
func (e *env) snapshot(ctx context.Context, next func(context.Context) (lease.Coordination, error)) (lease.Coordination, error) {
	if e.dead.Load() {
		return lease.Coordination{}, errCrashed
	}
	return next(ctx)
}

func (e *env) heartbeats(ctx context.Context, next func(context.Context) ([]lease.RelayState, error)) ([]lease.RelayState, error) {
	if e.dead.Load() {
		return nil, errCrashed
	}
	return next(ctx)
}

func (e *env) prune(ctx context.Context, relayID string, p lease.PruneWrite, next func(context.Context, string, lease.PruneWrite) int) int {
	if e.dead.Load() {
		return 0
	}
	return next(ctx, relayID, p)
}

// writeLeases is a round's lease writes, or a renewal's, which is its one
// call in the run's plan.
func (e *env) writeLeases(ctx context.Context, relayID string, op lease.Op, writes []lease.Write, next func(context.Context, string, lease.Op, []lease.Write) ([]int, []int, error)) (accepted, refused []int, err error) {
	if op != lease.OpRenew {
		if e.dead.Load() {
			return nil, nil, errCrashed
		}
		return next(ctx, relayID, op, writes)
	}
	buckets := make([]int, len(writes))
	for i, w := range writes {
		buckets[i] = w.Bucket
	}
	_, err = call(e, "renew", func() (struct{}, error) {
		if e.renewThrottled.Load() {
			e.sim.trace.add("renew-error", e.id, -1, "buckets=%v: throttled while a late park is held", buckets)
			return struct{}{}, errThrottledRenewal
		}
		ref, start := e.clock.Now(), e.sim.clock.Now()
		var err error
		accepted, refused, err = next(ctx, relayID, op, writes)
		switch {
		case err != nil:
			e.sim.trace.add("renew-error", e.id, -1, "buckets=%v: %v", buckets, err)
		case len(refused) > 0:
			e.sim.leases.dropped(e.id, start)
			e.sim.trace.add("renew-refused", e.id, -1, "buckets=%v", buckets)
		default:
			e.mu.Lock()
			e.renewal = leaseRenewal{pending: true, ref: ref, start: start, buckets: buckets}
			e.mu.Unlock()
		}
		return struct{}{}, err
	})
	if err != nil {
		return nil, nil, err
	}
	return accepted, refused, nil
}

func (e *env) releaseLeases(ctx context.Context, relayID string, next func(context.Context, string) (lease.Release, error)) (lease.Release, error) {
	e.sim.leases.dropped(e.id, e.sim.clock.Now())
	rel, err := next(ctx, relayID)
	e.sim.trace.add("release", e.id, -1, "released=%v refused=%d unfinished=%v err=%v", rel.Released, rel.Refused, rel.Unfinished, err)
	return rel, err
}

// envHook is e's relay's hook: the end of its lease rounds.
type envHook struct{ e *env }

// OnRound implements outbox.HookLease.
func (h envHook) OnRound(_ string, _ time.Duration, acq lease.Acquisition, err error) {
	h.e.roundEnded(acq, err)
}

// OnLeases implements outbox.HookLease.
func (envHook) OnLeases(string, int, int, int) {}

// OnLeaseLost implements outbox.HookLease.
func (envHook) OnLeaseLost(string, int, outbox.LossReason) {}

// OnReleaseSkipped implements outbox.HookLease.
func (envHook) OnReleaseSkipped(string, int) {}

// pendingBuckets, fetchBatch and backlog are the calls an armed late
// round delays (runLate).
func (e *env) pendingBuckets(ctx context.Context, buckets []int, next func(context.Context, []int) ([]int, error)) ([]int, error) {
	e.runLate("pending")
	return next(ctx, buckets)
}

func (e *env) fetchBatch(ctx context.Context, bucket, max int, next func(context.Context, int, int) ([]outbox.Message, error)) ([]outbox.Message, error) {
	e.runLate("fetch")
	return next(ctx, bucket, max)
}

func (e *env) backlog(ctx context.Context, next func(context.Context) (outbox.Backlog, error)) (outbox.Backlog, error) {
	e.runLate("backlog")
	return next(ctx)
}

func (e *env) markPublished(ctx context.Context, bucket int, msgs []outbox.Message, next func(context.Context, int, []outbox.Message) error) error {
	e.leaseLeft("delete", bucket, msgs)
	err := next(ctx, bucket, msgs)
	e.sim.trace.add("delete", e.id, bucket, "%s err=%v", seqRange(msgs), err)
	return err
}

// leaseLeft returns how much of e's lease on bucket its clock shows left
// now, and whether it believes it holds the bucket; a call op for msgs
// outside the lease (a stall between the engine's check and the call) is
// counted and traced.
func (e *env) leaseLeft(op string, bucket int, msgs []outbox.Message) (time.Duration, bool) {
	left, held := e.sim.leases.left(e.id, bucket, e.sim.clock.Now())
	if !held {
		e.sim.outsideLease.Add(1)
		e.sim.trace.add("late-"+op, e.id, bucket, "%s of %s outside the relay's lease", op, seqRange(msgs))
	}
	return left, held
}

// park runs a park through the run's crash and pause plan (call); an
// armed park-lost fault makes this park's transaction apply and its
// response be lost, its retries throttled.
func (e *env) park(ctx context.Context, p outbox.Parking, next func(context.Context, outbox.Parking) error) error {
	if p.Behind == 0 {
		// The first park of its key: a late one hides the key from the
		// next holder (a park behind a parked message does not).
		var landed func()
		ctx, landed = e.sim.holdPark(ctx, e, p.Bucket)
		defer landed()
	}
	_, err := call(e, "park", func() (struct{}, error) {
		e.sim.slowPark(e, p.Bucket)
		lost := take(&e.sim.parkLosses)
		if lost {
			ctx = e.sim.ddb.Faults.LoseResponseIn(ctx, "TransactWriteItems", parkThrottles)
		}
		err := next(ctx, p)
		if lost && err != nil {
			e.sim.hit(causeParkLost, 1)
		}
		e.sim.trace.add("park", e.id, p.Bucket, "row %d reason=%s behind=%d response lost=%v err=%v", p.Sequence, p.Reason, p.Behind, lost, err)
		if err == nil && e.blockPolicy() {
			e.sim.hit(causeBlockHolds, 1)
		}
		return struct{}{}, err
	})
	return err
}

// parkedKeys reads a parked partition; a late park another relay holds
// for the bucket lands right after the read.
func (e *env) parkedKeys(ctx context.Context, bucket int, next func(context.Context, int) (outbox.ParkedSet, error)) (outbox.ParkedSet, error) {
	set, err := next(ctx, bucket)
	e.sim.parkedRead(e, bucket)
	return set, err
}

// errThrottledRenewal is a renewal refused by throttling (FaultParkLate).
var errThrottledRenewal = errors.New("fleetsim: RenewLeases throttled (ProvisionedThroughputExceededException)")

// deleteReplayed counts the replays a relay under PoisonBlock carried out.
func (e *env) deleteReplayed(ctx context.Context, bucket int, msgs []outbox.Message, next func(context.Context, int, []outbox.Message) error) error {
	err := next(ctx, bucket, msgs)
	if err == nil && e.blockPolicy() {
		e.sim.hit(causeBlockHolds, len(msgs))
		e.sim.trace.add("replayed", e.id, bucket, "%s under block", seqRange(msgs))
	}
	return err
}

// blockPolicy reports whether e's relay runs under PoisonBlock beside a
// quarantining fleet (FaultBlockHolds).
func (e *env) blockPolicy() bool { return e.function == fnHold && e.sim.cfg.has(FaultBlockHolds) }

func (e *env) Init(ctx context.Context) error {
	_, err := call(e, "kafka-init", func() (struct{}, error) {
		err := e.kafka.Init(ctx)
		if err != nil {
			e.sim.trace.add("kafka-init", e.id, -1, "%v", err)
		}
		return struct{}{}, err
	})
	return err
}

func (e *env) Publish(ctx context.Context, msgs []outbox.Message) (int, error) {
	if len(msgs) == 0 {
		return call(e, "publish", func() (int, error) { return e.publish(ctx, msgs, -1) })
	}
	bucket := msgs[0].Bucket()
	return bucketCall(ctx, e, bucket, "publish", func() (int, error) { return e.publish(ctx, msgs, bucket) })
}

// publish checks the relay's lease on bucket (-1: none) and publishes msgs.
func (e *env) publish(ctx context.Context, msgs []outbox.Message, bucket int) (int, error) {
	if bucket >= 0 {
		if left, held := e.leaseLeft("publish", bucket, msgs); held {
			e.sim.notePublishMargin(e, bucket, left)
		}
	}
	acked, err := e.kafka.Publish(ctx, msgs)
	e.sim.trace.add("publish", e.id, bucket, "%s acked=%d err=%v", seqRange(msgs), acked, err)
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
	if !sleep.For(time.Duration(bucket+1)*bucketStagger, ctx.Done()) {
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
		return fmt.Sprintf("[%d]", msgs[0].Sequence())
	}
	return fmt.Sprintf("[%d..%d](%d)", msgs[0].Sequence(), msgs[len(msgs)-1].Sequence(), len(msgs))
}

// Notify is the Lambda service's asynchronous invoke as the writers and the
// relays see it: it invokes the relay function (outbox.Notifier).
func (s *sim) Notify(_ context.Context, w outbox.WakeUp) error {
	if w.Hop == 0 && len(w.Buckets) > 0 {
		// A writer's commit: its notifier rings the doorbell too.
		s.ring(w.Buckets)
	}
	s.invoke(wakePayload(w))
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

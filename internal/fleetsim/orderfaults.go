package fleetsim

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/internal/sleep"
	"github.com/spillway-dev/spillway/outbox"
)

// The mechanisms of the order menu (Config.OrderFaults); apply starts them.

// parkThrottles is how many retries of a park whose response was lost are
// throttled: more than any retryer's attempts, so the relay sees the park
// fail although it was applied.
const parkThrottles = 10

// lateCalls makes an environment's next fetch, probe or backlog calls
// return late.
type lateCalls struct {
	c    *cause
	left atomic.Int32
	dur  time.Duration
}

// lateRound makes running relay e's next f.n fetch, probe or backlog
// calls return f.dur late: its round runs late while it is not publishing.
func (s *sim) lateRound(e *env, f scheduledFault, now time.Time) {
	l := &lateCalls{c: s.causes.open(causeLateRound, e.linger(), now), dur: f.dur}
	l.left.Store(int32(f.n))
	if old := e.late.Swap(l); old != nil {
		s.causes.closeAt(old.c, now)
	}
}

// runLate delays e's call op when a late round is armed on e.
func (e *env) runLate(op string) {
	l := e.late.Load()
	if l == nil || l.left.Add(-1) < 0 {
		return
	}
	s := e.sim
	s.hit(causeLateRound, 1)
	s.trace.add("late", e.id, -1, "%s returns %v late", op, l.dur)
	sleep.For(l.dur, nil)
	if l.left.Load() <= 0 {
		e.endLate(l)
	}
}

// endLate closes e's late calls l (the current ones when l is nil).
func (e *env) endLate(l *lateCalls) {
	if l == nil {
		l = e.late.Load()
	}
	if l != nil && e.late.CompareAndSwap(l, nil) {
		e.sim.causes.closeAt(l.c, e.sim.clock.Now())
	}
}

// poison refuses f.n produce requests of one partition of topic f.op
// within f.dur: the batch and its head row's retry alone, which the relays
// park. A park-lost fault also loses the response of the next park within
// f.dur.
func (s *sim) poison(f scheduledFault, now time.Time) {
	h := s.refuse(f)
	armed := map[string]*atomic.Int32{causeParkLost: &s.parkLosses, causeParkLate: &s.parkLates}[f.kind]
	if armed != nil {
		armed.Add(1)
	}
	if f.kind == causeParkSlow {
		s.slowParks.Add(1)
		s.at(now.Add(f.dur), func() { s.slowParks.Add(-1) })
	}
	c := s.causes.open(f.kind, 0, now)
	s.at(now.Add(f.dur), func() {
		h.Remove()
		if armed != nil && take(armed) {
			s.trace.add("fault-skipped", "", -1, "%s: no park within %v", f.kind, f.dur)
		}
		s.causes.closeAt(c, s.clock.Now())
		s.trace.add("fault-end", "", -1, "%s: %d of %d refusals", f.kind, h.Hits(), f.n)
	})
}

// lateParkFor bounds how long a late park waits for another relay to read
// its bucket's parked partition.
const lateParkFor = 90 * time.Second

// latePark is a park held in the network (FaultParkLate): it lands when
// another relay read its bucket's parked partition; landed closes after.
type latePark struct {
	env          *env
	land, landed chan struct{}
}

// holdPark holds e's park of bucket back if a park-late fault is armed:
// its renewals are throttled meanwhile, so the lease passes on, and it
// returns when another relay read the bucket's parked partition or
// lateParkFor passed. A held park was sent: it lands whatever its caller
// does meanwhile, so ctx comes back without its cancellation. done must be
// called once the park landed.
func (s *sim) holdPark(ctx context.Context, e *env, bucket int) (context.Context, func()) {
	s.mu.Lock()
	if s.lateParks[bucket] != nil || !take(&s.parkLates) {
		s.mu.Unlock()
		return ctx, func() {}
	}
	lp := &latePark{env: e, land: make(chan struct{}), landed: make(chan struct{})}
	s.lateParks[bucket] = lp
	s.mu.Unlock()
	s.hit(causeParkLate, 1)
	e.renewThrottled.Store(true)
	s.trace.add("park-late", e.id, bucket, "park held until another relay reads the parked partition")
	select {
	case <-lp.land:
	case <-time.After(lateParkFor):
	}
	s.mu.Lock()
	if s.lateParks[bucket] == lp {
		delete(s.lateParks, bucket)
	}
	s.mu.Unlock()
	e.renewThrottled.Store(false)
	return context.WithoutCancel(ctx), func() { close(lp.landed) }
}

// parkedRead lets a late park of bucket by another relay land once e read
// the bucket's parked partition, and waits until it did.
func (s *sim) parkedRead(e *env, bucket int) {
	s.mu.Lock()
	lp := s.lateParks[bucket]
	if lp == nil || lp.env == e {
		s.mu.Unlock()
		return
	}
	delete(s.lateParks, bucket)
	s.mu.Unlock()
	close(lp.land)
	<-lp.landed
}

// parkSlowFor is how long a park takes while a park-slow fault lasts:
// five of them outlast the lease.
const parkSlowFor = 7 * time.Second

// slowPark delays e's park while a park-slow fault lasts.
func (s *sim) slowPark(e *env, bucket int) {
	if s.slowParks.Load() == 0 {
		return
	}
	s.hit(causeParkSlow, 1)
	s.trace.add("park-slow", e.id, bucket, "park takes %v", parkSlowFor)
	sleep.For(parkSlowFor, nil)
}

// take consumes one armed fault of the count n, if any.
func take(n *atomic.Int32) bool {
	for v := n.Load(); v > 0; v = n.Load() {
		if n.CompareAndSwap(v, v-1) {
			return true
		}
	}
	return false
}

// replay is the operator's `spillway parked replay --all --yes` on a
// goroutine of its own, while the writers go on: ListParked, then
// RequestReplay.
func (s *sim) replay() {
	c := s.causes.open(causeReplay, 0, s.clock.Now())
	s.replays.Add(1)
	s.wgReplay.Go(func() {
		defer s.replays.Add(-1)
		defer func() { s.causes.closeAt(c, s.clock.Now()) }()
		parked, err := s.replayStore.ListParked(s.ctx)
		n := 0
		if err == nil && len(parked) > 0 {
			// As the operator's CLI does: mark them for the relay
			// holding their bucket, which publishes a key's marked
			// messages before its later ones (RequestReplay), and wake
			// the marked buckets, where a relay may have nothing else
			// to do.
			n, err = s.replayStore.RequestReplay(s.ctx, parked, "")
			buckets := make([]int, len(parked))
			for i, p := range parked {
				buckets[i] = p.Bucket
			}
			s.invoke(wakePayload(outbox.WakeUp{Buckets: union(buckets)}))
		}
		s.hit(causeReplay, n)
		s.trace.add("replay", "", -1, "%d parked, %d replayed, err=%v", len(parked), n, err)
	})
}

// replayWhileParked replays every parked message each replayEvery until
// none is left: the operator's replays after the writes ended.
func (s *sim) replayWhileParked() {
	if n, err := s.countPartitions(s.ctx, "PARKED"); err == nil && n > 0 && s.replays.Load() == 0 {
		s.replay()
	}
	s.at(s.clock.Now().Add(replayEvery), s.replayWhileParked)
}

// replayEvery is the period of the replays after the writes ended.
const replayEvery = 20 * time.Second

// hit counts an order fault that took effect.
func (s *sim) hit(kind string, n int) {
	if n > 0 {
		s.count(s.rep.FaultsHit, kind, n)
	}
}

package fleetsim

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway-dev/spillway/outbox"
)

// The mechanisms of the order menu (Config.OrderFaults); apply starts them.

// handoverYields bounds how long a held hand-over waits for the broker's
// answer to the batch of the record before it, in scheduler rounds rather
// than on the clock: the environment's other publishes wait for the
// hand-over on a mutex, which keeps the bubble's clock from moving, and a
// client that sends while records are handed over needs no simulated time
// to have the answer (the in-memory brokers answer at once). A client
// that sends nothing until the relay's batch is handed over completely
// never answers while the hand-over is held; the fault then misses.
const handoverYields = 10000

// parkThrottles is how many retries of a park whose response was lost are
// throttled: more than any retryer's attempts, so the relay sees the park
// fail although it was applied.
const parkThrottles = 10

// handoverHold is a hand-over refusal aimed at one publish: the broker
// refuses the partition batch of record first while record held, a later
// record of the same key, waits to be handed to the client. holding is set
// from first's hand-over until held's.
type handoverHold struct {
	c           *cause
	first, held outbox.MessageID
	holding     atomic.Bool
	answered    chan struct{}
	once        sync.Once
	refused     atomic.Bool
	fault       *kfake.FaultHandle
}

// answer records the client's verdict on record first.
func (h *handoverHold) answer(err error) {
	h.once.Do(func() {
		h.refused.Store(err != nil)
		close(h.answered)
	})
}

// armHandover queues a hand-over refusal for the next publish that holds
// two records of one key.
func (s *sim) armHandover(c *cause) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handovers = append(s.handovers, c)
}

// claimHandover aims an armed hand-over refusal, when the run injects
// them, at e's publish of msgs when they hold two records of one key, and
// installs the broker's refusal: the next produce request for the first
// record's topic while the later record is held. The hold is e's until
// endHandover.
func (s *sim) claimHandover(e *env, msgs []outbox.Message) *handoverHold {
	if !s.cfg.has(FaultHandoverRefusal) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.handovers) == 0 {
		return nil
	}
	i, j, ok := sameKeyPair(msgs)
	if !ok {
		return nil
	}
	h := &handoverHold{c: s.handovers[0], first: msgs[i].ID, held: msgs[j].ID, answered: make(chan struct{})}
	s.handovers = s.handovers[1:]
	h.fault = s.kafka.Cluster.Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.Produce}, Topic: s.kafka.Topic(msgs[i].Topic), Err: kerr.InvalidRecord, Count: 1,
		When: func(kmsg.Request) bool { return h.holding.Load() },
	})
	s.trace.add("handover-armed", e.id, msgs[i].Bucket, "refuse the batch of sequence %d while sequence %d is held", msgs[i].Sequence, msgs[j].Sequence)
	e.hold.Store(h)
	return h
}

// endHandover removes the refusal and records whether it hit.
func (s *sim) endHandover(e *env, h *handoverHold) {
	h.fault.Remove()
	s.causes.closeAt(h.c, s.clock.Now())
	if h.refused.Load() {
		s.hit(causeHandoverRefusal, 1)
	}
	s.trace.add("handover-end", e.id, -1, "refused=%v broker hits=%d", h.refused.Load(), h.fault.Hits())
}

// sameKeyPair returns the first record i of msgs with a later record j of
// the same topic, key and partition.
func sameKeyPair(msgs []outbox.Message) (i, j int, ok bool) {
	for i = range msgs {
		if msgs[i].Key == nil {
			continue
		}
		for j = i + 1; j < len(msgs); j++ {
			if msgs[j].Topic == msgs[i].Topic && bytes.Equal(msgs[j].Key, msgs[i].Key) && samePartition(msgs[i].Partition, msgs[j].Partition) {
				return i, j, true
			}
		}
	}
	return 0, 0, false
}

func samePartition(a, b *int32) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// handoverHook is an environment's Kafka client hook: it holds the hand-over
// of the aimed publish's later record until the client has the broker's
// answer on the earlier one.
type handoverHook struct{ e *env }

var (
	_ kgo.HookProduceRecordBuffered   = handoverHook{}
	_ kgo.HookProduceRecordUnbuffered = handoverHook{}
)

// OnProduceRecordBuffered runs in Produce, before the record is buffered:
// from the first record's hand-over the broker refuses the topic's next
// batch, and the held record's hand-over waits for the client to have the
// broker's answer on the first.
func (k handoverHook) OnProduceRecordBuffered(r *kgo.Record) {
	h := k.e.hold.Load()
	id, ok := recordID(r, outbox.DefaultMessageIDHeaderName)
	switch {
	case h == nil || !ok:
	case id == h.first:
		h.holding.Store(true)
	case id == h.held:
		for range handoverYields {
			select {
			case <-h.answered:
			default:
				runtime.Gosched()
				continue
			}
			break
		}
		h.holding.Store(false)
	}
}

// OnProduceRecordUnbuffered runs just before a record's promise.
func (k handoverHook) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	h := k.e.hold.Load()
	if id, ok := recordID(r, outbox.DefaultMessageIDHeaderName); h != nil && ok && id == h.first {
		h.answer(err)
	}
}

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
	l := &lateCalls{c: s.causes.open(causeLateRound, e.id, e.linger(), now), dur: f.dur}
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
	outbox.Sleep(l.dur, nil)
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
	h := s.kafka.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: s.kafka.Topic(f.op),
		Partitions: []int32{int32(f.pick % simPartitions)}, Err: kerr.InvalidRecord, Count: f.n})
	if f.kind == causeParkLost {
		s.mu.Lock()
		s.parkLosses++
		s.mu.Unlock()
	}
	c := s.causes.open(f.kind, "", 0, now)
	s.at(now.Add(f.dur), func() {
		h.Remove()
		if f.kind == causeParkLost && s.takeParkLoss() {
			s.trace.add("fault-skipped", "", -1, "%s: no park within %v", f.kind, f.dur)
		}
		s.causes.closeAt(c, s.clock.Now())
		s.trace.add("fault-end", "", -1, "%s: %d of %d refusals", f.kind, h.Hits(), f.n)
	})
}

// takeParkLoss consumes an armed park-lost fault.
func (s *sim) takeParkLoss() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parkLosses == 0 {
		return false
	}
	s.parkLosses--
	return true
}

// replay is the operator's `spillway parked replay --all --yes` on a
// goroutine of its own, while the writers go on: ListParked, then
// RequestReplay.
func (s *sim) replay() {
	c := s.causes.open(causeReplay, "", 0, s.clock.Now())
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
			var buckets []int
			for _, p := range parked {
				buckets = union(buckets, []int{p.Bucket})
			}
			s.invoke(wakePayload(outbox.WakeUp{Buckets: buckets}))
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

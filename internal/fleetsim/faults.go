package fleetsim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// scheduledFault is one fault of the seed's schedule. Crashes, pauses,
// short budgets and large skews are drawn per invocation and environment
// instead (lambda.go).
type scheduledFault struct {
	at   time.Duration
	kind string
	// Parameters; which ones a kind reads is in apply.
	op    string
	n     int
	dur   time.Duration
	pick  int
	kafka *kerr.Error
}

func (f scheduledFault) String() string {
	var b strings.Builder
	b.WriteString(f.kind)
	if f.op != "" {
		fmt.Fprintf(&b, " op=%s", f.op)
	}
	if f.n > 0 {
		fmt.Fprintf(&b, " n=%d", f.n)
	}
	if f.dur > 0 {
		fmt.Fprintf(&b, " for=%v", f.dur)
	}
	if f.kafka != nil {
		topic, partition := f.partition()
		fmt.Fprintf(&b, " error=%s partition=%s/%d", f.kafka.Message, topic, partition)
	}
	return b.String()
}

// partition returns the topic and partition whose batches a Kafka produce
// fault refuses: a poison fault's drawn topic (op), else the pick's.
func (f scheduledFault) partition() (string, int32) {
	if f.op != "" {
		return f.op, int32(f.pick % simPartitions)
	}
	return simTopics[f.pick%len(simTopics)], int32(f.pick / len(simTopics) % simPartitions)
}

// refuse makes the partition of Kafka fault f refuse its next f.n
// produce requests with f.kafka. A client sends to several brokers at one
// instant, so a fault on whichever request came first would leave the
// choice of its victim to the scheduler; one client sends a partition's
// batches in order, on one connection.
func (s *sim) refuse(f scheduledFault) *kfake.FaultHandle {
	topic, partition := f.partition()
	return s.kafka.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: s.kafka.Topic(topic), Partitions: []int32{partition}, Err: f.kafka, Count: f.n})
}

// faultQuietBefore keeps the end of a churn phase free of new faults.
const faultQuietBefore = 20 * time.Second

// faultWeight is a fault kind, its weight in the draw, and the order fault
// that turns it on ("": the base menu's).
type faultWeight struct {
	kind string
	w    int
	on   OrderFault
}

// faultMenu is every scheduled fault kind, in the order of the draw.
var faultMenu = []faultWeight{
	{causeThrottle, 20, ""}, {causeUnprocessed, 12, ""}, {causeLostResponse, 10, ""},
	{causeKafkaRetriable, 12, ""}, {causeKafkaFatal, 8, ""}, {causeBrokerRestart, 5, ""},
	{causeLeaderChange, 5, ""}, {causeClockStep, 6, ""},
	{causeLateRound, 10, FaultLateRound}, {causeMixedSkew, 6, FaultMixedSkew},
	{causePoison, 8, FaultQuarantineReplay}, {causeReplay, 8, FaultQuarantineReplay},
	{causeParkLost, 8, FaultParkLost}, {causeParkLate, 8, FaultParkLate}, {causeParkSlow, 8, FaultParkSlow},
}

// genFaults draws the fault schedule of the churn phases.
func genFaults(cfg Config, phases []phase) []scheduledFault {
	r := newRand(cfg.Seed, "faults")
	var weights []faultWeight
	total := 0
	for _, w := range faultMenu {
		if w.on == "" || cfg.has(w.on) {
			weights = append(weights, w)
			total += w.w
		}
	}
	var out []scheduledFault
	for _, ph := range phases {
		if ph.steady {
			continue
		}
		// Faults end before a steady phase starts: its relays must find a
		// healthy system.
		last := ph.end
		if ph.end < cfg.WriteDuration {
			last = ph.end - faultQuietBefore
		}
		for t := ph.start + expDuration(r, 6*time.Second); t < last; t += expDuration(r, 6*time.Second) {
			x := r.IntN(total)
			kind := ""
			for _, w := range weights {
				if x < w.w {
					kind = w.kind
					break
				}
				x -= w.w
			}
			out = append(out, drawFault(cfg, r, ph, t, kind))
		}
	}
	return out
}

// drawFault draws the parameters of a fault of kind at t in phase ph.
func drawFault(cfg Config, r *rand.Rand, ph phase, t time.Duration, kind string) scheduledFault {
	f := scheduledFault{at: t, kind: kind, pick: r.IntN(1 << 20)}
	switch kind {
	case causeThrottle:
		f.op = []string{"Query", "PutItem", "UpdateItem", "BatchWriteItem", "TransactWriteItems"}[r.IntN(5)]
		f.n = 1 + r.IntN(5) // from 3 on, beyond the client's attempts
	case causeUnprocessed:
		f.n = 1 + r.IntN(25)
	case causeLostResponse:
		f.op = []string{"PutItem", "UpdateItem", "BatchWriteItem", "TransactWriteItems"}[r.IntN(4)]
	case causeKafkaRetriable:
		f.n = 1 + r.IntN(3)
		f.kafka = []*kerr.Error{kerr.NotLeaderForPartition, kerr.RequestTimedOut, kerr.NotEnoughReplicas}[r.IntN(3)]
	case causeKafkaFatal:
		f.n = 1
		f.kafka = []*kerr.Error{kerr.InvalidRecord, kerr.TopicAuthorizationFailed}[r.IntN(2)]
	case causeBrokerRestart:
		f.dur = min(uniform(r, 500*time.Millisecond, 15*time.Second), max(ph.end-t-faultQuietBefore/2, time.Second))
	case causeClockStep:
		f.dur = uniform(r, cfg.RenewInterval, 2*cfg.RenewInterval)
	case causeLateRound:
		// Past the renew interval, once or twice in a row: two such
		// calls let a lease left with outbox.KeepMargin lapse.
		f.n = 1 + r.IntN(2)
		f.dur = uniform(r, cfg.RenewInterval+cfg.RenewInterval/5, 2*cfg.RenewInterval)
	case causeMixedSkew:
		f.dur = min(uniform(r, 30*time.Second, 90*time.Second), max(ph.end-t-faultQuietBefore/2, time.Second))
	case causePoison, causeParkLost, causeParkLate, causeParkSlow:
		// The batch's refusal and the head row's retry alone: the head
		// row is parked as an invalid record. The partition refuses for a
		// while at most, whoever produces to it.
		f.n, f.kafka = 2, kerr.InvalidRecord
		f.op = simTopics[r.IntN(len(simTopics))]
		f.dur = min(poisonFor, max(ph.end-t-faultQuietBefore/2, time.Second))
	}
	return f
}

// poisonFor bounds how long a poison fault's partition refuses: the
// relays' head-row retry comes within it.
const poisonFor = 30 * time.Second

// expDuration draws an exponentially distributed gap of the given mean.
func expDuration(r *rand.Rand, mean time.Duration) time.Duration {
	return time.Duration(r.ExpFloat64() * float64(mean))
}

// pendingFault is an injected fault whose effect is still to come: it
// lasts until done reports it consumed.
type pendingFault struct {
	c    *cause
	done func(outboxlocal.Counts) bool
}

// errBrokerDown closes a client connection during a broker restart.
var errBrokerDown = errors.New("fleetsim: broker restarting")

// apply injects f now.
func (s *sim) apply(f scheduledFault) {
	now := s.clock.Now()
	s.count(s.rep.Faults, f.kind, 1)
	s.trace.add("fault", "", -1, "%s", f)
	switch f.kind {
	case causeThrottle, causeUnprocessed, causeLostResponse:
		// Consumed once the op's requests since now reach n: every
		// throttled attempt, the batch that got unprocessed deletes, the
		// request whose response was lost.
		op, n := f.op, 1
		switch f.kind {
		case causeThrottle:
			n = f.n
			s.ddb.Faults.ThrottleNext(op, n)
		case causeUnprocessed:
			op = "BatchWriteItem"
			s.ddb.Faults.UnprocessedDeletes(f.n)
		default:
			s.ddb.Faults.LoseResponse(op)
		}
		base := s.ddb.Counter.Snapshot().Requests[op]
		s.pendingUntil(f.kind, now, func(c outboxlocal.Counts) bool { return c.Requests[op] >= base+n })
	case causeKafkaRetriable, causeKafkaFatal:
		h := s.refuse(f)
		s.pendingUntil(f.kind, now, func(outboxlocal.Counts) bool { return h.Hits() >= f.n })
	case causeLeaderChange:
		if err := s.placeLeaders(newRand(s.cfg.Seed, "leaders", uint64(f.pick))); err != nil {
			s.fail(violation("fault injection", -1, "%v", err))
		}
		s.causes.instant(f.kind, 0, now)
	case causeBrokerRestart:
		c := s.causes.open(f.kind, 0, now)
		s.setKafkaDown(true)
		s.at(now.Add(f.dur), func() {
			s.setKafkaDown(false)
			s.causes.closeAt(c, s.clock.Now())
			s.trace.add("fault-end", "", -1, "%s", f.kind)
		})
	case causeMixedSkew:
		// A hold relay that keeps every round, its clock ahead (newEnv),
		// as a long-running relay of another language, and one of
		// Spillway's beside it: both join at once and share the buckets.
		s.wakeHolds(holdRun{budget: f.dur, plain: true}, holdRun{budget: f.dur})
	case causePoison, causeParkLost, causeParkLate, causeParkSlow:
		s.poison(f, now)
	case causeReplay:
		s.replay()
	case causeLateRound, causeClockStep:
		e := s.pickRunning(f.pick)
		switch {
		case e == nil:
			s.trace.add("fault-skipped", "", -1, "%s: no running relay", f.kind)
			return
		case f.kind == causeLateRound:
			s.lateRound(e, f, now)
			return
		}
		c := s.causes.open(f.kind, e.linger(), now)
		e.clock.step(-f.dur)
		s.trace.add("clock-step", e.id, -1, "host clock set back by %v (skew now %v)", f.dur, e.clock.skew())
		if s.outOfTolerance(e, c) {
			return
		}
		// The host reads again what it read before the step once f.dur
		// has passed; the fleet agrees again within settle after that.
		s.at(now.Add(f.dur), func() { s.causes.closeAt(c, s.clock.Now()) })
	}
}

// pendingUntil records a fault that lasts until done.
func (s *sim) pendingUntil(kind string, now time.Time, done func(outboxlocal.Counts) bool) {
	c := s.causes.open(kind, 0, now)
	s.mu.Lock()
	s.pending = append(s.pending, pendingFault{c: c, done: done})
	s.mu.Unlock()
}

// settleFaults closes the pending faults that counts show consumed.
func (s *sim) settleFaults(counts outboxlocal.Counts, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = slices.DeleteFunc(s.pending, func(p pendingFault) bool {
		if p.done(counts) {
			s.causes.closeAt(p.c, now)
			return true
		}
		return false
	})
}

// pickRunning returns a running relay-function environment chosen by pick,
// or nil.
func (s *sim) pickRunning(pick int) *env {
	s.mu.Lock()
	defer s.mu.Unlock()
	var running []*env
	for _, e := range s.envs {
		if e.function == fnRelay && e.running() && !e.dead.Load() {
			running = append(running, e)
		}
	}
	if len(running) == 0 {
		return nil
	}
	slices.SortFunc(running, func(a, b *env) int { return strings.Compare(a.id, b.id) })
	return running[pick%len(running)]
}

// placeLeaders moves the leader of every partition to a broker drawn from
// r: kfake draws its own from an unseeded generator, when it creates a
// topic and in ShufflePartitionLeaders, and the leaders decide which
// records share a produce request.
func (s *sim) placeLeaders(r *rand.Rand) error {
	for _, topic := range simTopics {
		for p := range int32(simPartitions) {
			if err := s.kafka.Cluster.MoveTopicPartition(s.kafka.Topic(topic), p, int32(r.IntN(simBrokers))); err != nil {
				return fmt.Errorf("fleetsim: place the leader of %s/%d: %w", topic, p, err)
			}
		}
	}
	return nil
}

// setKafkaDown starts or ends a broker restart: while down, every request
// to every broker has its connection closed.
func (s *sim) setKafkaDown(down bool) {
	if s.kafkaDown.Swap(down) == down || !down {
		return
	}
	cl := s.kafka.Cluster
	cl.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		if s.kafkaDown.Load() {
			cl.KeepControl()
			return nil, errBrokerDown, true
		}
		cl.DropControl()
		return nil, nil, false
	})
}

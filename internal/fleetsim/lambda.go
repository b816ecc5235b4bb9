package fleetsim

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
)

// Functions of the simulated deployment.
const (
	// fnRelay is the relay function: drain mode, triggered by the schedule,
	// writer wake-ups and continuations, bounded by Config.Concurrency.
	fnRelay = "relay"
	// fnHold is a second relay function in hold mode that steady phases
	// start directly, one environment per relay.
	fnHold = "hold"
)

// Relay timings shared by every simulated relay besides L and I.
const (
	pollInterval = time.Second
	idleTimeout  = 2 * time.Second
	stopMargin   = 5 * time.Second
	maxHops      = 8
	// asyncLatency is the delay of an asynchronous invoke.
	asyncLatency = 100 * time.Millisecond
)

// invocation is one asynchronous invoke of the relay function.
type invocation struct {
	trigger outbox.Trigger
	buckets []int
	hop     int
	join    bool
	source  string
	readyAt time.Time
}

// runPlan is the fate the seed gives one invocation.
type runPlan struct {
	budget time.Duration
	// crashAt is the 1-based environment call at which the process dies
	// (0: never); crashAfter: the call is sent and its response lost.
	crashAt    int64
	crashAfter bool
	// pauseAt is the call before which the process stalls for pauseFor.
	pauseAt  int64
	pauseFor time.Duration
}

// env is one execution environment: a relay id, a host clock, a Store, a
// Kafka client and a Relay, reused by the warm invocations it serves.
type env struct {
	sim       *sim
	id        string
	function  string
	clock     *hostClock
	store     *relayStore
	kafka     *outboxkafka.Publisher
	relay     *outbox.Relay
	largeSkew bool
	skewCause *cause

	dead   atomic.Bool
	closed atomic.Bool
	run    atomic.Pointer[runState]

	// Guarded by sim.mu.
	busy   bool
	reapAt time.Time
	runs   int
}

// newEnv starts an execution environment (a cold start).
func (s *sim) newEnv(function string) (*env, error) {
	s.mu.Lock()
	s.envSerial++
	n := s.envSerial
	s.mu.Unlock()
	r := newRand(s.cfg.Seed, "env", uint64(n))
	tol := s.cfg.tolerableSkew()
	skew := uniform(r, -tol/2, tol/2)
	large := false
	if function == fnRelay && s.cfg.Faults && !s.steadyAt(s.clock.Now()) && r.IntN(100) < 8 {
		large = true
		skew = uniform(r, tol+2*time.Second, 2*s.cfg.LeaseDuration)
		if r.IntN(2) == 0 {
			skew = -skew
		}
	}
	prefix := "r"
	if function == fnHold {
		prefix = "h"
	}
	e := &env{sim: s, id: fmt.Sprintf("%s%04x-%03d", prefix, r.IntN(0x10000), n), function: function, largeSkew: large}
	e.clock = newHostClock(s.clock, s.act, skew)
	storeOpts := s.storeOpts
	storeOpts.Clock = e.clock
	store, err := outboxddb.NewStore(s.client, storeOpts)
	if err != nil {
		return nil, err
	}
	e.store = &relayStore{env: e, inner: store}
	kp, err := outboxkafka.New(outboxkafka.Config{
		Brokers:   s.kafka.Brokers,
		ClientID:  e.id,
		Clock:     e.clock,
		ExtraOpts: s.kafka.ClientOpts(),
	})
	if err != nil {
		return nil, err
	}
	e.kafka = kp
	mode := outbox.ModeDrain
	if function == fnHold {
		mode = outbox.ModeHold
	}
	relay, err := outbox.NewRelay(outbox.RelayConfig{
		Options: outbox.RelayOptions{
			RelayID:            e.id,
			BucketCount:        s.cfg.BucketCount,
			BatchSize:          []int{5, 20, 50, 100}[r.IntN(4)],
			LeaseDuration:      s.cfg.LeaseDuration,
			LeaseRenewInterval: s.cfg.RenewInterval,
			PollInterval:       pollInterval,
			IdleTimeout:        idleTimeout,
			StopMargin:         stopMargin,
			MaxConcurrency:     1 + r.IntN(4),
			Mode:               mode,
		},
		Store:     e.store,
		Publisher: &relayPublisher{env: e, inner: kp},
		Clock:     e.clock,
		Notifier:  notifier{sim: s, source: "continuation"},
		Observer:  s.obs,
		Logger:    slog.New(slog.DiscardHandler),
		MaxHops:   maxHops,
	})
	if err != nil {
		kp.Close()
		return nil, err
	}
	e.relay = relay
	if large {
		e.skewCause = s.causes.open(causeLargeSkew, e.id, s.clock.Now())
	}
	s.trace.add("env-start", e.id, -1, "function=%s skew=%v large=%v", function, skew, large)
	return e, nil
}

// invoke queues an asynchronous invocation of the relay function; it can
// start asyncLatency later, as Lambda's event queue delivers it. Queued
// wake-ups are coalesced, as a busy function's queue would deliver them;
// at most one schedule sweep waits.
func (s *sim) invoke(inv invocation) {
	s.act.poke()
	s.mu.Lock()
	s.invocations++
	for i := range s.queue {
		q := &s.queue[i]
		if q.trigger != inv.trigger {
			continue
		}
		if inv.trigger == outbox.TriggerWake {
			q.buckets = union(q.buckets, inv.buckets)
			if len(inv.buckets) == 0 {
				q.buckets = nil
			}
			q.hop = min(q.hop, inv.hop)
			q.join = q.join || inv.join
		}
		s.mu.Unlock()
		return
	}
	inv.readyAt = s.clock.Now().Add(asyncLatency)
	s.queue = append(s.queue, inv)
	s.mu.Unlock()
	// The driver stops when the invocation is due.
	s.at(inv.readyAt, func() {})
}

func union(a, b []int) []int {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out
}

// dispatch starts queued invocations on idle environments, warm ones first,
// cold ones while the concurrency allows. It reports whether it started any.
// During a steady phase the relay function is throttled (reserved
// concurrency 0): its events wait, coalesced, as Lambda keeps throttled
// asynchronous events, and the hold relays have the table to themselves.
func (s *sim) dispatch() (bool, error) {
	if s.steadyAt(s.clock.Now()) {
		return false, nil
	}
	started := false
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return started, nil
		}
		var e *env
		for i := len(s.pool) - 1; i >= 0; i-- {
			if !s.pool[i].busy {
				e = s.pool[i]
				break
			}
		}
		if e == nil && len(s.pool) >= s.cfg.Concurrency {
			s.mu.Unlock()
			return started, nil
		}
		now := s.clock.Now()
		i := slices.IndexFunc(s.queue, func(q invocation) bool { return !q.readyAt.After(now) })
		if i < 0 {
			s.mu.Unlock()
			return started, nil
		}
		inv := s.queue[i]
		s.queue = slices.Delete(s.queue, i, i+1)
		s.mu.Unlock()
		if e == nil {
			var err error
			if e, err = s.newEnv(fnRelay); err != nil {
				return started, err
			}
			s.mu.Lock()
			s.pool = append(s.pool, e)
			s.mu.Unlock()
		}
		s.startRun(e, inv, s.drawPlan())
		started = true
	}
}

// drawPlan draws the next invocation's budget and fate.
func (s *sim) drawPlan() runPlan {
	s.mu.Lock()
	s.invSerial++
	n := s.invSerial
	s.mu.Unlock()
	r := newRand(s.cfg.Seed, "invocation", uint64(n))
	var p runPlan
	switch x := r.IntN(100); {
	case x < 10:
		p.budget = uniform(r, 300*time.Millisecond, 4*time.Second) // often too short to release
	case x < 35:
		p.budget = uniform(r, 4*time.Second, 20*time.Second)
	default:
		p.budget = uniform(r, 20*time.Second, 45*time.Second)
	}
	crash, pause := r.IntN(100), r.IntN(100)
	crashAt, crashAfter := 1+r.Int64N(40), r.IntN(2) == 0
	pauseAt, pauseFor := 1+r.Int64N(40), uniform(r, s.cfg.LeaseDuration/2, 2*s.cfg.LeaseDuration)
	if !s.cfg.Faults || s.steadyAt(s.clock.Now()) {
		return p
	}
	if crash < 8 {
		p.crashAt, p.crashAfter = crashAt, crashAfter
	}
	if pause < 6 {
		p.pauseAt, p.pauseFor = pauseAt, pauseFor
	}
	return p
}

// startRun starts one invocation on e, with a kill at its deadline.
func (s *sim) startRun(e *env, inv invocation, plan runPlan) {
	ctx, cancel := context.WithCancel(s.ctx)
	s.mu.Lock()
	e.busy = true
	e.runs++
	s.runSerial++
	run := &runState{n: s.runSerial, inv: inv, plan: plan, cancel: cancel}
	s.activeRuns++
	s.mu.Unlock()
	e.run.Store(run)
	now := s.clock.Now()
	in := outbox.RunInput{Trigger: inv.trigger, Deadline: e.clock.Now().Add(plan.budget), Buckets: inv.buckets, Hop: inv.hop, Join: inv.join}
	s.trace.add("invoke", e.id, -1, "run=%d trigger=%s buckets=%v hop=%d source=%s budget=%v crash_at=%d/%v pause_at=%d/%v warm=%v",
		run.n, inv.trigger, inv.buckets, inv.hop, inv.source, plan.budget, plan.crashAt, plan.crashAfter, plan.pauseAt, plan.pauseFor, e.runs > 1)
	s.at(now.Add(plan.budget), func() {
		if !run.over.Load() {
			s.crash(e, run, causeTimeout, "killed at the deadline")
		}
	})
	go func() {
		res, err := e.relay.Run(ctx, in)
		s.runEnded(e, run, res, err)
	}()
}

// runEnded records the end of a run and returns its environment to the
// pool, or retires a crashed or hold one.
func (s *sim) runEnded(e *env, run *runState, res outbox.RunResult, err error) {
	run.over.Store(true)
	run.cancel()
	now := s.clock.Now()
	if run.joined.Load() && !e.dead.Load() {
		s.causes.instant(causeLeave, e.id, now)
	}
	s.trace.add("run-end", e.id, -1, "run=%d reason=%s joined=%v calls=%d published=%d deleted=%d rounds=%d refused=%d release_skipped=%v work_left=%v wake=%v errors=%d err=%v",
		run.n, res.Reason, res.Joined, run.calls.Load(), res.Published, res.Deleted, res.Rounds, res.Refused, res.ReleaseSkipped, res.WorkLeft, res.WakeUpSent, res.Errors, err)
	if err != nil && outbox.IsMisconfigured(err) {
		s.fail(&Violation{Invariant: "relay runs", Detail: fmt.Sprintf("relay %s run %d returned a misconfiguration: %v", e.id, run.n, err), relays: []string{e.id}, bucket: -1})
	}
	s.mu.Lock()
	s.activeRuns--
	s.stats.runs++
	if res.Joined {
		s.stats.joined++
	}
	if res.ReleaseSkipped {
		s.stats.releaseSkipped++
	}
	if res.Reason == outbox.StopFatal {
		s.stats.fatal++
	}
	e.busy = false
	retire := e.dead.Load() || e.function == fnHold
	if !retire {
		r := newRand(s.cfg.Seed, "reap", uint64(run.n))
		e.reapAt = now.Add(uniform(r, 20*time.Second, 3*time.Minute))
	}
	s.mu.Unlock()
	s.act.poke()
	if retire {
		s.retire(e)
		return
	}
	reapAt := e.reapAt
	s.at(reapAt, func() {
		s.mu.Lock()
		idle := !e.busy && e.reapAt.Equal(reapAt)
		s.mu.Unlock()
		if idle {
			s.trace.add("env-reaped", e.id, -1, "idle since the last run")
			s.retire(e)
		}
	})
}

// retire removes e from the pool and closes its Kafka client.
func (s *sim) retire(e *env) {
	s.mu.Lock()
	s.pool = slices.DeleteFunc(s.pool, func(x *env) bool { return x == e })
	s.mu.Unlock()
	if e.skewCause != nil {
		s.causes.closeAt(e.skewCause, s.clock.Now())
	}
	go e.closeKafka()
}

// closeKafka closes the environment's Kafka client once.
func (e *env) closeKafka() {
	if e.closed.CompareAndSwap(false, true) {
		e.kafka.Close()
	}
}

// joined records the first acquisition of a run: the relay joins the fleet.
func (s *sim) joined(e *env) {
	run := e.run.Load()
	if run != nil && run.joined.CompareAndSwap(false, true) {
		s.causes.instant(causeJoin, e.id, s.clock.Now())
	}
}

// crash kills e's process: no call it makes afterwards reaches a backend,
// its run is cancelled and its Kafka client closed. The leases it holds
// lapse after LeaseDuration.
func (s *sim) crash(e *env, run *runState, kind, why string) {
	if !e.dead.CompareAndSwap(false, true) {
		return
	}
	now := s.clock.Now()
	if run.joined.Load() {
		s.causes.instant(kind, e.id, now)
	}
	s.mu.Lock()
	if kind == causeTimeout {
		s.stats.timeouts++
	} else {
		s.stats.crashes++
	}
	s.mu.Unlock()
	s.trace.add(kind, e.id, -1, "run=%d %s", run.n, why)
	run.cancel()
	// Closing fails the records still buffered, so a publish the crash
	// interrupted returns instead of waiting for delivery.
	go e.closeKafka()
}

// pause stalls the calling goroutine of e for d on the shared clock, as a
// stalled request or a suspended host would; a frozen process does not
// notice cancellation.
func (s *sim) pause(e *env, run *runState, op string, d time.Duration) {
	now := s.clock.Now()
	c := s.causes.open(causePause, e.id, now)
	s.mu.Lock()
	s.stats.pauses++
	s.mu.Unlock()
	s.trace.add("pause", e.id, -1, "run=%d stalls %v before %s", run.n, d, op)
	outbox.Sleep(e.clock, d, nil)
	s.causes.closeAt(c, s.clock.Now())
	s.trace.add("resume", e.id, -1, "run=%d after %v", run.n, d)
}

// startHolds starts the steady phase's hold-mode relays: clocks within the
// tolerated skew, budgets covering the phase.
func (s *sim) startHolds(n int, budget time.Duration) error {
	for range n {
		e, err := s.newEnv(fnHold)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.holds = append(s.holds, e)
		s.mu.Unlock()
		s.startRun(e, invocation{trigger: outbox.TriggerDirect, source: "steady-phase"}, runPlan{budget: budget})
	}
	return nil
}

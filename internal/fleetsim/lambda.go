package fleetsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/internal/lambdasim"
	"github.com/spillway-dev/spillway/internal/sleep"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxwake"
)

// Functions of the simulated deployment (a relay id begins with its initial).
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

// schedulePayload is the event of a schedule sweep.
var schedulePayload = []byte(`{"trigger":"schedule"}`)

// wakePayload is the event of wake-up w, as outboxwake's notifier sends it.
func wakePayload(w outbox.WakeUp) []byte {
	if w.Buckets == nil {
		w.Buckets = []int{}
	}
	b, _ := json.Marshal(outboxwake.Payload{Trigger: outbox.TriggerWake, Buckets: w.Buckets, Hop: w.Hop, Join: w.Join})
	return b
}

func decodePayload(payload []byte) outboxwake.Payload {
	var p outboxwake.Payload
	_ = json.Unmarshal(payload, &p)
	return p
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

// env is what the simulation keeps of one execution environment of the
// relay function or the hold function (lab.RelayFunction builds it, with
// the real relay handler, and keeps it in its State): a relay id, a host
// clock, a wrapped Store and Kafka client, whose calls carry out the run's
// crash and pause plan.
type env struct {
	sim      *sim
	id       string
	function string
	clock    *hostClock
	// kafka is the environment's Kafka client, whose calls the
	// environment's own wrap (relayio.go).
	kafka     *outboxkafka.Publisher
	skewCause *cause
	// stepped marks an environment a clock step left out of tolerance:
	// its skew cause is open while it runs (stepRun).
	stepped bool
	// batch picks the relay's batch size.
	batch int
	// plain marks a relay that keeps every lease every round, as relays
	// of other languages do (FaultMixedSkew).
	plain bool
	// holdFor is the budget of a hold relay.
	holdFor time.Duration

	// The order menu's faults aimed at this environment.
	late atomic.Pointer[lateCalls]
	// mu guards round and renewal, what the environment remembers of its
	// relay's lease round and renewal in progress (relayio.go).
	mu      sync.Mutex
	round   leaseRound
	renewal leaseRenewal
	// renewThrottled throttles the relay's in-flight renewals while a
	// late park of it is held (FaultParkLate).
	renewThrottled atomic.Bool

	dead atomic.Bool
	// gone closes with the crash: the requests in flight never arrive.
	gone   chan struct{}
	closed atomic.Bool
	// run is the environment's latest invocation: running until over.
	run atomic.Pointer[runState]
}

// running reports whether an invocation of e is running.
func (e *env) running() bool {
	r := e.run.Load()
	return r != nil && !r.over.Load()
}

// envOf is the simulation's state of environment re.
func envOf(re *lab.RelayEnv) *env { return re.State.(*env) }

// newEnv prepares execution environment re of function (a cold start)
// before lab.RelayFunction builds its store and handler: its relay id, its
// host clock and skew, its DynamoDB and Kafka clients, and the run of a
// hold relay.
func (s *sim) newEnv(function string, re *lab.RelayEnv) error {
	s.mu.Lock()
	s.rep.Environments++
	n := s.rep.Environments
	s.mu.Unlock()
	r := newRand(s.cfg.Seed, "env", uint64(n))
	tol := s.cfg.tolerableSkew()
	skew := uniform(r, -tol/2, tol/2)
	large := false
	if function == fnRelay && !s.steadyAt(s.clock.Now()) && r.IntN(100) < 8 && s.faultsAt(s.clock.Now()) {
		large = true
		skew = uniform(r, tol+2*time.Second, 2*s.cfg.LeaseDuration)
		if r.IntN(2) == 0 {
			skew = -skew
		}
	}
	// A relay of another language's habits (FaultMixedSkew): its own
	// leases are kept every round, and its clock is ahead by more than
	// the kept-ahead leases' margin but within the tolerance such relays
	// claim.
	var hold holdRun
	if function == fnHold {
		hold = s.takeHoldRun()
	}
	plain := hold.plain
	if plain {
		skew = uniform(r, s.cfg.LeaseDuration-2*s.cfg.RenewInterval, s.cfg.LeaseDuration-s.cfg.RenewInterval)
	}
	e := &env{sim: s, id: fmt.Sprintf("%s%04x-%03d", function[:1], r.IntN(0x10000), n), function: function, plain: plain, holdFor: hold.budget,
		gone: make(chan struct{})}
	e.clock = newHostClock(skew)
	kp, err := outboxkafka.New(outboxkafka.Config{
		Brokers:   s.kafka.Brokers,
		ClientID:  e.id,
		Clock:     e.clock,
		ExtraOpts: s.kafka.ClientOpts(),
	})
	if err != nil {
		return err
	}
	e.kafka = kp
	e.batch = r.IntN(4)
	re.RelayID, re.Clock, re.Client, re.State = e.id, e.clock, s.newClient(e.id, e.gone), e

	switch {
	case large:
		e.skewCause = s.causes.open(causeLargeSkew, e.linger(), s.clock.Now())
	case plain:
		e.skewCause = s.causes.open(causeMixedSkew, e.linger(), s.clock.Now())
		s.leases.markPlain(e.id)
	}
	s.trace.add("env-start", e.id, -1, "function=%s skew=%v large=%v plain=%v", function, skew, large, plain)
	// Registered now, so that closing the simulation closes its Kafka
	// client even if building its store or handler fails.
	s.mu.Lock()
	s.envs = append(s.envs, e)
	s.mu.Unlock()
	return nil
}

// newFunctions deploys the relay function (drain mode, cfg) and the hold
// function (hold mode) on the Lambda emulator, as the lab builds every
// relay function (lab.RelayFunction): every invocation's fate is drawn
// when it starts (started), every environment is its relay's store and
// publisher (relayio.go), and wake-ups invoke the relay function.
func (s *sim) newFunctions(cfg outboxlambda.Config) error {
	relay := lab.RelayFunction{
		Lambda: lambdasim.Config[*lab.RelayEnv]{
			Scheduler: s.lab, Context: s.ctx,
			// Every run's deadline is its drawn budget, well below this.
			Timeout: time.Hour, MaxEventAge: 24 * time.Hour,
			Started: s.started, Ended: s.ended, Killed: s.killed, KeepWarm: s.keepWarm,
			Retired: func(re *lab.RelayEnv) {
				if e := envOf(re); !e.dead.Load() && e.function == fnRelay {
					s.trace.add("env-reaped", e.id, -1, "idle since the last run")
				}
				s.retire(envOf(re))
			},
		},
		Config: cfg,
		Hooks:  []outbox.Hook{observer{s}},
		Store: func(re *lab.RelayEnv, store *outboxddb.Store) outbox.Store {
			return envOf(re).storeOf(store, s.cfg.quarantine())
		},
		Publisher: func(re *lab.RelayEnv) outbox.Publisher { return envOf(re) },
		HandlerConfig: func(re *lab.RelayEnv, hc *outboxlambda.RelayHandlerConfig) {
			e := envOf(re)
			hc.Config.BatchSize = []int{5, 20, 50, 100}[e.batch]
			// A relay of another language's habits (FaultMixedSkew) keeps
			// every owned lease every round and heartbeats without the
			// keep-ahead mark.
			hc.Config.KeepEveryRound = e.plain
			hc.Notifier = s
			hc.Doorbell = s.bell.Listener()
			hc.Hooks = append(hc.Hooks, envHook{e})
		},
	}
	hold := relay
	relay.Lambda.ReservedConcurrency, relay.Lambda.StartLatency, relay.Lambda.Coalesce = s.cfg.Concurrency, asyncLatency, coalesce
	relay.Env = func(re *lab.RelayEnv) error { return s.newEnv(fnRelay, re) }
	hold.Lambda.ReservedConcurrency = maxHolds
	if s.cfg.has(FaultMixedSkew) {
		// A mixed fleet's two relays never hold a steady phase's back.
		hold.Lambda.ReservedConcurrency += 2
	}
	hold.Config.Mode = outbox.ModeHold
	if s.cfg.has(FaultBlockHolds) {
		hold.Config.PoisonPolicy = outbox.PoisonBlock
	}
	hold.Env = func(re *lab.RelayEnv) error { return s.newEnv(fnHold, re) }
	var err error
	if s.relayFn, err = lab.NewRelayFunction(relay); err != nil {
		return err
	}
	s.holdFn, err = lab.NewRelayFunction(hold)
	return err
}

// invoke sends an asynchronous invocation of the relay function; it can
// start asyncLatency later, as Lambda's event queue delivers it.
func (s *sim) invoke(payload []byte) {
	s.add(&s.rep.Invocations, 1)
	s.relayFn.Send(payload, s.clock.Now())
}

// coalesce folds queued events as a busy function's queue would deliver
// them: wake-ups merge their buckets, at most one schedule sweep waits.
func coalesce(queued, incoming []byte) ([]byte, bool) {
	q, in := decodePayload(queued), decodePayload(incoming)
	switch {
	case q.Trigger != in.Trigger:
		return nil, false
	case in.Trigger != outbox.TriggerWake:
		return queued, true
	}
	merged := outbox.WakeUp{Buckets: union(slices.Concat(q.Buckets, in.Buckets)), Hop: min(q.Hop, in.Hop), Join: q.Join || in.Join}
	if len(in.Buckets) == 0 {
		merged.Buckets = nil
	}
	return wakePayload(merged), true
}

// union returns the distinct buckets of bs, sorted.
func union(bs []int) []int {
	slices.Sort(bs)
	return slices.Compact(bs)
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
	if !s.faultsAt(s.clock.Now()) {
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

// started begins an invocation on e: its fate (the relay function's
// drawn, a hold relay's the phase) and its deadline at the budget's end.
func (s *sim) started(inv *lambdasim.Invocation[*lab.RelayEnv]) {
	e := envOf(inv.Env)
	var plan runPlan
	if e.function == fnRelay {
		plan = s.drawPlan()
	}
	s.mu.Lock()
	if e.function == fnHold {
		plan.budget = e.holdFor
	}
	s.runSerial++
	run := &runState{n: s.runSerial, plan: plan, cancel: inv.Cancel}
	s.mu.Unlock()
	warm := e.run.Swap(run) != nil
	s.stepRun(e, true)
	inv.Deadline = inv.Start.Add(plan.budget)
	ev := decodePayload(inv.Payload)
	s.trace.add("invoke", e.id, -1, "run=%d trigger=%s buckets=%v hop=%d join=%v budget=%v crash_at=%d/%v pause_at=%d/%v warm=%v",
		run.n, ev.Trigger, ev.Buckets, ev.Hop, ev.Join, plan.budget, plan.crashAt, plan.crashAfter, plan.pauseAt, plan.pauseFor, warm)
}

// killed crashes an environment whose run outlived its deadline.
func (s *sim) killed(inv *lambdasim.Invocation[*lab.RelayEnv]) {
	e := envOf(inv.Env)
	if run := e.run.Load(); run != nil && !run.over.Load() {
		s.crash(e, run, causeTimeout, "killed at the deadline")
	}
}

// ended records the end of a run.
func (s *sim) ended(inv *lambdasim.Invocation[*lab.RelayEnv], resp outboxlambda.RelayResponse, err error) {
	e := envOf(inv.Env)
	run := e.run.Load()
	run.over.Store(true)
	e.endLate(nil)
	s.stepRun(e, false)
	now := s.clock.Now()
	if run.joined.Load() && !e.dead.Load() {
		s.causes.instant(causeLeave, e.linger(), now)
	}
	s.trace.add("run-end", e.id, -1, "run=%d reason=%s joined=%v calls=%d published=%d deleted=%d rounds=%d refused=%d releaseSkipped=%v workLeft=%v wake=%v err=%v",
		run.n, resp.Reason, resp.Joined, run.calls.Load(), resp.Published, resp.Deleted, resp.Rounds, resp.Refused, resp.ReleaseSkipped, resp.WorkLeft, resp.WakeUpSent, err)
	if err != nil && errors.Is(err, outbox.ErrMisconfigured) {
		v := violation("relay runs", -1, "relay %s run %d returned a misconfiguration: %v", e.id, run.n, err)
		v.relays = []string{e.id}
		s.fail(v)
	}
	s.mu.Lock()
	s.rep.Runs++
	if resp.Joined {
		s.rep.Joined++
	}
	if resp.ReleaseSkipped {
		s.rep.ReleaseSkipped++
	}
	if resp.Reason == string(outbox.StopFatal) {
		s.rep.FatalRuns++
	}
	s.mu.Unlock()
	s.lab.Poke()
}

// keepWarm is how long an idle environment lives: a crashed or hold one
// not at all, others a random while, as Lambda reclaims idle ones.
func (s *sim) keepWarm(inv *lambdasim.Invocation[*lab.RelayEnv]) time.Duration {
	e := envOf(inv.Env)
	if e.dead.Load() || e.function == fnHold {
		return -1
	}
	r := newRand(s.cfg.Seed, "reap", uint64(e.run.Load().n))
	return uniform(r, 20*time.Second, 3*time.Minute)
}

// retire removes e from the live environments and closes its Kafka client.
func (s *sim) retire(e *env) {
	s.mu.Lock()
	s.envs = slices.DeleteFunc(s.envs, func(x *env) bool { return x == e })
	skewCause := e.skewCause
	s.mu.Unlock()
	if skewCause != nil {
		s.causes.closeAt(skewCause, s.clock.Now())
	}
	go e.closeKafka()
}

// outOfTolerance makes c, a clock step that left e's clock further behind
// than the tolerated skew, e's skew cause: peers read e's heartbeats and
// leases as lapsed early whenever e writes them, not only while the step
// lasts. The cause stays open until e's run ends and opens again with
// each of its runs (stepRun): between runs e writes nothing, and what its
// last run left (a lease it could not release) the cause's settle covers.
// It reports whether it did; an e already out of tolerance keeps the
// cause it has.
func (s *sim) outOfTolerance(e *env, c *cause) bool {
	if e.clock.skew() >= -s.cfg.tolerableSkew()/2 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.skewCause != nil {
		return false
	}
	e.skewCause, e.stepped = c, true
	return true
}

// stepRun opens the skew cause of an environment a clock step left out of
// tolerance when a run of it starts (running), and closes it when the run
// ends.
func (s *sim) stepRun(e *env, running bool) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !e.stepped:
	case running && e.skewCause == nil:
		e.skewCause = s.causes.open(causeClockStep, e.linger(), now)
	case !running && e.skewCause != nil:
		s.causes.closeAt(e.skewCause, now)
		e.skewCause = nil
	}
}

// linger is how far e's clock ran ahead of true time at most: the
// expiries e wrote lapse that much later (see cause).
func (e *env) linger() time.Duration { return e.clock.maxSkew() }

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
		s.causes.instant(causeJoin, e.linger(), s.clock.Now())
	}
}

// crash kills e's process: no call it makes afterwards reaches a backend,
// nor does a DynamoDB request still in its round trip (cancelling the run
// alone would stop it cleanly, letting those land), its run is cancelled
// and its Kafka client closed. The leases it holds lapse after
// LeaseDuration.
func (s *sim) crash(e *env, run *runState, kind, why string) {
	if !e.dead.CompareAndSwap(false, true) {
		return
	}
	close(e.gone)
	now := s.clock.Now()
	if run.joined.Load() {
		s.causes.instant(kind, e.linger(), now)
	}
	if kind == causeTimeout {
		s.add(&s.rep.Timeouts, 1)
	} else {
		s.add(&s.rep.Crashes, 1)
	}
	s.trace.add(kind, e.id, -1, "run=%d %s", run.n, why)
	e.endLate(nil)
	run.cancel()
	// Closing fails the records still buffered, so a publish the crash
	// interrupted returns instead of waiting for delivery.
	go e.closeKafka()
}

// pause stalls the calling goroutine of e for d on the bubble's clock, as a
// stalled request or a suspended host would; a frozen process does not
// notice cancellation.
func (s *sim) pause(e *env, run *runState, op string, d time.Duration) {
	now := s.clock.Now()
	c := s.causes.open(causePause, e.linger(), now)
	s.add(&s.rep.Pauses, 1)
	s.trace.add("pause", e.id, -1, "run=%d stalls %v before %s", run.n, d, op)
	sleep.For(d, nil)
	s.causes.closeAt(c, s.clock.Now())
	s.trace.add("resume", e.id, -1, "run=%d after %v", run.n, d)
}

// holdRun is the run of a hold relay: its budget, and whether it keeps
// every round (one of the order menu's mixed fleet).
type holdRun struct {
	budget time.Duration
	plain  bool
}

// wakeHolds starts a hold relay per run: it queues the run, which the
// relay's environment takes when it starts (newEnv), and invokes the hold
// function with a wake-up that asks to join.
func (s *sim) wakeHolds(runs ...holdRun) {
	s.mu.Lock()
	s.holdRuns = append(s.holdRuns, runs...)
	s.mu.Unlock()
	for range runs {
		s.holdFn.Send(wakePayload(outbox.WakeUp{Join: true}), s.clock.Now())
	}
}

// takeHoldRun returns the next hold relay's run, if any.
func (s *sim) takeHoldRun() holdRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.holdRuns) == 0 {
		return holdRun{}
	}
	h := s.holdRuns[0]
	s.holdRuns = s.holdRuns[1:]
	return h
}

// startHolds starts the steady phase's hold-mode relays: clocks within the
// tolerated skew, budgets covering the phase. They join at once, as a
// wake-up that asks to join does, and the relay function is throttled
// until the phase ends.
func (s *sim) startHolds(n int, budget time.Duration) {
	now := s.clock.Now()
	s.relayFn.SetReservedConcurrency(0)
	s.at(now.Add(budget), func() { s.relayFn.SetReservedConcurrency(s.cfg.Concurrency) })
	s.wakeHolds(slices.Repeat([]holdRun{{budget: budget}}, n)...)
}

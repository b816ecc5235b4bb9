package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/internal/lambdasim"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// Simulation constants.
const (
	// scheduleEvery is the relay function's EventBridge schedule.
	scheduleEvery = time.Minute
	// churnPhase and steadyPhase are the lengths of the alternating phases
	// of the write window.
	churnPhase  = 2 * time.Minute
	steadyPhase = 150 * time.Second
	// traceExcerpt bounds the events printed with a violation.
	traceExcerpt = 200
	// maxHolds bounds the hold relays of a steady phase.
	maxHolds = 3
	// simPartitions is the partition count of every topic.
	simPartitions = 3
	// simBrokers is the number of embedded Kafka brokers.
	simBrokers = 3
	// outboxTable and ordersTable are the run's tables: the in-memory
	// server is the run's alone, and fixed names keep the requests of a
	// seed byte for byte the same.
	outboxTable, ordersTable = "fleet-outbox", "fleet-orders"
	// maxDrain bounds the simulated time after the writers stopped within
	// which the outbox must be empty.
	maxDrain = 15 * time.Minute
)

// phase is one part of the write window.
type phase struct {
	start, end time.Duration
	steady     bool
	holds      int
}

func (p phase) String() string {
	kind := "churn"
	if p.steady {
		kind = fmt.Sprintf("steady(%d hold relays)", p.holds)
	}
	return fmt.Sprintf("%s %v-%v", kind, p.start, p.end)
}

func genPhases(cfg Config) []phase {
	r := newRand(cfg.Seed, "phases")
	var out []phase
	steady := false
	for t := time.Duration(0); t < cfg.WriteDuration; steady = !steady {
		length := churnPhase
		if steady {
			length = steadyPhase
		}
		p := phase{start: t, end: min(t+length, cfg.WriteDuration), steady: steady}
		if steady {
			p.holds = 2 + r.IntN(maxHolds-1)
		}
		out = append(out, p)
		t = p.end
	}
	return out
}

// sim is one simulation run.
type sim struct {
	cfg Config
	// lab is the driver of the run's events (the seed's writer operations,
	// phases and faults, the schedule, the Lambda emulator's steps: see
	// Determinism in the package doc); ctx is its context.
	lab *lab.Sim
	ctx context.Context
	// clock is the bubble's: true time. start is the first instant.
	clock outbox.SystemClock
	start time.Time
	// abort closes when the wall-time bound passed.
	abort <-chan struct{}
	// stalls is the watchdog the driver stamps at every new instant.
	stalls *stallWatch
	trace  *tracer
	leases *leaseBook
	causes *causeBook

	ddb *outboxlocal.DynamoDB
	raw *dynamodb.Client
	// bizRefused counts the refused business Puts of the writers.
	bizRefused atomic.Int64
	kafka      *outboxlocal.Kafka

	wl      *workload
	phases  []phase
	faults  []scheduledFault
	writers []*writerProc
	wgWrite sync.WaitGroup

	opsDone      atomic.Int64
	outsideLease atomic.Int64

	// The order menu's state (orderfaults.go): armed park faults, replays
	// running, and the operator's store.
	parkLosses  atomic.Int32
	parkLates   atomic.Int32
	slowParks   atomic.Int32
	lateParks   map[int]*latePark
	holdRuns    []holdRun
	replays     atomic.Int32
	wgReplay    sync.WaitGroup
	replayStore *outboxddb.Store

	kafkaDown atomic.Bool
	// bell is the doorbell the writers ring and the relays listen on
	// (doorbell.go).
	bell *lab.Doorbell

	mu      sync.Mutex
	relayFn *lambdasim.Function[*lab.RelayEnv]
	holdFn  *lambdasim.Function[*lab.RelayEnv]
	// envs are the live execution environments of both functions.
	envs      []*env
	invSerial int
	runSerial int
	pending   []pendingFault
	// rep holds the figures counted during the run; report completes it.
	rep    Report
	rounds []time.Time

	// Driver state.
	steps         int
	lastStep      time.Time
	prevRefused   int
	prevBiz       int64
	prevNow       time.Time
	prevQuiet     bool
	writesClosed  bool
	lastDrainScan time.Time
}

// Run runs the simulation cfg describes in a testing/synctest bubble of
// its own and returns its figures. The bubble's clock is the simulated
// time: it moves only when every simulated process is blocked, so the
// run's timings do not depend on how fast or loaded the machine is. The
// error is a *Violation when an invariant broke, or what stopped the
// setup. A seed replays its workload and faults: see Determinism in the
// package documentation for how exactly its figures do.
func Run(t *testing.T, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	wall := time.Now()
	// A timer of the test, outside the bubble: the wall-time bound.
	abort := make(chan struct{})
	if cfg.WallLimit > 0 {
		timer := time.AfterFunc(cfg.WallLimit, func() { close(abort) })
		defer timer.Stop()
	}
	// One P while the bubble runs: the goroutines that one simulated
	// instant wakes (the Kafka clients' sinks, metadata loops and
	// promises, the relays' concurrent calls, the backends' handlers) then
	// run in the order of its run queue, which the run's own events fix,
	// instead of racing on several threads. The in-memory backends answer
	// in no simulated time, so that order decides, for instance, which
	// records share a produce request that a broker refuses.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	stalls := watchStalls(stallLimit)
	defer stalls.close()
	var rep *Report
	var err error
	synctest.Test(t, func(t *testing.T) { rep, err = run(t.Context(), cfg, abort, stalls) })
	if rep != nil {
		rep.Wall = time.Since(wall)
	}
	return rep, err
}

// run is Run inside the bubble.
func run(ctx context.Context, cfg Config, abort <-chan struct{}, stalls *stallWatch) (*Report, error) {
	s, err := newSim(ctx, cfg, abort)
	if err != nil {
		return nil, err
	}
	s.stalls = stalls
	err = s.lab.Drive(time.Time{}, s.step)
	if err == nil {
		err = s.finish()
	}
	simulated := s.clock.Now().Sub(s.start)
	var v *Violation
	if errors.As(err, &v) && v.At == 0 {
		v.At = simulated
	}
	// The writers and relays stop before the figures are read.
	s.close()
	rep := s.report()
	rep.SimDuration = simulated
	if v != nil {
		s.explain(v)
	} else if cfg.TraceFile != "" {
		if werr := s.trace.writeFile(cfg.TraceFile); werr != nil {
			s.logf("write trace: %v", werr)
		}
	}
	return rep, err
}

func newSim(parent context.Context, cfg Config, abort <-chan struct{}) (*sim, error) {
	l, err := lab.NewSim(parent, lab.Config{Settle: synctest.Wait})
	if err != nil {
		return nil, err
	}
	s := &sim{
		cfg: cfg, lab: l, ctx: l.Context(), start: trueNow(), abort: abort,
		leases: newLeaseBook(cfg.LeaseDuration),
		causes: newCauseBook(cfg.settle()), lateParks: map[int]*latePark{},
		rep: Report{
			Seed: cfg.Seed, BucketCount: cfg.BucketCount, LeaseDuration: cfg.LeaseDuration, RenewInterval: cfg.RenewInterval,
			Concurrency: cfg.Concurrency, Writers: cfg.Writers, Keys: cfg.Keys, OrderFaults: cfg.OrderFaults,
			RefusedByCause: map[string]int{}, RefusedByOp: map[string]int{}, Faults: map[string]int{}, FaultsHit: map[string]int{},
		},
	}
	s.trace = &tracer{start: s.start, added: l.Poke}
	if err := s.setup(); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// setup starts the backends, creates the tables, draws the workload and the
// schedule, deploys the functions and starts the writers.
func (s *sim) setup() error {
	ctx, cfg := s.ctx, s.cfg
	var err error
	s.ddb, err = outboxlocal.StartDynamoDB(ctx, dynamoOptions(cfg)...)
	if err != nil {
		return err
	}
	s.raw = rawClient(s.ddb)
	// The relays' configuration, whose store options the writers share, as
	// the deployed functions read one configuration.
	// With the doorbell (doorbell.go), as LoadConfig reads
	// SPILLWAY_DOORBELL_TOPIC: busy buckets probed at the poll.
	fn := outboxlambda.Config{
		Table: outboxTable, BucketCount: cfg.BucketCount, LeaseDuration: cfg.LeaseDuration, LeaseRenewInterval: cfg.RenewInterval,
		PollInterval: pollInterval, TargetLatency: pollInterval, IdleTimeout: idleTimeout, StopMargin: stopMargin, Mode: outbox.ModeDrain, MaxHops: maxHops,
		DoorbellTopic: "spillway-doorbell",
	}
	s.bell = s.newDoorbell()
	if cfg.quarantine() {
		fn.PoisonPolicy = outbox.PoisonQuarantine
	}
	storeOpts := fn.StoreOptions()
	storeOpts.Hooks, storeOpts.Logger = []outbox.Hook{observer{s}}, slog.New(slog.DiscardHandler)
	create := storeOpts.Options
	create.Clock = outbox.SystemClock{}
	if err := outboxddb.CreateIfNotExists(ctx, s.ddb.Client, create); err != nil {
		return err
	}
	if err := s.ddb.CreateTable(ctx, ordersTable); err != nil {
		return err
	}
	s.kafka, err = outboxlocal.StartKafka(ctx, outboxlocal.KafkaConfig{
		Topics: simTopics, Partitions: simPartitions, Brokers: simBrokers, InMemory: true,
	})
	if err != nil {
		return err
	}
	if err := s.placeLeaders(newRand(cfg.Seed, "leaders")); err != nil {
		return err
	}
	if s.wl, err = genWorkload(cfg, simPartitions); err != nil {
		return err
	}
	if err := s.placeOrders(); err != nil {
		return err
	}
	s.phases = genPhases(cfg)
	s.faults = genFaults(cfg, s.phases)

	writerOpts := fn.WriterOptions()
	writerOpts.Options, writerOpts.Clock = storeOpts.Options, s.clock
	writerOpts.Notifier = s
	if err := s.newFunctions(fn); err != nil {
		return err
	}
	if cfg.quarantine() {
		operator := storeOpts
		operator.Clock = s.clock
		if s.replayStore, err = outboxddb.NewStore(s.newClient("operator", nil), operator); err != nil {
			return err
		}
	}
	if err := s.startWriters(writerOpts); err != nil {
		return err
	}
	s.schedule()
	s.ddb.Counter.Reset()
	s.prevNow = s.clock.Now()
	phases := make([]string, len(s.phases))
	for i, p := range s.phases {
		phases[i] = p.String()
	}
	s.logf("seed %d: %d messages in %d operations over %v; %d scheduled faults; phases %s",
		cfg.Seed, len(s.wl.msgs), len(s.wl.ops), cfg.WriteDuration, len(s.faults), strings.Join(phases, ", "))
	return nil
}

// placeOrders writes the orders that the workload's rejected transactions
// collide with.
func (s *sim) placeOrders() error {
	for _, op := range s.wl.ops {
		if op.kind != opTxnRejected {
			continue
		}
		if _, err := s.raw.PutItem(s.ctx, &dynamodb.PutItemInput{TableName: aws.String(ordersTable), Item: orderItem(op.order)}); err != nil {
			return fmt.Errorf("fleetsim: place order %s: %w", op.order, err)
		}
	}
	return nil
}

// dynamoOptions are the embedded DynamoDB's options: in memory, with the
// read-committed commits of FaultReadCommitted when the run draws it.
func dynamoOptions(cfg Config) []outboxlocal.DynamoOption {
	opts := []outboxlocal.DynamoOption{outboxlocal.InMemory(), outboxlocal.WithoutEnvironment(), outboxlocal.WithClientOptions(clientOptions)}
	if cfg.has(FaultReadCommitted) {
		opts = append(opts, outboxlocal.WithReadCommitted(outboxlocal.ReadCommitted{
			Seed: newRand(cfg.Seed, "read-committed").Uint64(), MaxCommit: readCommitMax}))
	}
	return opts
}

// startWriters starts the writer processes, each with its own client.
func (s *sim) startWriters(opts outboxddb.WriterOptions) error {
	for i := range s.cfg.Writers {
		client := s.newClient(fmt.Sprintf("writer-%d", i), nil)
		w, err := outboxddb.NewWriter(client, opts)
		if err != nil {
			return err
		}
		// A writer process reads the table's layout record once, as it
		// starts: set-up, not the traffic the seeds replay.
		if err := w.CheckLayout(lab.SetUp(s.ctx)); err != nil {
			return err
		}
		p := &writerProc{sim: s, n: i, w: w, client: client, ops: make(chan *writerOp, len(s.wl.ops))}
		s.writers = append(s.writers, p)
		s.wgWrite.Go(func() { p.loop(s.ctx) })
	}
	return nil
}

// orderItem is the business item of order in the orders table.
func orderItem(order string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		outboxddb.DefaultPartitionKey: &types.AttributeValueMemberS{Value: "ORDER#" + order},
		outboxddb.DefaultSortKey:      &types.AttributeValueMemberS{Value: "ORDER"},
	}
}

// schedule queues the seed's events: writer operations, phases, faults,
// the schedule sweeps and the end of the writes.
func (s *sim) schedule() {
	start := s.start
	for _, op := range s.wl.ops {
		p := s.writers[op.writer]
		s.at(start.Add(op.at), func() { p.ops <- op })
	}
	for _, ph := range s.phases {
		if ph.steady {
			s.at(start.Add(ph.start), func() {
				s.trace.add("phase", "", -1, "steady phase: %d hold relays until T+%v", ph.holds, ph.end)
				s.startHolds(ph.holds, ph.end-ph.start)
			})
		} else {
			s.at(start.Add(ph.start), func() { s.trace.add("phase", "", -1, "churn phase until T+%v", ph.end) })
		}
	}
	for _, f := range s.faults {
		s.at(start.Add(f.at), func() { s.apply(f) })
	}
	var sweep func()
	sweep = func() {
		s.invoke(schedulePayload)
		s.at(s.clock.Now().Add(scheduleEvery), sweep)
	}
	s.at(start.Add(scheduleEvery/2), sweep)
	s.at(start.Add(s.cfg.WriteDuration), func() {
		s.closeWrites()
		s.trace.add("phase", "", -1, "writes end; relays drain")
		if s.cfg.quarantine() {
			s.replayWhileParked()
		}
	})
}

// hostOffset renders a host clock reading as an offset from the start.
func (s *sim) hostOffset(t time.Time) string { return fmt.Sprintf("%.3fs", t.Sub(s.start).Seconds()) }

// offset returns t as an offset from the start.
func (s *sim) offset(t time.Time) time.Duration { return t.Sub(s.start) }

func (s *sim) steadyAt(t time.Time) bool {
	o := s.offset(t)
	for _, p := range s.phases {
		if p.steady && o >= p.start && o < p.end {
			return true
		}
	}
	return false
}

// faultsAt reports whether a relay may draw a fault of its own at t (a
// crash, a pause, a clock skew beyond the tolerance): outside the steady
// phases and outside the last faultQuietBefore of a churn phase that a
// steady phase follows, as for the scheduled faults (genFaults), so a
// steady phase starts with no fault lingering into it and its quiet
// window, which the zero-refusal check needs, is not eaten by a relay
// that joined seconds before it.
func (s *sim) faultsAt(t time.Time) bool {
	o := s.offset(t)
	for _, p := range s.phases {
		if o >= p.start && o < p.end {
			return !p.steady && (p.end >= s.cfg.WriteDuration || o < p.end-faultQuietBefore)
		}
	}
	return true
}

// at queues fn to run on the driver at true time t.
func (s *sim) at(t time.Time, fn func()) {
	s.lab.At(t, func(time.Time) error { fn(); return nil })
}

// fail stops the simulation with v unless it failed before (lab.Sim.Fail):
// the driver returns the first violation.
func (s *sim) fail(v *Violation) {
	v.At = s.offset(s.clock.Now())
	s.lab.Fail(v)
}

func (s *sim) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

// step is the driver's hook at every pass: the wall-time bound, the count
// of instants, the per-step checks; and, once no event is due at this
// instant any more (the driver runs those first, then passes again), the
// end of the run: the outbox drained, or not within maxDrain, or no event
// left that could drain it.
func (s *sim) step(now time.Time) (bool, error) {
	// The sim's instants are its clock's (UTC, no monotonic reading).
	now = now.UTC()
	select {
	case <-s.abort:
		return false, violation("progress", -1, "the wall-time bound %v passed %v into the simulation", s.cfg.WallLimit, s.offset(now))
	default:
	}
	if !now.Equal(s.lastStep) {
		s.steps++
		s.lastStep = now
		s.stalls.stamp()
	}
	s.observe(now)
	if s.ctx.Err() != nil {
		return false, s.lab.Settle() // what observe failed the run with
	}
	next, pending := s.lab.Next()
	if pending && !next.After(now) {
		return false, nil
	}
	done, err := s.finished(now)
	if err != nil || done {
		return done, err
	}
	if now.After(s.start.Add(s.cfg.WriteDuration + maxDrain)) {
		n, _ := s.countPartitions(s.ctx, "MESSAGES")
		return false, violation("drain", -1, "%d messages still in the outbox %v after the writes ended (%d runs active)", n, maxDrain, s.activeRunCount())
	}
	if !pending {
		return false, violation("progress", -1, "no event pending")
	}
	return false, nil
}

// observe runs the per-step checks: refused writes against the causes,
// quiet time, consumed faults, lease exclusivity.
func (s *sim) observe(now time.Time) {
	counts := s.ddb.Counter.Snapshot()
	s.settleFaults(counts, now)
	biz := s.bizRefused.Load()
	refused := counts.Refused - s.prevRefused - int(biz-s.prevBiz)
	s.prevRefused, s.prevBiz = counts.Refused, biz
	c := s.causes.explain(now)
	if refused > 0 {
		if c == nil {
			s.fail(violation("no refused write in a quiet window", -1,
				"%d conditional writes refused with no fault and no membership change within %v", refused, s.cfg.settle()))
		} else {
			s.rep.RefusedByCause[c.kind] += refused
		}
	}
	if s.prevQuiet {
		s.rep.QuietTime += now.Sub(s.prevNow)
	}
	s.prevQuiet = c == nil && s.joinedRuns() > 0
	s.prevNow = now
	if v := s.leases.checkAt(now); v != nil {
		s.fail(v.violation("lease exclusivity", ""))
	}
}

func (s *sim) joinedRuns() int {
	n := 0
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.envs {
		// Hold relays join at once.
		if e.running() && (e.function == fnHold || e.run.Load().joined.Load()) {
			n++
		}
	}
	return n
}

// activeRunCount returns the relay invocations running or waiting.
func (s *sim) activeRunCount() int { return s.relayFn.Pending() + s.holdFn.Pending() }

// finished reports whether the writes are over, every writer and relay has
// stopped and the outbox is empty.
func (s *sim) finished(now time.Time) (bool, error) {
	if !s.writesClosed || s.opsDone.Load() < int64(len(s.wl.ops)) {
		return false, nil
	}
	if s.activeRunCount() > 0 || s.lastDrainScan.Equal(now) {
		return false, nil
	}
	s.lastDrainScan = now
	n, err := s.countPartitions(s.ctx, "MESSAGES")
	if err != nil || n > 0 {
		return false, err
	}
	if s.cfg.quarantine() {
		if s.replays.Load() > 0 {
			return false, nil
		}
		if n, err = s.countPartitions(s.ctx, "PARKED"); err != nil || n > 0 {
			return false, err
		}
	}
	return true, nil
}

// finish stops the writers and environments, then runs the end checks:
// every record read back, the whole lease intervals.
func (s *sim) finish() error {
	s.wgWrite.Wait()
	s.wgReplay.Wait()
	s.mu.Lock()
	envs := slices.Clone(s.envs)
	s.mu.Unlock()
	for _, e := range envs {
		s.retire(e)
	}
	for _, m := range s.wl.msgs {
		if m.state == msgPending {
			return violation("workload", -1, "message %s was never enqueued: a writer stopped early", m.id)
		}
	}
	recs, err := s.readBack(s.ctx)
	if err != nil {
		return err
	}
	dc, v := checkRecords(s.wl, recs, outbox.DefaultMessageIDHeaderName)
	s.mu.Lock()
	s.rep.Records, s.rep.Delivered, s.rep.Duplicates = dc.records, dc.distinct, dc.duplicates
	s.mu.Unlock()
	if v != nil {
		return v
	}
	lv, overlaps := s.leases.checkAll()
	mv, takeovers := s.leases.checkMixed(s.cfg.RenewInterval, s.cfg.mixedSkewLimit())
	s.hit(causeMixedSkew, takeovers)
	if mv != nil && lv == nil {
		return mv.violation("mixed-fleet lease exclusivity", " within a round of its holder's last one")
	}
	s.mu.Lock()
	s.rep.LeaseOverlaps = overlaps
	s.mu.Unlock()
	if lv != nil {
		return lv.violation("lease exclusivity", "")
	}
	return nil
}

// close stops every process and backend: the runs see their context
// cancelled, and a paused goroutine sleeps its pause out on the bubble's
// clock, which nothing else holds back any more.
func (s *sim) close() {
	_ = s.lab.Stop()
	s.closeWrites()
	s.wgWrite.Wait()
	s.wgReplay.Wait()
	for _, fn := range []*lambdasim.Function[*lab.RelayEnv]{s.relayFn, s.holdFn} {
		if fn != nil {
			fn.Wait()
		}
	}
	s.mu.Lock()
	envs := slices.Clone(s.envs)
	s.mu.Unlock()
	for _, e := range envs {
		e.closeKafka()
	}
	if s.kafka != nil {
		_ = s.kafka.Close()
	}
	if s.ddb != nil {
		_ = s.ddb.Close()
	}
}

// closeWrites ends the writers' operations, once.
func (s *sim) closeWrites() {
	if s.writesClosed {
		return
	}
	for _, p := range s.writers {
		close(p.ops)
	}
	s.writesClosed = true
}

// explain completes a violation with the seed, a trace excerpt and the
// trace file.
func (s *sim) explain(v *Violation) {
	v.Seed, v.duration = s.cfg.Seed, s.cfg.WriteDuration
	for _, e := range s.trace.excerpt(traceExcerpt, func(e traceEvent) bool {
		switch e.kind {
		case "fault", "fault-end", "clock-step", "phase", causeCrash, causeTimeout, "pause", "refused":
			return true
		}
		return v.bucket >= 0 && e.bucket == v.bucket || slices.Contains(v.relays, e.relay) || v.bucket < 0 && len(v.relays) == 0
	}) {
		v.Trace = append(v.Trace, e.String())
	}
	path := s.cfg.TraceFile
	if path == "" {
		path = filepath.Join(os.TempDir(), fmt.Sprintf("spillway-fleet-%d.trace", s.cfg.Seed))
	}
	if err := s.trace.writeFile(path); err == nil {
		v.TraceFile = path
	}
}

// report assembles the figures; Run adds the wall time.
func (s *sim) report() *Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rep
	r.OutsideLease, r.BusinessRefused = int(s.outsideLease.Load()), int(s.bizRefused.Load())
	r.Causes, r.Steps = s.causes.count(), s.steps
	for _, p := range s.phases {
		if p.steady && p.end-p.start == steadyPhase {
			r.SteadyPhases++
		}
	}
	r.Ops, r.Messages = len(s.wl.ops), len(s.wl.msgs)
	for _, m := range s.wl.msgs {
		switch m.state {
		case msgCommitted:
			r.Committed++
		case msgRejected:
			r.Rejected++
		case msgUncertain:
			r.Uncertain++
		}
	}
	for _, n := range s.rep.RefusedByCause {
		r.Refused += n
	}
	for _, t := range s.rounds {
		if s.causes.explain(t) == nil {
			r.QuietRounds++
		}
	}
	c := s.ddb.Counter.Snapshot()
	r.Requests, r.RequestsByOp = c.TotalRequests(), c.Requests
	r.Doorbell.Delivered = s.bell.Stats().Delivered
	if r.ReadCommitted = s.ddb.ReadCommittedCounts(); r.ReadCommitted.PartialReads > 0 {
		r.FaultsHit = maps.Clone(r.FaultsHit)
		r.FaultsHit[string(FaultReadCommitted)] = r.ReadCommitted.PartialReads
	}
	return &r
}

// notePublishMargin records a publish that started with less than the
// margin outbox.KeepMargin states (with the fleet's
// timings) of its lease left on the relay's clock.
func (s *sim) notePublishMargin(e *env, bucket int, left time.Duration) {
	if margin := s.cfg.LeaseDuration - 2*s.cfg.RenewInterval; left >= margin {
		return
	}
	s.mu.Lock()
	if s.rep.ThinPublishes == 0 || left < s.rep.LeastLeaseLeft {
		s.rep.LeastLeaseLeft = left
	}
	s.rep.ThinPublishes++
	s.mu.Unlock()
	s.trace.add("thin-publish", e.id, bucket, "publish starts with %v of the lease left", left)
}

// add adds n to the figure f of s.rep.
func (s *sim) add(f *int, n int) {
	s.mu.Lock()
	*f += n
	s.mu.Unlock()
}

// count adds n to m[kind], a figure of s.rep.
func (s *sim) count(m map[string]int, kind string, n int) {
	s.mu.Lock()
	m[kind] += n
	s.mu.Unlock()
}

// noteRound records the start of an acquisition round.
func (s *sim) noteRound(t time.Time) {
	s.mu.Lock()
	s.rounds = append(s.rounds, t)
	s.mu.Unlock()
}

// observer is the hook of every store, writer and relay: refused writes,
// throttles and parks.
type observer struct{ s *sim }

var (
	_ outboxddb.HookRequest = observer{}
	_ outbox.HookPark       = observer{}
)

// OnRefused implements outboxddb.HookRequest.
func (o observer) OnRefused(req outboxddb.Request) {
	o.s.mu.Lock()
	o.s.rep.RefusedByOp[req.Op]++
	o.s.mu.Unlock()
	bucket := -1
	if req.OneBucket {
		bucket = req.Bucket
	}
	o.s.trace.add("refused", req.RelayID, bucket, "%s", req.Op)
}

// OnThrottle implements outboxddb.HookRequest.
func (o observer) OnThrottle(outboxddb.Request, error) { o.s.add(&o.s.rep.Throttles, 1) }

// OnPark implements outbox.HookPark.
func (o observer) OnPark(relayID string, p outbox.Parking) {
	o.s.add(&o.s.rep.Parked, 1)
	o.s.trace.add("parked", relayID, p.Bucket, "%s", p.Reason)
}

func (observer) OnReplay(string, int, int)     {}
func (observer) OnParkedBacklog(string, int64) {}

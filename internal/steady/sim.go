package steady

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/internal/lambdasim"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

const (
	// warmup is the start of the run in which refused writes are expected
	// (the first relays joining at once).
	warmup = time.Minute
	// topic is where every message goes.
	topic = "orders"
	// keySpace is the number of distinct message keys.
	keySpace = 1000
)

// discardLogger is the writer's and its notifier's logger: a run's
// figures are its report, not its logs (the relays' logger is
// lab.RelayFunction's default, which discards too).
var discardLogger = slog.New(slog.DiscardHandler)

// Run runs the scenario described by cfg and reports its figures. It must
// be called inside a testing/synctest bubble (synctest.Test): the bubble's
// fake clock is the simulated time, and it moves only when every goroutine
// of the run is durably blocked. It fails on a misconfiguration, a failure
// of the embedded backends or the writer, and on a simulation that does
// not drain; the targets are the caller's to check (Report.Check).
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Report{}, err
	}
	ddb, err := outboxlocal.StartDynamoDB(ctx, outboxlocal.InMemory(), outboxlocal.WithoutEnvironment())
	if err != nil {
		return Report{}, err
	}
	defer func() { _ = ddb.Close() }()
	table := ddb.NewTableName()
	if err := ddb.CreateTable(ctx, table); err != nil {
		return Report{}, err
	}
	s, err := newSim(ctx, cfg, ddb, table)
	if err != nil {
		return Report{}, err
	}
	defer s.stop()
	before := ddb.Counter.Snapshot()
	if err := s.drive(); err != nil {
		return Report{}, err
	}
	return s.report(ddb.Counter.Snapshot().Since(before)), nil
}

// sim is one run: the backends and the processes, on the lab's
// simulation (lab.Sim), which runs the Lambda service's delayed steps and
// drives the run.
type sim struct {
	cfg Config
	fn  outboxlambda.Config
	// lab runs the processes (Go), the Lambda service's delayed steps (it
	// is the emulator's Scheduler) and the driver; ctx is its context.
	lab    *lab.Sim
	ctx    context.Context
	clock  outbox.Clock
	start  time.Time
	client *lab.Client
	ledger *ledger
	lambda *lambdasim.Function[*lab.RelayEnv]

	// writer is the one writer process; notifier its wake-up notifier
	// (nil WithoutWakeUps).
	writer    *outboxddb.Writer
	notifier  *outboxlambda.Notifier
	bell      *lab.Doorbell // nil without Config.Doorbell
	rng       *rand.Rand    // the commits' only (on the driver)
	commits   atomic.Int64
	writesEnd time.Time
	writesOn  atomic.Bool  // until writesEnd
	inFlight  atomic.Int64 // commits not finished
}

// newSim prepares a run on table: nothing runs before drive.
func newSim(ctx context.Context, cfg Config, ddb *outboxlocal.DynamoDB, table string) (*sim, error) {
	fn, err := cfg.functionConfig(table)
	if err != nil {
		return nil, err
	}
	l, err := lab.NewSim(ctx, lab.Config{Settle: synctest.Wait})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	s := &sim{
		cfg:       cfg,
		fn:        fn,
		lab:       l,
		ctx:       l.Context(),
		clock:     outbox.SystemClock{},
		start:     start,
		rng:       rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed5eed5eed5eed)),
		writesEnd: start.Add(cfg.Duration),
	}
	s.writesOn.Store(true)
	if err := s.build(ddb); err != nil {
		_ = l.Stop()
		return nil, err
	}
	return s, nil
}

// build makes the client, the ledger, the Lambda service and the writer.
func (s *sim) build(ddb *outboxlocal.DynamoDB) error {
	cfg, fn := s.cfg, s.fn
	// The embedded server ignores signatures; signing every request would
	// only slow the run down (much so under the race detector).
	client := ddb.NewClient(func(o *dynamodb.Options) { o.Credentials = aws.AnonymousCredentials{} })
	storeOpts := fn.StoreOptions().WithDefaults()
	s.ledger = newLedger(cfg.Buckets, fn.LeaseDuration, s.start, s.start.Add(warmup))
	counted := classifier{ledger: s.ledger, pk: storeOpts.PartitionKey, coordination: storeOpts.KeyPrefix + "#COORDINATION"}
	s.client = &lab.Client{
		Inner:   client,
		Latency: func(any) time.Duration { return cfg.Latency.DynamoDB },
		Observe: counted.observe,
	}
	if cfg.Doorbell {
		s.bell = &lab.Doorbell{Sim: s.lab, Latency: cfg.Latency.Kafka, Down: cfg.DoorbellDown}
	}
	var err error
	if s.lambda, err = s.newLambda(); err != nil {
		return err
	}
	opts := fn.WriterOptions()
	opts.Clock, opts.Logger = s.clock, discardLogger
	if !cfg.WithoutWakeUps {
		if s.notifier, err = s.newWriterNotifier(); err != nil {
			return err
		}
		opts.Notifier = s.notifier
	}
	if s.writer, err = outboxddb.NewWriter(s.client, opts); err != nil {
		return err
	}
	// A service's writer reads the table's layout record once, before its
	// traffic (as the enqueue function does at init): a set-up call, not
	// the steady traffic this study measures.
	return s.writer.CheckLayout(lab.SetUp(s.ctx))
}

// newWriterNotifier returns a writer's wake-up notifier: it reads the
// relays' leases through its own store, as a writer process would, and
// skips the wake-ups a live relay covers.
func (s *sim) newWriterNotifier() (*outboxlambda.Notifier, error) {
	opts := s.fn.StoreOptions()
	opts.Clock, opts.Logger = s.clock, discardLogger
	store, err := outboxddb.NewStore(s.client, opts)
	if err != nil {
		return nil, err
	}
	cfg := outboxlambda.NotifierConfig{
		Client: s.lambda, FunctionName: lab.RelayFunctionName, Clock: s.clock, Logger: discardLogger, Timeout: lab.NotifierTimeout,
		Owners: ownerReader{store}, LeaseDuration: s.fn.LeaseDuration,
	}
	if s.bell != nil {
		cfg.Doorbell = s.bell
	}
	return outboxlambda.NewNotifier(cfg)
}

// ownerReader marks a writer's reads of the coordination partition for
// the classifier.
type ownerReader struct{ inner *outboxddb.Store }

func (o ownerReader) ReadCoordination(ctx context.Context) (lease.Coordination, error) {
	return o.inner.ReadCoordination(withMethod(ctx, methodOwnerView))
}

// stop cancels whatever still runs (after a failure), drops the Lambda
// service's pending steps and waits for the processes and invocations.
func (s *sim) stop() { _ = s.lab.Stop() }

// drive starts the writer's commits and the schedule, then drives the
// run on the lab's driver (lab.Sim.Drive), which lets every instant settle
// (synctest.Wait) and runs the Lambda service's steps due; its step checks
// whether the run is over: writes ended, every message published and the
// function idle.
func (s *sim) drive() error {
	// Drawn before the commits take the generator over.
	phase := time.Duration(s.rng.Int64N(int64(scheduleInterval)))
	// The schedule's first sweep at phase, the next ones every
	// scheduleInterval while the writes go on.
	s.lab.Every(s.start.Add(phase), scheduleInterval, func(now time.Time) bool {
		s.lambda.Send(lab.SchedulePayload, now)
		return now.Add(scheduleInterval).Before(s.writesEnd)
	})
	s.queueCommits()
	if s.cfg.Progress != nil {
		s.lab.Every(s.start.Add(time.Minute), time.Minute, func(now time.Time) bool {
			fmt.Fprintf(s.cfg.Progress, "steady: %v simulated, %d committed, %d pending\n", now.Sub(s.start), s.commits.Load(), s.ledger.pending())
			return true
		})
	}
	over := false
	err := s.lab.Drive(s.writesEnd.Add(s.cfg.RelayTimeout+maxEventAge+time.Minute), func(now time.Time) (bool, error) {
		over = s.finished()
		return over, nil
	})
	switch {
	case err != nil:
		return err
	case !over:
		return fmt.Errorf("steady: %d messages still pending %v after the writes ended", s.ledger.pending(), time.Since(s.writesEnd))
	}
	s.ledger.finish(time.Now())
	return nil
}

// finished reports whether the writes are over, every message is published
// and the function is idle.
func (s *sim) finished() bool {
	return !s.writesOn.Load() && s.inFlight.Load() == 0 && s.ledger.pending() == 0 && s.lambda.Pending() == 0
}

// queueCommits queues, on the driver, the commits of a Poisson process of
// rate cfg.Rate until the writes end (each commit then runs as a
// participant of its own), and the writes' end.
func (s *sim) queueCommits() {
	var commit func(now time.Time) error
	commit = func(now time.Time) error {
		gap, err := s.commitOne()
		if next := now.Add(gap); err == nil && next.Before(s.writesEnd) {
			s.lab.At(next, commit)
		}
		return err
	}
	if s.cfg.Rate > 0 {
		s.lab.At(s.start, commit)
	}
	s.lab.At(s.writesEnd, func(time.Time) error { s.writesOn.Store(false); return nil })
}

// commitOne starts one commit and returns the gap to the next.
func (s *sim) commitOne() (time.Duration, error) {
	n := int(s.commits.Add(1))
	var id outbox.MessageID
	for i := range id {
		id[i] = byte(s.rng.UintN(256))
	}
	id[6] = id[6]&0x0f | 0x40 // version 4
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	key := fmt.Appendf(nil, "customer-%d", s.rng.IntN(keySpace))
	value := fmt.Appendf(nil, `{"order":%d,"total":%d}`, n, s.rng.IntN(100000))
	if pad := s.cfg.ValueSize - len(value); pad > 0 {
		value = append(value, bytes.Repeat([]byte{' '}, pad)...)
	}
	msg, err := outbox.NewMessage(topic, key, value, outbox.MessageOptions{ID: id, CreatedAt: s.clock.Now()})
	if err != nil {
		return 0, err
	}
	s.inFlight.Add(1)
	s.lab.Go(func(context.Context) error {
		defer s.lab.Poke()
		defer s.inFlight.Add(-1)
		return s.commit(msg)
	})
	return time.Duration(s.rng.ExpFloat64() / s.cfg.Rate * float64(time.Second)), nil
}

// commit is the transactional outbox write: reserve the sequence number,
// commit the message in the writer's own transaction, then notify.
func (s *sim) commit(msg outbox.Message) error {
	p, err := s.writer.Prepare(s.ctx, msg)
	if err != nil {
		return fmt.Errorf("steady: reserve message %s: %w", msg.ID, err)
	}
	if _, err := s.client.TransactWriteItems(s.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: p.Items()}); err != nil {
		return fmt.Errorf("steady: commit message %s: %w", msg.ID, err)
	}
	s.ledger.commit(p.Messages()[0], s.clock.Now())
	p.Committed(s.ctx)
	return nil
}

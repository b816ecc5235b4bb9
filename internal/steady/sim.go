package steady

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/internal/lambdasim"
	"github.com/spillway-dev/spillway/internal/simtime"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// simStart is the simulated instant the run begins.
var simStart = time.Date(2030, time.January, 7, 9, 0, 0, 0, time.UTC)

const (
	// settleLimit bounds the wall time the driver waits for the simulated
	// processes to park.
	settleLimit = 2 * time.Minute
	// warmup is the start of the run in which refused writes are expected
	// (the first relays joining at once).
	warmup = time.Minute
	// topic is where every message goes.
	topic = "orders"
	// keySpace is the number of distinct message keys.
	keySpace = 1000
)

// Run runs the scenario described by cfg and reports its figures. It fails
// on a misconfiguration, a failure of the embedded backends or the writers,
// and on a simulation that does not settle or drain; the targets are the
// caller's to check (Report.Check).
func Run(ctx context.Context, cfg Config) (rep Report, err error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Report{}, err
	}
	act := simtime.NewActivity()
	act.Do(ctx, func(ctx context.Context) { rep, err = run(ctx, cfg, act) })
	return rep, err
}

// run is Run with every simulated process a participant of act.
func run(ctx context.Context, cfg Config, act *simtime.Activity) (Report, error) {
	wallStart := time.Now()
	var opts []outboxlocal.DynamoOption
	if cfg.DynamoDBEndpoint != "" {
		opts = append(opts, outboxlocal.WithEndpoint(cfg.DynamoDBEndpoint))
	} else {
		opts = append(opts, outboxlocal.WithoutEnvironment())
	}
	ddb, err := outboxlocal.StartDynamoDB(ctx, opts...)
	if err != nil {
		return Report{}, err
	}
	defer func() { _ = ddb.Close() }()
	table := ddb.NewTableName()
	if err := ddb.CreateTable(ctx, table); err != nil {
		return Report{}, err
	}
	s, err := newSim(ctx, cfg, act, ddb, table)
	if err != nil {
		return Report{}, err
	}
	defer s.stop()
	before := ddb.Counter.Snapshot()
	if err := s.drive(); err != nil {
		return Report{}, err
	}
	rep := s.report(ddb.Counter.Snapshot().Since(before), time.Since(wallStart))
	rep.DynamoDB = "the embedded server"
	if ddb.External {
		rep.DynamoDB = ddb.Endpoint
	}
	return rep, nil
}

// sim is one run: the clock, the backends, the processes and the driver's
// event queue.
type sim struct {
	cfg    Config
	fn     outboxlambda.Config
	ctx    context.Context
	cancel context.CancelFunc
	base   *outboxlocal.ManualClock
	clock  outbox.Clock
	act    *simtime.Activity
	client *simClient
	table  string
	ledger *ledger
	lambda *lambdasim.Function[*env]

	writers   []*writerProc
	rng       *rand.Rand // the driver's only
	commits   int
	writesEnd time.Time
	inFlight  atomic.Int64 // commits not finished
	steps     int

	agenda  *simtime.Agenda
	mu      sync.Mutex
	failure error
	wg      sync.WaitGroup
	traceMu sync.Mutex
}

// writerProc is one writer process with its own wake-up notifier.
type writerProc struct {
	writer   *outboxddb.Writer
	notifier *outboxlambda.Notifier
}

// newSim prepares a run on table: nothing runs before drive.
func newSim(ctx context.Context, cfg Config, act *simtime.Activity, ddb *outboxlocal.DynamoDB, table string) (*sim, error) {
	fn, err := cfg.functionConfig(table)
	if err != nil {
		return nil, err
	}
	base := outboxlocal.NewManualClock(simStart)
	ctx, cancel := context.WithCancel(ctx)
	s := &sim{
		cfg:       cfg,
		fn:        fn,
		ctx:       ctx,
		cancel:    cancel,
		base:      base,
		agenda:    simtime.NewAgenda(base),
		clock:     act.Clock(base),
		act:       act,
		table:     table,
		rng:       rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed5eed5eed5eed)),
		writesEnd: simStart.Add(cfg.Duration),
	}
	if err := s.build(ddb); err != nil {
		cancel()
		return nil, err
	}
	return s, nil
}

// build makes the client, the ledger, the Lambda service, the writers and
// the first events.
func (s *sim) build(ddb *outboxlocal.DynamoDB) error {
	cfg, fn := s.cfg, s.fn
	client := ddb.Client
	if !ddb.External {
		// The embedded server ignores signatures; signing every request
		// would only slow the run down (much so under the race detector).
		client = ddb.NewClient(func(o *dynamodb.Options) { o.Credentials = aws.AnonymousCredentials{} })
	}
	storeOpts := fn.StoreOptions().WithDefaults()
	s.client = &simClient{inner: client, s: s, pk: storeOpts.PartitionKey, coordination: storeOpts.KeyPrefix + "#COORDINATION"}
	s.ledger = newLedger(cfg.Buckets, fn.LeaseDuration, simStart.Add(warmup))
	var err error
	if s.lambda, err = s.newLambda(); err != nil {
		return err
	}
	for range cfg.Writers {
		w := &writerProc{}
		opts := fn.StoreOptions()
		opts.Clock, opts.Logger = s.clock, cfg.Logger
		if !cfg.WithoutWakeUps {
			if w.notifier, err = s.newWriterNotifier(); err != nil {
				return err
			}
			opts.Notifier = w.notifier
		}
		if w.writer, err = outboxddb.NewWriter(s.client, opts); err != nil {
			return err
		}
		s.writers = append(s.writers, w)
	}
	if cfg.Rate > 0 {
		s.at(simStart, s.commitEvent)
	}
	if cfg.ScheduleInterval > 0 {
		phase := time.Duration(s.rng.Int64N(int64(cfg.ScheduleInterval)))
		s.at(simStart.Add(phase), s.scheduleEvent)
	}
	return nil
}

// notifierTimeout replaces the notifier's wall-clock bound on one invoke:
// the simulated invoke takes simulated time, which a loaded machine may
// stretch far beyond the real bound.
const notifierTimeout = time.Hour

// newNotifier returns a wake-up notifier whose invokes reach the simulated
// Lambda service.
func (s *sim) newNotifier() (*outboxlambda.Notifier, error) {
	return outboxlambda.NewNotifier(outboxlambda.NotifierConfig{
		Client: s.lambda, FunctionName: relayFunction, Clock: s.clock, Logger: s.cfg.Logger, Timeout: notifierTimeout,
	})
}

// newWriterNotifier returns a writer's wake-up notifier: it reads the
// relays' leases through its own store, as a writer process would, and
// skips the wake-ups a live relay covers.
func (s *sim) newWriterNotifier() (*outboxlambda.Notifier, error) {
	opts := s.fn.StoreOptions()
	opts.Clock, opts.Logger = s.clock, s.cfg.Logger
	store, err := outboxddb.NewStore(s.client, opts)
	if err != nil {
		return nil, err
	}
	return outboxlambda.NewNotifier(outboxlambda.NotifierConfig{
		Client: s.lambda, FunctionName: relayFunction, Clock: s.clock, Logger: s.cfg.Logger, Timeout: notifierTimeout,
		Owners: ownerReader{store}, LeaseDuration: s.fn.LeaseDuration,
	})
}

// ownerReader marks a writer's reads of the coordination partition for
// simClient's classification.
type ownerReader struct{ inner *outboxddb.Store }

func (o ownerReader) ReadCoordination(ctx context.Context) (outbox.Coordination, error) {
	return o.inner.ReadCoordination(withMethod(ctx, methodOwnerView))
}

// stop cancels whatever still runs (after a failure) and waits for it.
func (s *sim) stop() {
	s.cancel()
	s.wg.Wait()
}

// at schedules fn at t; any goroutine may call it.
func (s *sim) at(t time.Time, fn func(now time.Time) error) { s.agenda.At(t, fn) }

// tracef writes one trace line stamped with the simulated time.
func (s *sim) tracef(format string, args ...any) {
	if s.cfg.Trace == nil {
		return
	}
	line := fmt.Sprintf("%12s "+format+"\n", append([]any{s.base.Now().Sub(simStart).Round(time.Microsecond)}, args...)...)
	s.traceMu.Lock()
	defer s.traceMu.Unlock()
	_, _ = io.WriteString(s.cfg.Trace, line)
}

// fail records the first failure of a simulated process.
func (s *sim) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure == nil {
		s.failure = err
	}
}

func (s *sim) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure
}

// drive is the driver loop: wait until every simulated process is parked,
// account for the instant, run the events due (the Lambda service's
// included), and otherwise move the clock to the next event or timer.
func (s *sim) drive() error {
	limit := s.writesEnd.Add(s.cfg.RelayTimeout + s.cfg.MaxEventAge + time.Minute)
	nextProgress := simStart.Add(time.Minute)
	for {
		if err := s.act.Settle(s.ctx, settleLimit); err != nil {
			return err
		}
		if err := s.failed(); err != nil {
			return err
		}
		now := s.base.Now()
		s.ledger.observe(now)
		ran, err := s.agenda.RunDue(now)
		if err != nil {
			return err
		}
		if ran {
			continue
		}
		if s.finished(now) {
			s.ledger.finish(now)
			return nil
		}
		if now.After(limit) {
			return fmt.Errorf("steady: %d messages still pending %v after the writes ended", s.ledger.pending(), now.Sub(s.writesEnd))
		}
		if s.cfg.Progress != nil && !now.Before(nextProgress) {
			fmt.Fprintf(s.cfg.Progress, "steady: %v simulated, %d committed, %d pending\n", now.Sub(simStart).Round(time.Second), s.commits, s.ledger.pending())
			for !nextProgress.After(now) {
				nextProgress = nextProgress.Add(time.Minute)
			}
		}
		if !s.agenda.Advance(now) {
			return errors.New("steady: no timer pending and nothing to do: the simulation is stuck")
		}
		s.steps++
	}
}

// finished reports whether the writes are over, every message is published
// and the function is idle.
func (s *sim) finished(now time.Time) bool {
	return !now.Before(s.writesEnd) && s.inFlight.Load() == 0 && s.ledger.pending() == 0 && s.lambda.Pending() == 0
}

// commitEvent starts one commit and schedules the next, a Poisson process
// of rate cfg.Rate until the writes end.
func (s *sim) commitEvent(now time.Time) error {
	w := s.writers[s.commits%len(s.writers)]
	s.commits++
	var id outbox.MessageID
	for i := range id {
		id[i] = byte(s.rng.UintN(256))
	}
	id[6] = id[6]&0x0f | 0x40 // version 4
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	key := fmt.Appendf(nil, "customer-%d", s.rng.IntN(keySpace))
	value := fmt.Appendf(nil, `{"order":%d,"total":%d}`, s.commits, s.rng.IntN(100000))
	if pad := s.cfg.ValueSize - len(value); pad > 0 {
		value = append(value, bytes.Repeat([]byte{' '}, pad)...)
	}
	msg, err := outbox.NewMessage(topic, key, value, outbox.MessageOptions{ID: id, BucketCount: s.cfg.Buckets, CreatedAt: now})
	if err != nil {
		return err
	}
	s.inFlight.Add(1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.inFlight.Add(-1)
		if err := s.commit(w, msg); err != nil {
			s.fail(err)
		}
	}()
	next := now.Add(time.Duration(s.rng.ExpFloat64() / s.cfg.Rate * float64(time.Second)))
	if next.Before(s.writesEnd) {
		s.at(next, s.commitEvent)
	}
	return nil
}

// commit is the transactional outbox write: reserve the sequence number,
// commit the message in the writer's own transaction, then notify.
func (s *sim) commit(w *writerProc, msg outbox.Message) error {
	items, msgs, err := w.writer.TransactItems(s.ctx, []outbox.Message{msg})
	if err != nil {
		return fmt.Errorf("steady: reserve message %s: %w", msg.ID, err)
	}
	if _, err := s.client.TransactWriteItems(s.ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}); err != nil {
		return fmt.Errorf("steady: commit message %s: %w", msg.ID, err)
	}
	s.ledger.commit(msgs[0], s.clock.Now())
	w.writer.NotifyCommitted(s.ctx, msgs...)
	return nil
}

// scheduleEvent sends the schedule's sweep and schedules the next one while
// the writes go on.
func (s *sim) scheduleEvent(now time.Time) error {
	s.lambda.Send(schedulePayload, now)
	if next := now.Add(s.cfg.ScheduleInterval); next.Before(s.writesEnd) {
		s.at(next, s.scheduleEvent)
	}
	return nil
}

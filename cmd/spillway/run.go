package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spillway-dev/spillway/internal/lambdasim"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxobs/emf"
)

const (
	demoTable         = "spillway-demo"
	demoRelayFunction = "spillway-relay"
	demoEnqueueFn     = "spillway-enqueue"
)

// runSummary is what run prints at the end (and --json emits).
type runSummary struct {
	Verdict        verdict         `json:"verdict"`
	Elapsed        float64         `json:"elapsedSeconds"`
	Pending        int64           `json:"pendingAfter"`
	Requests       map[string]int  `json:"dynamodbRequests"`
	RequestsPerMsg float64         `json:"requestsPerMessage"`
	WCUPerMsg      float64         `json:"writeUnitsPerMessage"`
	RCUPerMsg      float64         `json:"readUnitsPerMessage"`
	Refused        int             `json:"refusedConditionalWrites"`
	Relay          lambdasim.Stats `json:"relayFunction"`
	EMFFile        string          `json:"emfFile"`
	EMFLines       int             `json:"emfLines"`
	OTelSpans      int             `json:"otelSpans,omitempty"`
	Inbox          inboxFigures    `json:"inboxConsumer"`
}

// runFlags are run's options.
type runFlags struct {
	messages, keys, concurrency int
	timeout, schedule           time.Duration
	targetLatency               time.Duration
	emfPath, tracing            string
	dynamoEndpoint              string
	topics                      topicList
	serve, asJSON, verbose      bool
}

func parseRunFlags(args []string, stdout, stderr io.Writer) (runFlags, error) {
	var f runFlags
	fs := newFlagSet("run", stdout)
	fs.warn = stderr
	fs.IntVar(&f.messages, "messages", 3000, "demo messages to enqueue")
	fs.IntVar(&f.keys, "keys", 60, "distinct message keys; each writes to both demo topics")
	fs.IntVar(&f.concurrency, "concurrency", 4, "reserved concurrency of the relay function (execution environments)")
	fs.DurationVar(&f.timeout, "relay-timeout", 15*time.Second, "the relay function's timeout: each invocation's deadline (the stack's relayTimeout)")
	addAlias(fs.FlagSet, "timeout", "relay-timeout", "use --relay-timeout, each relay invocation's deadline (drain's --timeout bounds the whole drain)")
	fs.DurationVar(&f.targetLatency, "target-latency", 0, "the relay function's SPILLWAY_TARGET_LATENCY: how soon a running relay looks for a message committed to a busy bucket it holds (0: the relay's default)")
	fs.DurationVar(&f.schedule, "schedule", 5*time.Second, "interval of the schedule's sweep invocations (1 minute on AWS)")
	fs.StringVar(&f.emfPath, "emf", "", "file receiving the functions' EMF metric lines (default a new spillway-run-emf-*.jsonl in the temporary directory, so concurrent runs never share one)")
	fs.StringVar(&f.dynamoEndpoint, "dynamodb-endpoint", "", "run on the DynamoDB at `URL` (DynamoDB Local, LocalStack) instead of the embedded one, in a table of its own deleted afterwards")
	fs.BoolVar(&f.serve, "serve", false, "keep the embedded endpoints up after the demo and print their addresses")
	fs.Var(&f.topics, "topics", "further `TOPICS` to create on the embedded Kafka, comma-separated, each with its dead-letter topic NAME.dlq (the demo's are always there)")
	fs.BoolVar(&f.asJSON, "json", false, "print the summary as JSON")
	verbose := fs.verbose("log the functions' activity to stderr")
	fs.StringVar(&f.tracing, "tracing", outboxconf.TracingOff, "off, or otel: trace the functions with OpenTelemetry into a local OTLP receiver and print its span count")
	if err := parse(fs, args); err != nil {
		return f, err
	}
	f.verbose = *verbose
	if f.messages < 1 || f.keys < 1 || f.concurrency < 1 {
		return f, usagef("--messages, --keys and --concurrency must be >= 1")
	}
	if f.targetLatency < 0 {
		return f, usagef("--target-latency must be >= 0")
	}
	return f, nil
}

// demo is one run of the whole system on the embedded backends.
type demo struct {
	flags  runFlags
	stdout io.Writer
	log    *slog.Logger
	ddb    *outboxlocal.DynamoDB
	// table and ordersTable are demoTable and demoOrdersTable on the
	// embedded server, fresh names deleted afterwards elsewhere.
	table, ordersTable string
	kafka              *outboxlocal.Kafka
	cfg                outboxlambda.Config
	kcfg               outboxkafka.Config
	emfOut             io.Writer
	sim                *lambdasim.Function[*outboxlambda.RelayHandler]
	sched              *lambdasim.WallScheduler
	tr                 *runTracing
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags, err := parseRunFlags(args, stdout, stderr)
	if err != nil {
		return err
	}
	start := time.Now()
	level := slog.LevelWarn
	if flags.verbose {
		level = slog.LevelInfo
	}
	d := &demo{flags: flags, stdout: stdout, log: slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))}
	if d.tr, err = startRunTracing(ctx, flags.tracing); err != nil {
		return err
	}
	defer d.tr.close()
	closeBackends, err := d.startBackends(ctx, stdout)
	defer closeBackends()
	if err != nil {
		return err
	}
	emfFile, err := createEMFFile(&d.flags.emfPath)
	if err != nil {
		return err
	}
	defer emfFile.Close()
	d.emfOut = &lockedWriter{w: emfFile}
	// Counting starts after set-up: the figures are the demo's own.
	d.ddb.Counter.Reset()

	sum, err := d.run(ctx, start)
	if err != nil {
		return err
	}
	if err := d.report(ctx, &sum); err != nil {
		return err
	}
	if !flags.asJSON {
		d.printNext()
	}
	if flags.serve {
		fmt.Fprintf(stdout, "\ntopics: %s (more with --topics)", strings.Join(d.flags.kafkaTopics(), ", "))
		fmt.Fprintf(stdout, "\nserving: %s=%s %s=%s %s=%s (Ctrl-C to stop)\n",
			outboxconf.EnvDynamoDBEndpoint, d.ddb.Endpoint, outboxconf.EnvKafkaBrokers, strings.Join(d.kafka.Brokers, ","), outboxconf.EnvTable, d.table)
		<-ctx.Done()
	}
	return nil
}

// printNext suggests the commands to try after the demo: with --serve, the
// operator CLI against the endpoints still up.
func (d *demo) printNext() {
	if !d.flags.serve {
		fmt.Fprintln(d.stdout, "\nNext: make run ARGS=--serve keeps the embedded endpoints up for the operator CLI (go run ./cmd/spillway help);")
		fmt.Fprintln(d.stdout, "      make test runs every test.")
		return
	}
	conn := fmt.Sprintf("--dynamodb-endpoint %s --table %s", d.ddb.Endpoint, d.table)
	fmt.Fprintf(d.stdout, "\nTry, in another terminal:\n")
	fmt.Fprintf(d.stdout, "  go run ./cmd/spillway status %s\n", conn)
	fmt.Fprintf(d.stdout, "  go run ./cmd/spillway enqueue --file events/enqueue.single.json %s\n", conn)
	fmt.Fprintf(d.stdout, "  go run ./cmd/spillway drain --brokers %s %s\n", strings.Join(d.kafka.Brokers, ","), conn)
}

// startBackends starts the embedded DynamoDB and Kafka, loads the
// functions' configuration pointing at them and creates the table. The
// returned function closes what was started, also after an error.
func (d *demo) startBackends(ctx context.Context, stdout io.Writer) (func(), error) {
	var closers []func() error
	closeAll := func() {
		for _, c := range slices.Backward(closers) {
			_ = c()
		}
	}
	var err error
	ddbOpt, kind := outboxlocal.WithoutEnvironment(), "embedded DynamoDB"
	if d.flags.dynamoEndpoint != "" {
		ddbOpt, kind = outboxlocal.WithEndpoint(d.flags.dynamoEndpoint), "DynamoDB"
	}
	if d.ddb, err = outboxlocal.StartDynamoDB(ctx, ddbOpt); err != nil {
		return closeAll, fmt.Errorf("start %s: %w", kind, err)
	}
	closers = append(closers, d.ddb.Close)
	d.table, d.ordersTable = demoTable, demoOrdersTable
	if d.ddb.External {
		// Tables of the run's own: another run's rows would fail its checks.
		d.table = d.ddb.NewTableName()
		d.ordersTable = d.table + "-orders"
		d.ddb.DeleteOnClose(d.table)
		d.ddb.DeleteOnClose(d.ordersTable)
	}
	if d.kafka, err = outboxlocal.StartKafka(ctx, outboxlocal.KafkaConfig{Topics: d.flags.kafkaTopics(), IgnoreEnvironment: true}); err != nil {
		return closeAll, fmt.Errorf("start embedded Kafka: %w", err)
	}
	closers = append(closers, d.kafka.Close)
	fmt.Fprintf(stdout, "%s at %s, embedded Kafka at %s\n", kind, d.ddb.Endpoint, strings.Join(d.kafka.Brokers, ","))
	env := map[string]string{
		outboxconf.EnvTable:            d.table,
		outboxconf.EnvDynamoDBEndpoint: d.ddb.Endpoint,
		outboxconf.EnvKafkaBrokers:     strings.Join(d.kafka.Brokers, ","),
		outboxconf.EnvRelayFunction:    demoRelayFunction,
		outboxconf.EnvTopics:           strings.Join(d.flags.relayTopics(), ","),
		outboxconf.EnvStopMargin:       "2s",
	}
	if d.flags.targetLatency > 0 {
		env[outboxconf.EnvTargetLatency] = d.flags.targetLatency.String()
	}
	if d.cfg, err = outboxlambda.LoadConfig(func(k string) string { return env[k] }); err != nil {
		return closeAll, err
	}
	if err := outboxddb.CreateIfNotExists(ctx, d.ddb.Client, d.cfg.TableOptions()); err != nil {
		return closeAll, err
	}
	d.kcfg, err = d.cfg.KafkaConfig(ctx, nil)
	return closeAll, err
}

// newRelayEnv builds one execution environment of the relay function: its
// own store, publisher, notifier and metrics recorder, as on Lambda.
func (d *demo) newRelayEnv(int) (*outboxlambda.RelayHandler, error) {
	rec, err := emf.NewRecorder(emf.Config{Namespace: d.cfg.MetricsNamespace, Outbox: d.cfg.OutboxName, FunctionName: demoRelayFunction})
	if err != nil {
		return nil, err
	}
	opts := d.cfg.StoreOptions()
	opts.Hooks, opts.Logger = []outbox.Hook{rec}, d.log
	store, err := outboxddb.NewStore(d.ddb.Client, opts)
	if err != nil {
		return nil, err
	}
	pub, err := outboxkafka.New(d.kcfg)
	if err != nil {
		return nil, err
	}
	notifier, err := outboxlambda.NewNotifier(outboxlambda.NotifierConfig{Client: d.sim, FunctionName: demoRelayFunction, Logger: d.log})
	if err != nil {
		return nil, err
	}
	return outboxlambda.NewRelayHandler(outboxlambda.RelayHandlerConfig{
		Config: d.cfg, FunctionName: demoRelayFunction, Store: store, Publisher: pub, Notifier: notifier,
		Hooks: []outbox.Hook{rec}, Logger: d.log, Metrics: rec, MetricsOutput: d.emfOut, Tracer: d.tr.tracer(), Tracing: d.tr.tracing(),
	})
}

// newEnqueueHandler builds the enqueue function, whose writer wakes the
// simulated relay function after every commit.
func (d *demo) newEnqueueHandler() (*outboxlambda.EnqueueHandler, error) {
	rec, err := emf.NewRecorder(emf.Config{Namespace: d.cfg.MetricsNamespace, Outbox: d.cfg.OutboxName, FunctionName: demoEnqueueFn})
	if err != nil {
		return nil, err
	}
	wakeups, err := outboxlambda.NewNotifier(outboxlambda.NotifierConfig{Client: d.sim, FunctionName: demoRelayFunction, Hooks: []outbox.Hook{rec}, Logger: d.log})
	if err != nil {
		return nil, err
	}
	opts := d.cfg.WriterOptions()
	opts.Hooks, opts.Logger, opts.Notifier = []outbox.Hook{rec}, d.log, wakeups
	writer, err := outboxddb.NewWriter(d.ddb.Client, opts)
	if err != nil {
		return nil, err
	}
	return outboxlambda.NewEnqueueHandler(outboxlambda.EnqueueHandlerConfig{
		Config: d.cfg, Writer: writer, Hooks: []outbox.Hook{rec}, Logger: d.log, Metrics: rec, MetricsOutput: d.emfOut,
		Tracing: d.tr.tracing(), FunctionName: demoEnqueueFn,
	})
}

// run enqueues the workload while the simulated relay function and the
// schedule relay it and a consumer reads the topics; it returns once every
// message was consumed and every goroutine it started has ended.
func (d *demo) run(ctx context.Context, start time.Time) (runSummary, error) {
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	d.sched = &lambdasim.WallScheduler{}
	var err error
	d.sim, err = lambdasim.New(lambdasim.Config[*outboxlambda.RelayHandler]{
		Scheduler: d.sched, Context: runCtx,
		ReservedConcurrency: d.flags.concurrency, Timeout: d.flags.timeout, MaxEventAge: time.Minute,
		NewEnv: d.newRelayEnv,
	})
	if err != nil {
		return runSummary{}, err
	}
	defer d.sim.Wait()
	enqueue, err := d.newEnqueueHandler()
	if err != nil {
		return runSummary{}, err
	}
	cons, err := newConsumer(d.kafka.Brokers, dedupHeader)
	if err != nil {
		return runSummary{}, err
	}
	defer cons.client.Close()
	var wg sync.WaitGroup
	// Cancelled before the deferred waits above run.
	defer func() { cancelRun(); wg.Wait() }()
	wg.Go(func() { cons.run(runCtx) })
	wg.Go(func() { d.sweep(runCtx) })
	// The inbox consumer's client is not counted: the summary's DynamoDB
	// figures are the writers' and the relays'.
	inboxClient, err := dynamoClient(ctx, d.cfg)
	if err != nil {
		return runSummary{}, err
	}
	inb, err := newInboxDemo(inboxClient, d.table, d.kafka.Brokers, d.log)
	if err != nil {
		return runSummary{}, err
	}
	wg.Go(func() { _ = inb.run(runCtx) })

	service, err := d.newServiceWriter(ctx)
	if err != nil {
		return runSummary{}, err
	}
	wl := &workload{messages: d.flags.messages, keys: d.flags.keys, producers: min(4, d.flags.keys), largeEvery: 97, seed: 20261130, service: service, ordersTable: d.ordersTable}
	prodErr := make(chan error, 1)
	wg.Go(func() { prodErr <- wl.run(runCtx, enqueue) })
	if err := d.progress(ctx, start, wl, cons, inb, prodErr); err != nil {
		return runSummary{}, err
	}
	cancelRun()
	wg.Wait()
	d.sim.Wait()
	v := cons.check(wl.order)
	v.Committed = int(wl.committed.Load())
	return runSummary{Verdict: v, Elapsed: time.Since(start).Seconds(), Relay: d.sim.Stats(), EMFFile: d.flags.emfPath,
		Inbox: inb.figures()}, nil
}

// sweep sends the schedule's event every interval until ctx ends.
func (d *demo) sweep(ctx context.Context) {
	tick := time.NewTicker(d.flags.schedule)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			d.sim.Send([]byte(`{"trigger":"schedule"}`), now)
		}
	}
}

// progress prints a line whenever what it shows changed, until every
// enqueued message was consumed and deleted and no relay invocation runs
// (events still queued, throttled wake-ups that would find nothing to do,
// are discarded when the run ends); it fails after a minute without
// progress.
func (d *demo) progress(ctx context.Context, start time.Time, wl *workload, cons *consumer, inb *inboxDemo, prodErr chan error) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	// An uncounted client: the summary's request counts are the demo's.
	probe, err := d.probeStore(ctx)
	if err != nil {
		return err
	}
	produced := false
	// Progress is a message published or applied by the inbox: on a busy
	// machine the inbox applies the last messages for over a minute after
	// the relays published them.
	lastProgress, lastCount := time.Now(), int64(-1)
	var lastLine string
	var lastPrint time.Time
	say := func(line string) {
		fmt.Fprintf(d.stdout, "%5.1fs  %s\n", time.Since(start).Seconds(), line)
		lastLine, lastPrint = line, time.Now()
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-prodErr:
			if err != nil {
				return err
			}
			produced, prodErr = true, nil
		case <-tick.C:
		}
		if err := d.sched.Err(); err != nil {
			return fmt.Errorf("relay function: %w", err)
		}
		unique, running := cons.unique(), d.sim.Running()
		// Progress is a record published or a verdict of the inbox
		// consumer, which finishes after the relays.
		f := inb.figures()
		if count := int64(unique) + f.Applied + f.Duplicates + f.DeadLettered; count != lastCount {
			lastProgress, lastCount = time.Now(), count
		}
		published := produced && unique >= d.flags.messages
		switch line := fmt.Sprintf("enqueued %d/%d  published %d  relay invocations running %d", wl.enqueued.Load(), d.flags.messages, unique, running); {
		case !published && line != lastLine && time.Since(lastPrint) >= time.Second:
			say(line)
		case published && (running > 0 || !inb.done(d.flags.messages)) && time.Since(lastPrint) >= time.Second:
			if line := fmt.Sprintf("every message published; waiting for the relay invocations running (%d) to return and the inbox consumer (%d applied)",
				running, inb.figures().Applied); line != lastLine {
				say(line)
			}
		}
		if published && running == 0 && inb.done(d.flags.messages) {
			// A relay stopped by its budget between publishing and deleting
			// left a continuation queued: wait for it.
			if left, err := probe.PendingBuckets(ctx, allBuckets(d.cfg.BucketCount)); err == nil && len(left) == 0 {
				say(fmt.Sprintf("every message published and deleted from the outbox; %d relay invocations in all", d.sim.Stats().Invocations))
				return nil
			}
		}
		if time.Since(lastProgress) > time.Minute {
			return errors.New("no progress for a minute; the demo is stuck")
		}
	}
}

// probeStore returns a store on a client of the embedded endpoint that the
// request counter does not see.
func (d *demo) probeStore(ctx context.Context) (*outboxddb.Store, error) {
	client, err := dynamoClient(ctx, d.cfg)
	if err != nil {
		return nil, err
	}
	return outboxddb.NewStore(client, d.cfg.StoreOptions())
}

// report adds the DynamoDB figures, the backlog and the EMF check to sum,
// prints it and fails when a message is missing, out of order or pending.
func (d *demo) report(ctx context.Context, sum *runSummary) error {
	counts := d.ddb.Counter.Snapshot()
	sum.Requests, sum.Refused = counts.Requests, counts.Refused
	if n := float64(sum.Verdict.Delivered); n > 0 {
		sum.RequestsPerMsg = float64(counts.TotalRequests()) / n
		sum.WCUPerMsg = counts.WriteUnits / n
		sum.RCUPerMsg = counts.ReadUnits / n
	}
	store, err := outboxddb.NewStore(d.ddb.Client, d.cfg.StoreOptions())
	if err != nil {
		return err
	}
	bl, err := store.Backlog(ctx)
	if err != nil {
		return err
	}
	sum.Pending = bl.Pending
	if sum.EMFLines, err = checkEMF(d.flags.emfPath); err != nil {
		return err
	}
	if sum.OTelSpans, err = d.tr.spans(ctx); err != nil {
		return err
	}
	if d.flags.asJSON {
		enc := json.NewEncoder(d.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(sum); err != nil {
			return err
		}
	} else {
		printSummary(d.stdout, *sum, d.flags.verbose, d.flags.concurrency)
		sum.Inbox.print(d.stdout)
		d.tr.report(d.stdout, sum.OTelSpans)
	}
	if why := sum.Inbox.failed(sum.Verdict.Enqueued); why != "" {
		return fmt.Errorf("demo failed: %s", why)
	}
	if v := sum.Verdict; v.Missing > 0 || v.OrderBroken > 0 || v.MissingHeader > 0 || sum.Pending > 0 {
		return fmt.Errorf("demo failed: %d missing, %d keys out of order, %d records without the id header, %d still pending",
			v.Missing, v.OrderBroken, v.MissingHeader, sum.Pending)
	}
	return nil
}

// printSummary prints s in words a newcomer reads; verbose adds the raw
// counters (stop reasons, throttles) under the names the metrics and logs
// use. concurrency is the relay's reserved concurrency.
func printSummary(w io.Writer, s runSummary, verbose bool, concurrency int) {
	v := s.Verdict
	order := "kept"
	if v.OrderBroken > 0 {
		order = fmt.Sprintf("BROKEN for %d topic/key pairs (%s)", v.OrderBroken, v.FirstProblem)
	}
	r := s.Relay
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nSummary (%.1fs)\n", s.Elapsed)
	fmt.Fprintf(tw, "  messages enqueued\t%d (%d by the enqueue function, %d by the Go writer with their order items)\n",
		v.Enqueued, v.Enqueued-v.Committed, v.Committed)
	fmt.Fprintf(tw, "  messages published\t%d (records %d, duplicates %d, missing %d)\n", v.Delivered, v.Records, v.Duplicates, v.Missing)
	fmt.Fprintf(tw, "  per-key order\t%s for %d keys (each key writes to %d topics: %d topic/key pairs checked)\n",
		order, v.KeysChecked, v.Topics, v.PairsChecked)
	fmt.Fprintf(tw, "  pending afterwards\t%d\n", s.Pending)
	fmt.Fprintf(tw, "  DynamoDB per message\t%.2f requests, %.2f write units, %.2f read units (refused writes %d)\n",
		s.RequestsPerMsg, s.WCUPerMsg, s.RCUPerMsg, s.Refused)
	fmt.Fprintf(tw, "  relay invocations\t%d: %s\n", r.Invocations, inWords(r.InvocationsByTrigger, triggerWords))
	fmt.Fprintf(tw, "    what they did\t%s\n", inWords(r.InvocationsByReason, outcomeWords))
	fmt.Fprintf(tw, "  Lambda\t%s\n", lambdaInWords(r, concurrency))
	if verbose {
		fmt.Fprintf(tw, "  relay invocations\t%d, %d of them joined the fleet (wrote a heartbeat and claimed buckets)\n", r.Invocations, r.JoinedInvocations)
		fmt.Fprintf(tw, "    by trigger\t%s\n", countList(r.InvocationsByTrigger))
		fmt.Fprintf(tw, "    by outcome\t%s\n", countList(r.InvocationsByReason))
		fmt.Fprintf(tw, "  relay environments\t%d, continuations %d, releases skipped %d, throttled %d, dropped %d, killed %d, errors %d\n",
			r.Environments, r.Continuations, r.ReleasesSkipped, r.Throttled, r.Dropped, r.Killed, r.Errors)
	}
	fmt.Fprintf(tw, "  EMF metric lines\t%d in %s (all parse)\n", s.EMFLines, s.EMFFile)
	fmt.Fprintf(tw, "\n  DynamoDB request\tcount\n")
	for _, op := range slices.Sorted(maps.Keys(s.Requests)) {
		fmt.Fprintf(tw, "  %s\t%d\n", op, s.Requests[op])
	}
	tw.Flush()
}

// triggerWords and outcomeWords say what each count of a trigger or stop
// reason means; a name missing here prints as itself.
var (
	triggerWords = map[string]string{
		string(outbox.TriggerWake):     "woken by a commit (or by a relay handing over)",
		string(outbox.TriggerSchedule): "started by the schedule",
		string(outbox.TriggerDirect):   "started directly",
	}
	outcomeWords = map[string]string{
		string(outbox.StopDrained):        "published until nothing was left",
		string(outbox.StopPeerLive):       "returned at once: another relay was already publishing their buckets",
		string(outbox.StopNothingPending): "found nothing to publish",
		string(outbox.StopBudget):         "reached their time limit and woke a successor to go on",
		string(outbox.StopCancelled):      "were stopped when the demo ended",
		string(outbox.StopFatal):          "failed to start",
	}
)

// inWords prints counts as "n words; m words", largest first, each name
// replaced by its words.
func inWords(counts map[string]int, words map[string]string) string {
	if len(counts) == 0 {
		return "none"
	}
	var parts []string
	for _, name := range largestFirst(counts) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[name], cmp.Or(words[name], name)))
	}
	return strings.Join(parts, "; ")
}

// lambdaInWords says how the relay function fared on the Lambda emulator:
// a wake-up that waits for a free environment is Lambda's normal queueing
// under reserved concurrency, not a failure, so it is said as such.
func lambdaInWords(r lambdasim.Stats, concurrency int) string {
	out := fmt.Sprintf("%d execution environments (reserved concurrency %d)", r.Environments, concurrency)
	if r.Throttled > 0 {
		out += fmt.Sprintf("; %d invocations waited for a free one, as Lambda queues them", r.Throttled)
	}
	if r.Dropped+r.Killed+r.Errors == 0 {
		return out + "; none failed, timed out or was dropped"
	}
	if r.Errors > 0 {
		out += fmt.Sprintf("; %d failed", r.Errors)
	}
	if r.Killed > 0 {
		out += fmt.Sprintf("; %d ran past their deadline and were stopped (their leases lapse, another relay takes over)", r.Killed)
	}
	if r.Dropped > 0 {
		out += fmt.Sprintf("; %d queued invocations waited too long and were dropped (the schedule covers them)", r.Dropped)
	}
	return out
}

// countList prints counts as "a 3, b 2, c 2": largest first, then by name.
func countList(counts map[string]int) string {
	if len(counts) == 0 {
		return "none"
	}
	var parts []string
	for _, name := range largestFirst(counts) {
		parts = append(parts, fmt.Sprintf("%s %d", name, counts[name]))
	}
	return strings.Join(parts, ", ")
}

// largestFirst returns the names of counts, largest count first, then by
// name.
func largestFirst(counts map[string]int) []string {
	return slices.SortedFunc(maps.Keys(counts), func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), strings.Compare(a, b))
	})
}

// checkEMF parses every line the functions wrote and checks it is an EMF
// document; it returns the number of lines.
func checkEMF(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 2<<20)
	n := 0
	for sc.Scan() {
		n++
		var doc struct {
			AWS *struct {
				Timestamp         int64             `json:"Timestamp"`
				CloudWatchMetrics []json.RawMessage `json:"CloudWatchMetrics"`
			} `json:"_aws"`
		}
		if err := json.Unmarshal(sc.Bytes(), &doc); err != nil {
			return n, fmt.Errorf("EMF line %d of %s: %w", n, path, err)
		}
		if doc.AWS == nil || doc.AWS.Timestamp == 0 || len(doc.AWS.CloudWatchMetrics) == 0 {
			return n, fmt.Errorf("EMF line %d of %s has no _aws metadata", n, path)
		}
	}
	return n, sc.Err()
}

// createEMFFile creates the file the functions' EMF lines go to: the one
// named, or a new one in the temporary directory whose name it stores in
// path, because a fixed default would mix the lines of concurrent runs and
// the summary counts them.
func createEMFFile(path *string) (*os.File, error) {
	if *path != "" {
		return os.Create(*path)
	}
	f, err := os.CreateTemp("", "spillway-run-emf-*.jsonl")
	if err != nil {
		return nil, fmt.Errorf("run: EMF file: %w", err)
	}
	*path = f.Name()
	return f, nil
}

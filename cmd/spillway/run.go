//go:build !spillway.ops

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// opsBuild is false: this build has the local commands (see opsbuild.go).
const opsBuild = false

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
}

// runFlags are run's options.
type runFlags struct {
	messages, keys, concurrency int
	timeout, schedule           time.Duration
	emfPath, tracing            string
	serve, asJSON, verbose      bool
}

func parseRunFlags(args []string, stderr io.Writer) (runFlags, error) {
	var f runFlags
	fs := newFlagSet("run", "run [--messages N] [--keys N] [--concurrency N] [--timeout D] [--tracing off|otel] [--serve] [--json]", stderr)
	fs.IntVar(&f.messages, "messages", 3000, "demo messages to enqueue")
	fs.IntVar(&f.keys, "keys", 60, "distinct message keys")
	fs.IntVar(&f.concurrency, "concurrency", 4, "reserved concurrency of the relay function (execution environments)")
	fs.DurationVar(&f.timeout, "timeout", 15*time.Second, "relay function timeout (each invocation's deadline)")
	fs.DurationVar(&f.schedule, "schedule", 5*time.Second, "interval of the schedule's sweep invocations (1 minute on AWS)")
	fs.StringVar(&f.emfPath, "emf", filepath.Join(os.TempDir(), "spillway-run-emf.jsonl"), "file receiving the functions' EMF metric lines")
	fs.BoolVar(&f.serve, "serve", false, "keep the embedded endpoints up after the demo and print their addresses")
	fs.BoolVar(&f.asJSON, "json", false, "print the summary as JSON")
	fs.BoolVar(&f.verbose, "v", false, "log the functions' activity to stderr")
	fs.StringVar(&f.tracing, "tracing", outboxconf.TracingOff, "off, or otel: trace the functions with OpenTelemetry into a local OTLP receiver and print its span count")
	if err := parse(fs, args); err != nil {
		return f, err
	}
	if f.messages < 1 || f.keys < 1 || f.concurrency < 1 {
		return f, usagef("--messages, --keys and --concurrency must be >= 1")
	}
	return f, nil
}

// demo is one run of the whole system on the embedded backends.
type demo struct {
	flags  runFlags
	stdout io.Writer
	log    *slog.Logger
	ddb    *outboxlocal.DynamoDB
	kafka  *outboxlocal.Kafka
	cfg    outboxlambda.Config
	kcfg   outboxkafka.Config
	emfOut io.Writer
	sim    *lambdasim.Function[*outboxlambda.RelayHandler]
	sched  *lambdasim.WallScheduler
	tr     *runTracing
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags, err := parseRunFlags(args, stderr)
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
	emfFile, err := os.Create(flags.emfPath)
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
	if flags.serve {
		fmt.Fprintf(stdout, "\nserving: %s=%s %s=%s %s=%s (Ctrl-C to stop)\n",
			outboxconf.EnvDynamoDBEndpoint, d.ddb.Endpoint, outboxconf.EnvKafkaBrokers, strings.Join(d.kafka.Brokers, ","), outboxconf.EnvTable, demoTable)
		<-ctx.Done()
	}
	return nil
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
	if d.ddb, err = outboxlocal.StartDynamoDB(ctx, outboxlocal.WithoutEnvironment()); err != nil {
		return closeAll, fmt.Errorf("start embedded DynamoDB: %w", err)
	}
	closers = append(closers, d.ddb.Close)
	if d.kafka, err = outboxlocal.StartKafka(ctx, outboxlocal.KafkaConfig{Topics: demoTopics, IgnoreEnvironment: true}); err != nil {
		return closeAll, fmt.Errorf("start embedded Kafka: %w", err)
	}
	closers = append(closers, d.kafka.Close)
	fmt.Fprintf(stdout, "embedded DynamoDB at %s, Kafka at %s\n", d.ddb.Endpoint, strings.Join(d.kafka.Brokers, ","))
	env := map[string]string{
		outboxconf.EnvTable:            demoTable,
		outboxconf.EnvDynamoDBEndpoint: d.ddb.Endpoint,
		outboxconf.EnvKafkaBrokers:     strings.Join(d.kafka.Brokers, ","),
		outboxconf.EnvRelayFunction:    demoRelayFunction,
		outboxconf.EnvTopics:           strings.Join(demoTopics, ","),
		outboxconf.EnvStopMargin:       "2s",
	}
	if d.cfg, err = outboxlambda.LoadConfig(func(k string) string { return env[k] }); err != nil {
		return closeAll, err
	}
	if err := outboxddb.CreateIfNotExists(ctx, d.ddb.Client, d.cfg.StoreOptions()); err != nil {
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
	opts.Observer, opts.Logger = rec, d.log
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
		Observer: rec, Logger: d.log, Metrics: rec, MetricsOutput: d.emfOut, Tracer: d.tr.tracer(), Tracing: d.tr.tracing(),
	})
}

// newEnqueueHandler builds the enqueue function, whose writer wakes the
// simulated relay function after every commit.
func (d *demo) newEnqueueHandler() (*outboxlambda.EnqueueHandler, error) {
	rec, err := emf.NewRecorder(emf.Config{Namespace: d.cfg.MetricsNamespace, Outbox: d.cfg.OutboxName, FunctionName: demoEnqueueFn})
	if err != nil {
		return nil, err
	}
	wakeups, err := outboxlambda.NewNotifier(outboxlambda.NotifierConfig{Client: d.sim, FunctionName: demoRelayFunction, Observer: rec, Logger: d.log})
	if err != nil {
		return nil, err
	}
	opts := d.cfg.StoreOptions()
	opts.Observer, opts.Logger, opts.Notifier = rec, d.log, wakeups
	writer, err := outboxddb.NewWriter(d.ddb.Client, opts)
	if err != nil {
		return nil, err
	}
	return outboxlambda.NewEnqueueHandler(outboxlambda.EnqueueHandlerConfig{
		Config: d.cfg, Writer: writer, Observer: rec, Logger: d.log, Metrics: rec, MetricsOutput: d.emfOut,
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
		Clock: outbox.SystemClock{}, Scheduler: d.sched, Context: runCtx,
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

	wl := &workload{messages: d.flags.messages, keys: d.flags.keys, producers: 4, largeEvery: 97, seed: 20261130}
	prodErr := make(chan error, 1)
	wg.Go(func() { prodErr <- wl.run(runCtx, enqueue) })
	if err := d.progress(ctx, start, wl, cons, prodErr); err != nil {
		return runSummary{}, err
	}
	cancelRun()
	wg.Wait()
	d.sim.Wait()
	return runSummary{Verdict: cons.check(wl.order), Elapsed: time.Since(start).Seconds(), Relay: d.sim.Stats(), EMFFile: d.flags.emfPath}, nil
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

// progress prints a line a second until every enqueued message was
// consumed and the relays stopped; it fails after a minute without
// progress.
func (d *demo) progress(ctx context.Context, start time.Time, wl *workload, cons *consumer, prodErr chan error) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	produced := false
	lastProgress, lastUnique := time.Now(), -1
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
		unique := cons.unique()
		if unique != lastUnique {
			lastProgress, lastUnique = time.Now(), unique
		}
		st, pending := d.sim.Stats(), d.sim.Pending()
		fmt.Fprintf(d.stdout, "%5.1fs  enqueued %d/%d  published %d  relay invocations %d (running or queued %d, environments %d)\n",
			time.Since(start).Seconds(), wl.enqueued.Load(), d.flags.messages, unique, st.Invocations, pending, st.Environments)
		if err := d.sched.Err(); err != nil {
			return fmt.Errorf("relay function: %w", err)
		}
		if produced && unique >= d.flags.messages && pending == 0 {
			return nil
		}
		if time.Since(lastProgress) > time.Minute {
			return errors.New("no progress for a minute; the demo is stuck")
		}
	}
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
		printSummary(d.stdout, *sum)
		d.tr.report(d.stdout, sum.OTelSpans)
	}
	if v := sum.Verdict; v.Missing > 0 || v.OrderBroken > 0 || v.MissingHeader > 0 || sum.Pending > 0 {
		return fmt.Errorf("demo failed: %d missing, %d keys out of order, %d records without the id header, %d still pending",
			v.Missing, v.OrderBroken, v.MissingHeader, sum.Pending)
	}
	return nil
}

func printSummary(w io.Writer, s runSummary) {
	v := s.Verdict
	order := "kept"
	if v.OrderBroken > 0 {
		order = fmt.Sprintf("BROKEN for %d keys (%s)", v.OrderBroken, v.FirstProblem)
	}
	fmt.Fprintf(w, "\nSummary (%.1fs)\n", s.Elapsed)
	fmt.Fprintf(w, "  messages enqueued       %d\n", v.Enqueued)
	fmt.Fprintf(w, "  messages published      %d (records %d, duplicates %d, missing %d)\n", v.Delivered, v.Records, v.Duplicates, v.Missing)
	fmt.Fprintf(w, "  per-key order           %s over %d keys\n", order, v.KeysChecked)
	fmt.Fprintf(w, "  pending afterwards      %d\n", s.Pending)
	fmt.Fprintf(w, "  DynamoDB per message    %.2f requests, %.2f write units, %.2f read units (refused writes %d)\n",
		s.RequestsPerMsg, s.WCUPerMsg, s.RCUPerMsg, s.Refused)
	fmt.Fprintf(w, "  DynamoDB requests       %v\n", s.Requests)
	r := s.Relay
	fmt.Fprintf(w, "  relay invocations       %d (joined %d; by trigger %v; by outcome %v)\n", r.Invocations, r.JoinedInvocations, r.InvocationsByTrigger, r.InvocationsByReason)
	fmt.Fprintf(w, "  relay environments      %d, continuations %d, releases skipped %d, throttled %d, dropped %d, killed %d, errors %d\n",
		r.Environments, r.Continuations, r.ReleasesSkipped, r.Throttled, r.Dropped, r.Killed, r.Errors)
	fmt.Fprintf(w, "  EMF metric lines        %d in %s (all parse)\n", s.EMFLines, s.EMFFile)
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

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
	"strings"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxobs/emf"
)

func init() {
	register("run", "run the whole system on embedded DynamoDB and Kafka with a demo workload", runRun)
}

const (
	demoTable         = "spillway-demo"
	demoRelayFunction = "spillway-relay"
	demoEnqueueFn     = "spillway-enqueue"
)

// runSummary is what run prints at the end (and --json emits).
type runSummary struct {
	Verdict        verdict        `json:"verdict"`
	Elapsed        float64        `json:"elapsedSeconds"`
	Pending        int64          `json:"pendingAfter"`
	Requests       map[string]int `json:"dynamodbRequests"`
	RequestsPerMsg float64        `json:"requestsPerMessage"`
	WCUPerMsg      float64        `json:"writeUnitsPerMessage"`
	RCUPerMsg      float64        `json:"readUnitsPerMessage"`
	Refused        int            `json:"refusedConditionalWrites"`
	Relay          simStats       `json:"relayFunction"`
	EMFFile        string         `json:"emfFile"`
	EMFLines       int            `json:"emfLines"`
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", "run [--messages N] [--keys N] [--concurrency N] [--timeout D] [--serve] [--json]", stderr)
	messages := fs.Int("messages", 3000, "demo messages to enqueue")
	keys := fs.Int("keys", 60, "distinct message keys")
	concurrency := fs.Int("concurrency", 4, "reserved concurrency of the relay function (execution environments)")
	timeout := fs.Duration("timeout", 15*time.Second, "relay function timeout (each invocation's deadline)")
	schedule := fs.Duration("schedule", 5*time.Second, "interval of the schedule's sweep invocations (1 minute on AWS)")
	emfPath := fs.String("emf", filepath.Join(os.TempDir(), "spillway-run-emf.jsonl"), "file receiving the functions' EMF metric lines")
	serve := fs.Bool("serve", false, "keep the embedded endpoints up after the demo and print their addresses")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	verbose := fs.Bool("v", false, "log the functions' activity to stderr")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *messages < 1 || *keys < 1 || *concurrency < 1 {
		return usagef("--messages, --keys and --concurrency must be >= 1")
	}
	start := time.Now()
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	ddb, err := outboxlocal.StartDynamoDB(ctx, outboxlocal.WithoutEnvironment())
	if err != nil {
		return fmt.Errorf("start embedded DynamoDB: %w", err)
	}
	defer ddb.Close()
	kafka, err := outboxlocal.StartKafka(ctx, outboxlocal.KafkaConfig{Topics: demoTopics, IgnoreEnvironment: true})
	if err != nil {
		return fmt.Errorf("start embedded Kafka: %w", err)
	}
	defer kafka.Close()
	fmt.Fprintf(stdout, "embedded DynamoDB at %s, Kafka at %s\n", ddb.Endpoint, strings.Join(kafka.Brokers, ","))

	env := map[string]string{
		outboxconf.EnvTable:            demoTable,
		outboxconf.EnvDynamoDBEndpoint: ddb.Endpoint,
		outboxconf.EnvKafkaBrokers:     strings.Join(kafka.Brokers, ","),
		outboxconf.EnvRelayFunction:    demoRelayFunction,
		outboxconf.EnvTopics:           strings.Join(demoTopics, ","),
		outboxconf.EnvStopMargin:       "2s",
	}
	cfg, err := outboxlambda.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		return err
	}
	if err := outboxddb.CreateIfNotExists(ctx, ddb.Client, cfg.StoreOptions()); err != nil {
		return err
	}
	kcfg, err := cfg.KafkaConfig(ctx, nil)
	if err != nil {
		return err
	}
	emfFile, err := os.Create(*emfPath)
	if err != nil {
		return err
	}
	defer emfFile.Close()
	emfOut := &lockedWriter{w: emfFile}

	// Counting starts after set-up: the figures are the demo's own.
	ddb.Counter.Reset()

	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	var sim *lambdaSim
	newRelayEnv := func() (*outboxlambda.RelayHandler, error) {
		rec, err := emf.NewRecorder(emf.Config{Namespace: cfg.MetricsNamespace, Outbox: cfg.OutboxName, FunctionName: demoRelayFunction})
		if err != nil {
			return nil, err
		}
		opts := cfg.StoreOptions()
		opts.Observer, opts.Logger = rec, log
		store, err := outboxddb.NewStore(ddb.Client, opts)
		if err != nil {
			return nil, err
		}
		pub, err := outboxkafka.New(kcfg)
		if err != nil {
			return nil, err
		}
		notifier, err := outboxlambda.NewNotifier(outboxlambda.NotifierConfig{Client: sim, FunctionName: demoRelayFunction, Logger: log})
		if err != nil {
			return nil, err
		}
		return outboxlambda.NewRelayHandler(outboxlambda.RelayHandlerConfig{
			Config: cfg, FunctionName: demoRelayFunction, Store: store, Publisher: pub, Notifier: notifier,
			Observer: rec, Logger: log, Metrics: rec, MetricsOutput: emfOut,
		})
	}
	sim = newLambdaSim(runCtx, *concurrency, *timeout, newRelayEnv)

	enqRec, err := emf.NewRecorder(emf.Config{Namespace: cfg.MetricsNamespace, Outbox: cfg.OutboxName, FunctionName: demoEnqueueFn})
	if err != nil {
		return err
	}
	wakeups, err := outboxlambda.NewNotifier(outboxlambda.NotifierConfig{Client: sim, FunctionName: demoRelayFunction, Observer: enqRec, Logger: log})
	if err != nil {
		return err
	}
	wopts := cfg.StoreOptions()
	wopts.Observer, wopts.Logger, wopts.Notifier = enqRec, log, wakeups
	writer, err := outboxddb.NewWriter(ddb.Client, wopts)
	if err != nil {
		return err
	}
	enqueue, err := outboxlambda.NewEnqueueHandler(outboxlambda.EnqueueHandlerConfig{
		Config: cfg, Writer: writer, Observer: enqRec, Logger: log, Metrics: enqRec, MetricsOutput: emfOut,
	})
	if err != nil {
		return err
	}

	cons, err := newConsumer(kafka.Brokers, dedupHeader)
	if err != nil {
		return err
	}
	defer cons.client.Close()
	consCtx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	var consWG sync.WaitGroup
	consWG.Add(1)
	go func() { defer consWG.Done(); cons.run(consCtx) }()

	// The schedule's sweeps; the goroutine ends before run returns.
	var scheduleWG sync.WaitGroup
	scheduleWG.Add(1)
	defer func() { cancelRun(); scheduleWG.Wait() }()
	go func() {
		defer scheduleWG.Done()
		tick := time.NewTicker(*schedule)
		defer tick.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-tick.C:
				sim.send([]byte(`{"trigger":"schedule"}`))
			}
		}
	}()

	wl := &workload{messages: *messages, keys: *keys, producers: 4, largeEvery: 97, seed: 20261130}
	prodErr := make(chan error, 1)
	go func() { prodErr <- wl.run(runCtx, enqueue) }()

	// Progress until every enqueued message was consumed and the relays
	// stopped, or a minute without progress.
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
			produced = true
			prodErr = nil
		case <-tick.C:
		}
		unique := cons.unique()
		if unique != lastUnique {
			lastProgress, lastUnique = time.Now(), unique
		}
		st := sim.snapshot()
		fmt.Fprintf(stdout, "%5.1fs  enqueued %d/%d  published %d  relay invocations %d (running %d, environments %d)\n",
			time.Since(start).Seconds(), wl.enqueued.Load(), *messages, unique, st.Invocations, sim.busy(), st.Environments)
		if produced && unique >= *messages && sim.busy() == 0 {
			break
		}
		if time.Since(lastProgress) > time.Minute {
			return errors.New("no progress for a minute; the demo is stuck")
		}
	}
	cancelRun()
	scheduleWG.Wait()
	sim.wait()
	stopConsumer()
	consWG.Wait()

	sum := runSummary{Verdict: cons.check(wl.order), Elapsed: time.Since(start).Seconds(), Relay: sim.snapshot(), EMFFile: *emfPath}
	counts := ddb.Counter.Snapshot()
	sum.Requests = counts.Requests
	total := 0
	for _, n := range counts.Requests {
		total += n
	}
	if n := float64(sum.Verdict.Delivered); n > 0 {
		sum.RequestsPerMsg = float64(total) / n
		sum.WCUPerMsg = counts.WriteUnits / n
		sum.RCUPerMsg = counts.ReadUnits / n
	}
	sum.Refused = counts.Refused
	store, err := outboxddb.NewStore(ddb.Client, cfg.StoreOptions())
	if err != nil {
		return err
	}
	bl, err := store.Backlog(ctx)
	if err != nil {
		return err
	}
	sum.Pending = bl.Pending
	if sum.EMFLines, err = checkEMF(*emfPath); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(sum); err != nil {
			return err
		}
	} else {
		printSummary(stdout, sum)
	}
	if v := sum.Verdict; v.Missing > 0 || v.OrderBroken > 0 || v.MissingHeader > 0 || sum.Pending > 0 {
		return fmt.Errorf("demo failed: %d missing, %d keys out of order, %d records without the id header, %d still pending",
			v.Missing, v.OrderBroken, v.MissingHeader, sum.Pending)
	}
	if *serve {
		fmt.Fprintf(stdout, "\nserving: %s=%s %s=%s %s=%s (Ctrl-C to stop)\n",
			outboxconf.EnvDynamoDBEndpoint, ddb.Endpoint, outboxconf.EnvKafkaBrokers, strings.Join(kafka.Brokers, ","), outboxconf.EnvTable, demoTable)
		<-ctx.Done()
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
	fmt.Fprintf(w, "  relay invocations       %d (joined %d; by trigger %v; by outcome %v)\n", r.Invocations, r.Joined, r.ByTrigger, r.ByReason)
	fmt.Fprintf(w, "  relay environments      %d, continuations %d, releases skipped %d, throttled %d, errors %d\n",
		r.Environments, r.Continuations, r.ReleasesSkip, r.Throttled, r.Errors)
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

// lockedWriter serialises writes of concurrent invocations to one file.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

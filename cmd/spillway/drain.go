package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/spillway-dev/spillway/internal/relayproc"
	"github.com/spillway-dev/spillway/internal/sleep"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// minRunWindow is the least time left for which drain starts another relay
// run: enough to claim, publish a batch and release within the stop margin.
const minRunWindow = 2 * time.Second

// drainOptions are drain's parsed flags.
type drainOptions struct {
	cfg      outboxlambda.Config
	relays   int
	timeout  time.Duration
	progress time.Duration
	retry    time.Duration
	log      *slog.Logger
	asJSON   bool
	// count says whether --bucket-count was given (checkLayout).
	count countFlag
}

func runDrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseDrainFlags(args, stdout, stderr)
	if err != nil {
		return err
	}
	f, err := newDrainFleet(ctx, &o, stderr)
	if err != nil {
		return err
	}
	defer f.close()
	return f.drain(ctx, o, stdout, stderr)
}

func parseDrainFlags(args []string, stdout, stderr io.Writer) (drainOptions, error) {
	fs := newFlagSet("drain", stdout)
	ef := addTableFlags(fs).withOutbox().withBrokers()
	relays := fs.Int("relays", 1, "relays to run concurrently, each with its own id")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long the whole drain may take, all its relay runs included")
	progress := fs.Duration("progress", 2*time.Second, "interval between progress lines (0: none)")
	retry := fs.Duration("retry", time.Second, "wait between runs while peers hold buckets with work")
	verbose := fs.verbose("log the relays' activity")
	asJSON := fs.Bool("json", false, "print the outcome as JSON (progress goes to stderr)")
	target := fs.Duration("target-latency", 0, "how soon a running relay looks for a message committed to a busy bucket it holds (env SPILLWAY_TARGET_LATENCY; 0: that or the relay's default)")
	memory := fs.Int("memory-mb", 0, "memory the relays may use, MB: bounds the messages they hold at once, the Kafka buffer and Go's soft memory limit as in a relay function of that size (env SPILLWAY_MEMORY_MB; 0: unbounded)")
	if err := parse(fs, args); err != nil {
		return drainOptions{}, err
	}
	if *memory < 0 || *target < 0 {
		return drainOptions{}, usagef("--memory-mb and --target-latency must be >= 0")
	}
	if *relays < 1 {
		return drainOptions{}, usagef("--relays must be >= 1")
	}
	if *timeout <= 0 || *retry <= 0 {
		return drainOptions{}, usagef("--timeout and --retry must be positive")
	}
	cfg, err := ef.config()
	if err != nil {
		return drainOptions{}, usagef("%v", err)
	}
	if prev, ok := cfg.Previous(); ok {
		// A drain relays one generation; the new one must wait for the
		// old one, which only the relays serving both guarantee.
		return drainOptions{}, usagef("drain relays one generation, and %s=%s is set: drain the previous generation with --key-prefix %s --bucket-count %d, or leave the new one to the relays",
			outboxconf.EnvPreviousKeyPrefix, prev.KeyPrefix, prev.KeyPrefix, prev.BucketCount)
	}
	if *memory > 0 {
		cfg.MemoryMB = *memory
	}
	if *target > 0 {
		cfg.TargetLatency = *target
	}
	limitMemory(cfg.MemoryMB)
	return drainOptions{cfg: cfg, relays: *relays, timeout: *timeout, progress: *progress, retry: *retry,
		log: cliLogger(stderr, *verbose), asJSON: *asJSON, count: ef.bucketCountSource()}, nil
}

// cliLogger is the log handler of the commands: warnings only, everything
// with -v. The store and the relays log through it.
func cliLogger(stderr io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
}

// drainFleet is the relays of one drain and what they report.
type drainFleet struct {
	store   *outboxddb.Store
	relays  []*outbox.Relay
	procs   []*relayproc.Proc
	count   drainCounter
	initial int64 // pending at start, each bucket capped at the count limit
	waits   waitReporter
}

// newDrainFleet checks the bucket count against the table's layout record
// (o takes the recorded count when none was given), builds the store and
// the relays, and samples the backlog once, which also fails at once on a
// table that does not exist.
func newDrainFleet(ctx context.Context, o *drainOptions, stderr io.Writer) (*drainFleet, error) {
	client, err := dynamoClient(ctx, o.cfg)
	if err != nil {
		return nil, err
	}
	kcfg, err := kafkaConfig(ctx, o.cfg)
	if err != nil {
		return nil, err
	}
	lay, err := checkLayout(ctx, client, o.cfg.TableOptions(), &o.cfg.BucketCount, o.count, true)
	if err != nil {
		return nil, err
	}
	if lay.note != "" {
		fmt.Fprintf(stderr, "warning: %s\n", lay.note)
	}
	sopts := o.cfg.StoreOptions()
	sopts.Logger = o.log
	store, err := outboxddb.NewStore(client, sopts)
	if err != nil {
		return nil, err
	}
	// A generation that replaces another is drained only once that one
	// is: its messages were committed after the older ones of their keys.
	if err := store.CheckServable(ctx); err != nil {
		return nil, err
	}
	bl, err := store.Backlog(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the outbox: %w", err)
	}
	f := &drainFleet{store: store, initial: bl.Pending}
	for i := range o.relays {
		p, err := relayproc.New(ctx, relayproc.Config{
			DynamoDB: client, Store: sopts, Kafka: kcfg,
			Relay: o.cfg.RelayOptions(outboxlambda.NewRelayID(fmt.Sprintf("spillway-drain-%d", i))),
			Hooks: []outbox.Hook{&f.count}, Logger: o.log,
		})
		if err != nil {
			f.close()
			return nil, err
		}
		f.procs = append(f.procs, p)
		f.relays = append(f.relays, p.Relay)
	}
	return f, nil
}

func (f *drainFleet) close() {
	for _, p := range f.procs {
		p.Close()
	}
}

// drainResult is what drain --json prints at the end.
type drainResult struct {
	Published int64       `json:"published"`
	Pending   int64       `json:"pending"`
	Elapsed   float64     `json:"elapsedSeconds"`
	Memory    drainMemory `json:"memory"`
	// Stuck lists the buckets whose head message kept failing, with the
	// last error: what holds the drain up when Pending stays above 0.
	Stuck []stuckBucket `json:"stuck,omitempty"`
	parkedLeft
}

type stuckBucket struct {
	Bucket int    `json:"bucket"`
	Error  string `json:"error"`
}

// drain runs every relay until the outbox is empty or the timeout passes,
// printing progress (to stderr with --json), and checks the backlog once
// at the end.
func (f *drainFleet) drain(ctx context.Context, o drainOptions, stdout, stderr io.Writer) error {
	result := stdout
	if o.asJSON {
		stdout = stderr
	}
	heap := watchHeap()
	defer heap.finish()
	start := time.Now()
	end := start.Add(o.timeout)
	rctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	// The relays' goroutines report their waits while this one prints
	// progress: both write through one lock.
	stdout = &lockedWriter{w: stdout}
	f.waits.out = stdout
	if o.cfg.PoisonPolicy == outbox.PoisonQuarantine {
		f.waits.parkAfter = o.cfg.PoisonMaxAttempts
	}
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
		runErr  error
	)
	for _, r := range f.relays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.relayUntilEmpty(rctx, r, end, o); err != nil {
				errOnce.Do(func() { runErr = err })
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	f.printProgress(done, o.progress, start, stdout)
	if runErr != nil {
		return runErr
	}
	bl, err := f.store.Backlog(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	counts, err := f.store.ParkedCounts(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	res := drainResult{Published: f.count.published.Load(), Pending: bl.Pending, Elapsed: time.Since(start).Seconds(),
		parkedLeft: sumParked(counts, f.count.parked.Load()),
		Memory:     drainMemory{PeakRSSKB: peakRSSKB(), PeakHeapBytes: heap.finish(), PeakHeldMessages: f.count.peakHeld.Load()}}
	if bl.Pending > 0 {
		res.Stuck = f.count.stuck()
	}
	if o.asJSON {
		enc := json.NewEncoder(result)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout, res.summary(res.Published, res.Elapsed, res.Pending))
	}
	res.explain(stdout)
	if bl.Pending > 0 {
		f.waits.report(context.WithoutCancel(ctx), f.store, nil, res.Stuck)
		return errNotEmpty
	}
	if res.Marked > 0 {
		return errReplaysLeft
	}
	return nil
}

// relayUntilEmpty runs r again and again until no bucket has work or too
// little time is left. A drain is asked to empty the outbox: buckets held
// by a live-looking peer (perhaps a dead process whose leases have not
// expired yet) are retried, not given up on, and their holders reported.
func (f *drainFleet) relayUntilEmpty(ctx context.Context, r *outbox.Relay, end time.Time, o drainOptions) error {
	all := allBuckets(o.cfg.BucketCount)
	for {
		// The run's deadline is the drain's: the relay keeps its stop
		// margin before it, as under Lambda, so its leases are released
		// before the timeout.
		if _, err := r.Run(ctx, outbox.RunInput{Trigger: outbox.TriggerDirect, Deadline: end}); err != nil {
			return err
		}
		if ctx.Err() != nil || time.Until(end) < minRunWindow {
			return nil
		}
		pending, err := f.store.PendingBuckets(ctx, all)
		switch {
		case err != nil:
			o.log.WarnContext(ctx, "probing the buckets failed; trying again", "error", err)
		case len(pending) == 0:
			return nil
		default:
			f.waits.report(ctx, f.store, pending, f.count.stuck())
		}
		if !sleep.For(min(o.retry, time.Until(end)-minRunWindow), ctx.Done()) {
			return nil
		}
	}
}

// printProgress looks every interval until done and prints a line when it
// changed: what the relays published (counted from their events) and the
// pending estimate, the backlog at start less what they deleted; and the
// buckets stuck on their head. It reads nothing from the table.
func (f *drainFleet) printProgress(done <-chan struct{}, every time.Duration, start time.Time, stdout io.Writer) {
	if every <= 0 {
		<-done
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	last := ""
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			left := max(f.initial-f.count.deleted.Load(), 0)
			// Printed when it changed: a drain that waits says so once.
			if line := fmt.Sprintf("published %d  pending ~%d", f.count.published.Load(), left); line != last {
				fmt.Fprintf(stdout, "%6.1fs  %s\n", time.Since(start).Seconds(), line)
				last = line
			}
			f.waits.stuck(f.count.stuck())
		}
	}
}

var (
	errNotEmpty    = errors.New("the outbox is not empty")
	errReplaysLeft = errors.New("messages marked for replay are still parked")
)

// drainCounter counts what the relays publish and delete, as they go, and
// keeps the last publish error of each bucket whose head keeps failing.
type drainCounter struct {
	published, deleted, parked atomic.Int64
	// held counts messages fetched and not yet deleted; peakHeld its
	// maximum.
	held, peakHeld atomic.Int64

	mu      sync.Mutex
	failing map[int]string
}

// OnPublish implements outbox.HookBatch.
func (c *drainCounter) OnPublish(_ string, bucket, acked int, _ []time.Duration, err error) {
	c.published.Add(int64(acked))
	c.fail(bucket, acked, err)
}

// OnBackoff implements outbox.HookBatch.
func (c *drainCounter) OnBackoff(_ string, bucket int, _ time.Duration, err error) {
	if err != nil {
		c.fail(bucket, 0, err)
	}
}

// OnFetch implements outbox.HookBatch.
func (c *drainCounter) OnFetch(_ string, _, fetched int) {
	held := c.held.Add(int64(fetched))
	for peak := c.peakHeld.Load(); held > peak && !c.peakHeld.CompareAndSwap(peak, held); peak = c.peakHeld.Load() {
	}
}

// OnDelete implements outbox.HookBatch.
func (c *drainCounter) OnDelete(_ string, _, deleted int) {
	c.deleted.Add(int64(deleted))
	c.held.Add(-int64(deleted))
}

// OnHeadRowRetry implements outbox.HookBatch.
func (c *drainCounter) OnHeadRowRetry(string, int) {}

// OnPark implements outbox.HookPark.
func (c *drainCounter) OnPark(_ string, p outbox.Parking) {
	c.parked.Add(1)
	c.held.Add(-1)
	// The bucket's head moved to the parked partition: it no longer holds
	// the bucket up.
	c.fail(p.Bucket, 1, nil)
}

// OnReplay implements outbox.HookPark.
func (c *drainCounter) OnReplay(string, int, int) {}

// OnParkedBacklog implements outbox.HookPark.
func (c *drainCounter) OnParkedBacklog(string, int64) {}

var (
	_ outbox.HookBatch = (*drainCounter)(nil)
	_ outbox.HookPark  = (*drainCounter)(nil)
)

// fail records err as bucket's cause, or clears it once the bucket moves.
func (c *drainCounter) fail(bucket, acked int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil:
		if c.failing == nil {
			c.failing = map[int]string{}
		}
		// The operator reads it: without the package prefix.
		c.failing[bucket] = strings.TrimPrefix(err.Error(), "outboxkafka: ")
	case acked > 0:
		delete(c.failing, bucket)
	}
}

// stuck returns the buckets failing now, ascending.
func (c *drainCounter) stuck() []stuckBucket {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]stuckBucket, 0, len(c.failing))
	for _, b := range slices.Sorted(maps.Keys(c.failing)) {
		out = append(out, stuckBucket{Bucket: b, Error: c.failing[b]})
	}
	return out
}

// kafkaConfig returns the publisher configuration, reading the SCRAM secret
// from Secrets Manager when the configuration names one.
func kafkaConfig(ctx context.Context, cfg outboxlambda.Config) (outboxkafka.Config, error) {
	var secrets outboxlambda.SecretGetter
	if cfg.KafkaScramSecretARN != "" {
		awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return outboxkafka.Config{}, fmt.Errorf("load AWS configuration: %w", err)
		}
		secrets = secretsmanager.NewFromConfig(awsCfg)
	}
	kcfg, err := cfg.KafkaConfig(ctx, secrets)
	if err != nil {
		return outboxkafka.Config{}, usageError{explainConfig(err, map[string]string{outboxconf.EnvKafkaBrokers: "brokers"}, nil)}
	}
	return kcfg, nil
}

package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"

	"github.com/spillway-dev/spillway/internal/relayproc"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// ThroughputCase is one relay layout and message size.
type ThroughputCase struct {
	Relays, Buckets, ValueSize int
}

// Name is a short identifier, used for profile file names.
func (c ThroughputCase) Name() string {
	return fmt.Sprintf("r%d-b%d-v%d", c.Relays, c.Buckets, c.ValueSize)
}

// ThroughputConfig parameterises the throughput measurement. Zero fields
// take their defaults.
type ThroughputConfig struct {
	// Messages per case. Default 5,000.
	Messages int
	// Cases to measure. Default 1 relay over 1 bucket, 1 relay over 8
	// buckets and 4 relays over 8 buckets, for 1 KB and 16 KB values.
	Cases []ThroughputCase
	// RenewInterval is the relays' LeaseRenewInterval, the rebalance
	// cadence. Default 2 s, shorter than in production so that several
	// relays settle on their fair shares within seconds.
	RenewInterval time.Duration
	// LeaseDuration is the relays' LeaseDuration. Default 30 s, as in
	// production: a fetch of 500 large messages from the embedded server
	// can take seconds, and a lease that lapses during it costs the batch.
	LeaseDuration time.Duration
	// Timeout bounds one case. Default 5 min.
	Timeout time.Duration
	// BatchSize is the relays' BatchSize. Default outbox.DefaultBatchSize.
	BatchSize int
}

func (c ThroughputConfig) withDefaults() ThroughputConfig {
	c.Messages = cmp.Or(c.Messages, 5000)
	c.RenewInterval = cmp.Or(c.RenewInterval, 2*time.Second)
	c.LeaseDuration = cmp.Or(c.LeaseDuration, outbox.DefaultLeaseDuration)
	c.Timeout = cmp.Or(c.Timeout, 5*time.Minute)
	c.BatchSize = cmp.Or(c.BatchSize, outbox.DefaultBatchSize)
	if len(c.Cases) == 0 {
		for _, size := range []int{1 << 10, 16 << 10} {
			for _, layout := range [][2]int{{1, 1}, {1, 8}, {4, 8}} {
				c.Cases = append(c.Cases, ThroughputCase{Relays: layout[0], Buckets: layout[1], ValueSize: size})
			}
		}
	}
	return c
}

// ThroughputResult holds one measurement per case.
type ThroughputResult struct {
	Config ThroughputConfig
	Cases  []CaseThroughput
}

// CaseThroughput is what one case measured. Times are wall-clock times on
// a machine that also runs the embedded backends.
type CaseThroughput struct {
	ThroughputCase
	Messages int
	// Published counts acknowledged publishes; more than Messages means
	// duplicates (a bucket changed hands while a batch was in flight).
	Published int
	// Elapsed runs from the relays' start to the last delete.
	Elapsed time.Duration
	// PerSecond is Messages / Elapsed; MBPerSecond the values' bytes.
	PerSecond, MBPerSecond float64
	// Settled is when every relay first held its fair share; SettledRate
	// the rate of deletes after it (zero when less than a tenth of the
	// messages was left by then: too few to time).
	Settled     time.Duration
	SettledRate float64
	// RequestsPerMessage counts the relays' DynamoDB requests.
	RequestsPerMessage float64
	CPU                CPUShare
}

var throughputScenario = lab.Scenario{
	Name:    "throughput",
	Summary: "messages/s relayed by 1 relay/1 bucket, 1 relay/8 buckets, 4 relays/8 buckets, 1 KB and 16 KB values, with the CPU share",
	Run: func(ctx context.Context, env lab.Config) (lab.Report, error) {
		cases, err := pickCases(env.Cases)
		if err != nil {
			return nil, err
		}
		return RunThroughput(ctx, env, ThroughputConfig{Messages: env.Messages, Cases: cases})
	},
}

// pickCases returns the default cases named, in the order named; none
// named, none picked (the defaults then run).
func pickCases(names []string) ([]ThroughputCase, error) {
	all := ThroughputConfig{}.withDefaults().Cases
	var out []ThroughputCase
	for _, name := range names {
		i := slices.IndexFunc(all, func(c ThroughputCase) bool { return c.Name() == name })
		if i < 0 {
			var known []string
			for _, c := range all {
				known = append(known, c.Name())
			}
			return nil, fmt.Errorf("bench: no throughput case %q (want %s)", name, strings.Join(known, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

// RunThroughput measures every case on fresh backends: it enqueues the
// messages first, then starts the relays and times them until the outbox is
// empty, under a CPU profile whose labels split Spillway's CPU from the
// embedded backends'.
func RunThroughput(ctx context.Context, env lab.Config, cfg ThroughputConfig) (ThroughputResult, error) {
	cfg = cfg.withDefaults()
	if cfg.Messages < 1 || cfg.RenewInterval <= 0 || cfg.RenewInterval >= cfg.LeaseDuration || cfg.Timeout <= 0 {
		return ThroughputResult{}, fmt.Errorf("bench: throughput config %+v: want messages >= 1 and 0 < renewal < lease", cfg)
	}
	res := ThroughputResult{Config: cfg}
	for _, c := range cfg.Cases {
		env.Progressf("throughput: %d relay(s) over %d bucket(s), %d-byte values, %d messages", c.Relays, c.Buckets, c.ValueSize, cfg.Messages)
		ct, err := measureThroughput(ctx, env, cfg, c)
		if err != nil {
			return ThroughputResult{}, fmt.Errorf("bench: throughput %s: %w", c.Name(), err)
		}
		res.Cases = append(res.Cases, ct)
	}
	return res, nil
}

func measureThroughput(ctx context.Context, env lab.Config, cfg ThroughputConfig, c ThroughputCase) (ct CaseThroughput, err error) {
	if c.Relays < 1 || c.Buckets < 1 || c.ValueSize < 0 {
		return ct, fmt.Errorf("invalid case %+v", c)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	b, err := StartBackends(ctx, env)
	if err != nil {
		return ct, err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	pprof.Do(ctx, pprof.Labels(labelKey, labelSpillway), func(ctx context.Context) {
		ct, err = relayAll(ctx, env, cfg, c, b)
	})
	return ct, err
}

// relayAll enqueues cfg.Messages and relays them with c.Relays relays. It
// runs under the spillway label, so every client goroutine it starts (SDK
// connections, franz-go) carries it.
func relayAll(ctx context.Context, env lab.Config, cfg ThroughputConfig, c ThroughputCase, b *Backends) (CaseThroughput, error) {
	ct := CaseThroughput{ThroughputCase: c, Messages: cfg.Messages}
	opts, err := b.NewTable(ctx, c.Buckets, outbox.SystemClock{})
	if err != nil {
		return ct, err
	}
	if err := prefill(ctx, b, opts, c, cfg.Messages); err != nil {
		return ct, err
	}
	obs := newThroughputObserver(cfg.Messages, c)
	relays := make([]*outbox.Relay, c.Relays)
	for i := range relays {
		// One publisher per relay, as one per execution environment.
		p, err := b.NewRelay(ctx, relayproc.Config{Store: outboxddb.StoreOptions{Options: opts}, Relay: outbox.RelayOptions{
			RelayID: fmt.Sprintf("relay-%d", i), BucketCount: c.Buckets, Mode: outbox.ModeHold,
			LeaseRenewInterval: cfg.RenewInterval, LeaseDuration: cfg.LeaseDuration, BatchSize: cfg.BatchSize,
		}, Clock: outbox.SystemClock{}, Hooks: []outbox.Hook{obs}})
		if err != nil {
			return ct, err
		}
		defer p.Close()
		relays[i] = p.Relay
	}
	before := b.DynamoDB.Counter.Snapshot()
	var published atomic.Int64
	measure := func() error {
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		var wg sync.WaitGroup
		errs := make([]error, len(relays))
		obs.start()
		for i, r := range relays {
			wg.Go(func() {
				res, err := r.Run(runCtx, outbox.RunInput{Trigger: outbox.TriggerDirect})
				published.Add(int64(res.Published))
				errs[i] = err
			})
		}
		select {
		case <-obs.done:
		case <-ctx.Done():
		}
		stop()
		wg.Wait()
		if obs.deleted.Load() < int64(cfg.Messages) {
			return fmt.Errorf("%d of %d messages relayed before %w", obs.deleted.Load(), cfg.Messages, errors.Join(append(errs, context.Cause(ctx))...))
		}
		return errors.Join(errs...)
	}
	if env.Settle != nil {
		// Simulated time: no CPU to share out, and a profile's reader
		// would keep the bubble from ever idling.
		ct.CPU.Unavailable, err = "simulated time", measure()
	} else {
		ct.CPU, err = profileCPU(env.ProfileDir, "throughput-"+c.Name(), measure)
	}
	if err != nil {
		return ct, err
	}
	counts := b.DynamoDB.Counter.Snapshot().Since(before)
	ct.Published = int(published.Load())
	ct.Elapsed, ct.Settled, ct.SettledRate = obs.timing()
	ct.PerSecond = float64(cfg.Messages) / ct.Elapsed.Seconds()
	ct.MBPerSecond = ct.PerSecond * float64(c.ValueSize) / 1e6
	ct.RequestsPerMessage = float64(counts.TotalRequests()) / float64(cfg.Messages)
	return ct, nil
}

// prefill enqueues n messages in lists of 100 (one transaction each).
func prefill(ctx context.Context, b *Backends, opts outboxddb.Options, c ThroughputCase, n int) error {
	writer, err := outboxddb.NewWriter(b.DynamoDB.Client, outboxddb.WriterOptions{Options: opts})
	if err != nil {
		return err
	}
	w := NewWorkload(b.Topic, c.ValueSize, c.Buckets)
	for first := 0; first < n; first += outboxddb.MaxTransactionItems {
		msgs, err := w.Messages(first, min(outboxddb.MaxTransactionItems, n-first))
		if err != nil {
			return err
		}
		if _, err := writer.EnqueueBatch(ctx, msgs); err != nil {
			return fmt.Errorf("enqueue messages %d..%d: %w", first, first+len(msgs)-1, err)
		}
	}
	return nil
}

// throughputObserver times the relays: it counts deletes, notes when every
// relay first held its fair share, and signals when all messages are gone.
type throughputObserver struct {
	total  int64
	shares map[string]int // fair share per relay id once settled
	done   chan struct{}

	deleted atomic.Int64

	mu          sync.Mutex
	started     time.Time
	finished    time.Time
	settledAt   time.Time
	atSettle    int64
	owned       map[string]int
	settledOnce bool
}

var (
	_ outbox.HookLease = (*throughputObserver)(nil)
	_ outbox.HookBatch = (*throughputObserver)(nil)
)

func newThroughputObserver(total int, c ThroughputCase) *throughputObserver {
	shares := map[string]int{}
	for i := range c.Relays {
		shares[fmt.Sprintf("relay-%d", i)] = c.Buckets / c.Relays
		if i < c.Buckets%c.Relays {
			shares[fmt.Sprintf("relay-%d", i)]++
		}
	}
	return &throughputObserver{total: int64(total), shares: shares, done: make(chan struct{}), owned: map[string]int{}}
}

func (o *throughputObserver) start() {
	o.mu.Lock()
	o.started = time.Now()
	o.mu.Unlock()
}

// OnLeases implements outbox.HookLease: the leases settled once every
// relay owns its fair share.
func (o *throughputObserver) OnLeases(relayID string, owned, _, _ int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.owned[relayID] = owned
	if o.settledOnce {
		return
	}
	for id, share := range o.shares {
		if o.owned[id] != share {
			return
		}
	}
	o.settledOnce, o.settledAt, o.atSettle = true, time.Now(), o.deleted.Load()
}

// OnDelete implements outbox.HookBatch.
func (o *throughputObserver) OnDelete(_ string, _, deleted int) {
	if o.deleted.Add(int64(deleted)) >= o.total {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.finished.IsZero() {
			o.finished = time.Now()
			close(o.done)
		}
	}
}

func (o *throughputObserver) OnRound(string, time.Duration, lease.Acquisition, error) {}
func (o *throughputObserver) OnLeaseLost(string, int, outbox.LossReason)              {}
func (o *throughputObserver) OnReleaseSkipped(string, int)                            {}
func (o *throughputObserver) OnFetch(string, int, int)                                {}
func (o *throughputObserver) OnPublish(string, int, int, []time.Duration, error)      {}
func (o *throughputObserver) OnBackoff(string, int, time.Duration, error)             {}
func (o *throughputObserver) OnHeadRowRetry(string, int)                              {}

// timing returns the elapsed time, when the leases settled (relative to
// the start) and the delete rate after that.
func (o *throughputObserver) timing() (elapsed, settled time.Duration, rate float64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	elapsed = o.finished.Sub(o.started)
	if !o.settledOnce || !o.settledAt.Before(o.finished) {
		return elapsed, 0, 0
	}
	settled = o.settledAt.Sub(o.started)
	if left := o.total - o.atSettle; left*10 >= o.total {
		rate = float64(left) / o.finished.Sub(o.settledAt).Seconds()
	}
	return elapsed, settled, rate
}

// Tables renders the throughput table.
func (r ThroughputResult) Tables() []lab.Table {
	t := lab.Table{
		Title:  fmt.Sprintf("Throughput: %d messages per case, enqueued first, relayed until the outbox is empty (wall clock, noisy)", r.Config.Messages),
		Header: []string{"relays", "buckets", "value", "msgs/s", "MB/s", "elapsed", "settled", "msgs/s settled", "dup", "requests/msg", "CPU spillway", "CPU backends", "CPU other"},
	}
	for _, c := range r.Cases {
		settled, rate := "-", "-"
		if c.Settled > 0 {
			settled = fmtSeconds(c.Settled)
		}
		if c.SettledRate > 0 {
			rate = fmtF(c.SettledRate, 0)
		}
		cpu := []string{fmtPct(c.CPU.Spillway), fmtPct(c.CPU.Backend), fmtPct(c.CPU.Other)}
		if c.CPU.Unavailable != "" {
			cpu = []string{"-", "-", "-"}
		}
		t.Rows = append(t.Rows, append([]string{
			fmtInt(c.Relays), fmtInt(c.Buckets), fmtSize(c.ValueSize),
			fmtF(c.PerSecond, 0), fmtF(c.MBPerSecond, 1), fmtSeconds(c.Elapsed), settled, rate,
			fmtInt(c.Published - c.Messages), fmtF(c.RequestsPerMessage, 3),
		}, cpu...))
	}
	t.Notes = []string{
		fmt.Sprintf("Relays in hold mode, batch %d, renewal every %v (short, so several relays settle on their shares quickly), lease %v.", r.Config.BatchSize, r.Config.RenewInterval, r.Config.LeaseDuration),
		"settled: when every relay first held its fair share; msgs/s settled: the rate after that.",
		"CPU: share of the CPU time sampled by a profile, by pprof label. spillway = relay + AWS SDK + franz-go client (the relay's CPU",
		"on AWS); backends = embedded DynamoDB and Kafka (not on the relay's CPU on AWS); other = GC workers and unlabelled runtime.",
		"One process runs the relays and both backends on the same cores: the figures rank layouts, they are not AWS throughput.",
	}
	causes := []string{CauseRelay, CauseSDK, CauseKafka, CauseCounter, CauseRuntime}
	in := lab.Table{
		Title:  "Throughput: where the spillway share goes (percent of it, by the innermost frame of each sample in a known module)",
		Header: append([]string{"relays", "buckets", "value", "sampled"}, causes...),
	}
	for _, c := range r.Cases {
		if c.CPU.InSpillway == nil {
			continue
		}
		own := time.Duration(float64(c.CPU.CPU) * c.CPU.Spillway / 100)
		row := []string{fmtInt(c.Relays), fmtInt(c.Buckets), fmtSize(c.ValueSize), fmtSeconds(own)}
		for _, cause := range causes {
			row = append(row, fmtPct(c.CPU.InSpillway[cause]))
		}
		in.Rows = append(in.Rows, row)
	}
	in.Notes = []string{
		"outbox: Spillway's packages; aws-sdk: AWS SDK for Go v2 and smithy-go (JSON, signing, HTTP); franz-go: the Kafka client",
		"(batching, compression); outboxlocal: the bench's counting middleware, not deployed; runtime+std: no module frame (GC, scheduler).",
		"sampled: the spillway share's CPU time; the profile samples at 100 Hz, so a share of a short case rests on few samples.",
	}
	if len(in.Rows) == 0 {
		return []lab.Table{t}
	}
	return []lab.Table{t, in}
}

func fmtSeconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func fmtSize(n int) string {
	if n >= 1<<10 && n%(1<<10) == 0 {
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

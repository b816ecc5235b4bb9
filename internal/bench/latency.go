package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"

	"github.com/spillway-dev/spillway/internal/relayproc"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// Latency series.
const (
	// SeriesWake is a warm relay (initialised, publisher connected) that
	// is not running when the message commits and is started by the
	// writer's wake-up, as the relay function is by the notification.
	SeriesWake = "wake-up"
	// SeriesPoll is a relay that is running, holds every bucket and finds
	// the message by polling (no wake-up).
	SeriesPoll = "polling"
)

// LatencyConfig parameterises the latency measurement. Zero fields take
// their defaults.
type LatencyConfig struct {
	// Samples per series. Default 60.
	Samples int
	// PollInterval is the polling relay's interval. Default 1 s.
	PollInterval time.Duration
	// MaxGap bounds the random pause between two commits of the polling
	// series (uniform in [MaxGap/10, MaxGap]), so commits fall at every
	// phase of the poll. Default 400 ms.
	MaxGap time.Duration
	// IdleTimeout is the woken relay's linger; it comes after the
	// acknowledgement, so it does not change the latency, only how long a
	// sample takes. Default 100 ms.
	IdleTimeout time.Duration
	// Timeout bounds one series. Default 2 min.
	Timeout time.Duration
}

func (c LatencyConfig) withDefaults() LatencyConfig {
	c.Samples = cmp.Or(c.Samples, 60)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.MaxGap = cmp.Or(c.MaxGap, 400*time.Millisecond)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, 100*time.Millisecond)
	c.Timeout = cmp.Or(c.Timeout, 2*time.Minute)
	return c
}

// LatencyResult holds commit-to-acknowledgement latencies per series.
type LatencyResult struct {
	Config LatencyConfig
	Series []LatencySeries
}

// LatencySeries is the distribution of one series: from the commit (the
// writer's request returned) to Kafka's acknowledgement of the record.
type LatencySeries struct {
	Name                    string
	Samples                 int
	Min, P50, P95, P99, Max time.Duration
	Mean                    time.Duration
	// RelayRuns counts the relay runs of the series; JoinedRuns those
	// that took part in the fleet.
	RelayRuns, JoinedRuns int
}

var latencyScenario = lab.Scenario{
	Name:    "latency",
	Summary: "commit → broker-ack p50/p95/p99 with a warm relay woken by the writer's wake-up, and with polling only",
	Run: func(ctx context.Context, env lab.Config) (lab.Report, error) {
		cfg := LatencyConfig{}
		if env.Messages > 0 {
			cfg.Samples = min(env.Messages, 1000)
		}
		return RunLatency(ctx, env, cfg)
	},
}

// RunLatency measures both series on the system clock (real milliseconds on
// the embedded backends).
func RunLatency(ctx context.Context, env lab.Config, cfg LatencyConfig) (LatencyResult, error) {
	cfg = cfg.withDefaults()
	if cfg.Samples < 1 || cfg.PollInterval < 0 || cfg.MaxGap < 0 || cfg.IdleTimeout < 0 || cfg.Timeout < 0 {
		return LatencyResult{}, fmt.Errorf("bench: latency config %+v: want samples >= 1 and positive durations", cfg)
	}
	res := LatencyResult{Config: cfg}
	for _, series := range []struct {
		name string
		run  func(context.Context, *Backends, LatencyConfig) (LatencySeries, error)
	}{{SeriesWake, measureWake}, {SeriesPoll, measurePoll}} {
		env.Progressf("latency: %d samples, %s", cfg.Samples, series.name)
		s, err := func() (s LatencySeries, err error) {
			ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			defer cancel()
			b, err := StartBackends(ctx, env)
			if err != nil {
				return LatencySeries{}, err
			}
			defer func() { err = errors.Join(err, b.Close()) }()
			return series.run(ctx, b, cfg)
		}()
		if err != nil {
			return LatencyResult{}, fmt.Errorf("bench: latency, %s: %w", series.name, err)
		}
		res.Series = append(res.Series, s)
	}
	return res, nil
}

// latencyRig is a fresh table and a relay whose publisher records acks.
type latencyRig struct {
	opts  outboxddb.Options
	pub   *ackPublisher
	relay *outbox.Relay
	work  *Workload
	owned chan int
	close func()
}

func newLatencyRig(ctx context.Context, b *Backends, ropts outbox.RelayOptions) (*latencyRig, error) {
	opts, err := b.NewTable(ctx, outbox.DefaultBucketCount, outbox.SystemClock{})
	if err != nil {
		return nil, err
	}
	kp, err := b.NewPublisher(ctx)
	if err != nil {
		return nil, err
	}
	rig := &latencyRig{opts: opts, pub: newAckPublisher(kp), work: NewWorkload(b.Topic, 1<<10, opts.BucketCount), owned: make(chan int, 64), close: kp.Close}
	ropts.BucketCount = opts.BucketCount
	proc, err := b.NewRelay(ctx, relayproc.Config{Store: outboxddb.StoreOptions{Options: opts}, Publisher: rig.pub, Relay: ropts, Clock: outbox.SystemClock{}, Hooks: []outbox.Hook{ownedObserver(rig.owned)}})
	if err != nil {
		kp.Close()
		return nil, err
	}
	rig.relay = proc.Relay
	return rig, nil
}

// ownedObserver reports the relay's owned-bucket count without blocking.
type ownedObserver chan int

var _ outbox.HookLease = ownedObserver(nil)

// OnLeases implements outbox.HookLease.
func (o ownedObserver) OnLeases(_ string, owned, _, _ int) {
	select {
	case o <- owned:
	default:
	}
}

func (ownedObserver) OnRound(string, time.Duration, lease.Acquisition, error) {}
func (ownedObserver) OnLeaseLost(string, int, outbox.LossReason)              {}
func (ownedObserver) OnReleaseSkipped(string, int)                            {}

// wakeInvoker stands in for Lambda's asynchronous invoke of the relay
// function: a wake-up starts a run of the warm relay with the hinted
// buckets, and is timestamped, since the writer sends it right after the
// commit.
type wakeInvoker struct {
	ctx   context.Context
	relay *outbox.Relay

	wg   sync.WaitGroup
	mu   sync.Mutex
	sent time.Time
	runs []outbox.RunResult
	errs []error
}

// Notify implements outbox.Notifier.
func (w *wakeInvoker) Notify(_ context.Context, wu outbox.WakeUp) error {
	w.mu.Lock()
	w.sent = time.Now()
	w.mu.Unlock()
	w.wg.Go(func() {
		res, err := w.relay.Run(w.ctx, outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: wu.Buckets, Hop: wu.Hop, Join: wu.Join})
		w.mu.Lock()
		defer w.mu.Unlock()
		w.runs = append(w.runs, res)
		if err != nil {
			w.errs = append(w.errs, err)
		}
	})
	return nil
}

// measureWake commits one message at a time with a writer whose notifier
// starts the warm relay, waits for the acknowledgement and for the run to
// end, and repeats.
func measureWake(ctx context.Context, b *Backends, cfg LatencyConfig) (LatencySeries, error) {
	rig, err := newLatencyRig(ctx, b, outbox.RelayOptions{RelayID: "woken", Mode: outbox.ModeDrain, IdleTimeout: cfg.IdleTimeout})
	if err != nil {
		return LatencySeries{}, err
	}
	defer rig.close()
	inv := &wakeInvoker{ctx: ctx, relay: rig.relay}
	writer, err := outboxddb.NewWriter(b.DynamoDB.Client, outboxddb.WriterOptions{Options: rig.opts, Notifier: inv})
	if err != nil {
		return LatencySeries{}, err
	}
	var lat []time.Duration
	for i := range cfg.Samples {
		m, err := rig.work.Message(i)
		if err != nil {
			return LatencySeries{}, err
		}
		if m, err = writer.Enqueue(ctx, m); err != nil {
			return LatencySeries{}, err
		}
		if err := rig.pub.wait(ctx, m.ID); err != nil {
			return LatencySeries{}, fmt.Errorf("sample %d: %w", i, err)
		}
		inv.wg.Wait()
		acked, _ := rig.pub.ackedAt(m.ID)
		inv.mu.Lock()
		lat = append(lat, acked.Sub(inv.sent))
		inv.mu.Unlock()
	}
	s := summarize(SeriesWake, lat)
	s.RelayRuns = len(inv.runs)
	for _, r := range inv.runs {
		if r.Joined {
			s.JoinedRuns++
		}
	}
	return s, errors.Join(inv.errs...)
}

// measurePoll runs a hold-mode relay until it owns every bucket, then
// commits messages at random moments without wake-ups. Its latency dial is
// at the poll interval, so the series measures the poll alone.
func measurePoll(ctx context.Context, b *Backends, cfg LatencyConfig) (LatencySeries, error) {
	rig, err := newLatencyRig(ctx, b, outbox.RelayOptions{RelayID: "polling", Mode: outbox.ModeHold,
		PollInterval: cfg.PollInterval, TargetLatency: cfg.PollInterval})
	if err != nil {
		return LatencySeries{}, err
	}
	defer rig.close()
	writer, err := outboxddb.NewWriter(b.DynamoDB.Client, outboxddb.WriterOptions{Options: rig.opts})
	if err != nil {
		return LatencySeries{}, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() {
		_, err := rig.relay.Run(runCtx, outbox.RunInput{Trigger: outbox.TriggerDirect})
		done <- err
	}()
	for owned := 0; owned < rig.opts.BucketCount; {
		select {
		case owned = <-rig.owned:
		case err := <-done:
			return LatencySeries{}, fmt.Errorf("relay stopped before owning every bucket: %v", err)
		case <-ctx.Done():
			return LatencySeries{}, context.Cause(ctx)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	commits := map[outbox.MessageID]time.Time{}
	ids := make([]outbox.MessageID, 0, cfg.Samples)
	for i := range cfg.Samples {
		gap := cfg.MaxGap/10 + time.Duration(rng.Int64N(int64(cfg.MaxGap-cfg.MaxGap/10)+1))
		select {
		case <-time.After(gap):
		case <-ctx.Done():
			return LatencySeries{}, context.Cause(ctx)
		}
		m, err := rig.work.Message(i)
		if err != nil {
			return LatencySeries{}, err
		}
		if m, err = writer.Enqueue(ctx, m); err != nil {
			return LatencySeries{}, err
		}
		commits[m.ID] = time.Now()
		ids = append(ids, m.ID)
	}
	if err := rig.pub.wait(ctx, ids...); err != nil {
		return LatencySeries{}, err
	}
	stop()
	if err := <-done; err != nil {
		return LatencySeries{}, err
	}
	lat := make([]time.Duration, 0, len(ids))
	for _, id := range ids {
		acked, _ := rig.pub.ackedAt(id)
		lat = append(lat, acked.Sub(commits[id]))
	}
	s := summarize(SeriesPoll, lat)
	s.RelayRuns, s.JoinedRuns = 1, 1
	return s, nil
}

// summarize computes the distribution with nearest-rank percentiles.
func summarize(name string, lat []time.Duration) LatencySeries {
	s := LatencySeries{Name: name, Samples: len(lat)}
	if len(lat) == 0 {
		return s
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(sorted))+0.999999) - 1
		return sorted[min(max(i, 0), len(sorted)-1)]
	}
	var sum time.Duration
	for _, d := range sorted {
		sum += d
	}
	s.Min, s.Max, s.Mean = sorted[0], sorted[len(sorted)-1], sum/time.Duration(len(sorted))
	s.P50, s.P95, s.P99 = rank(0.50), rank(0.95), rank(0.99)
	return s
}

// Tables renders the latency table.
func (r LatencyResult) Tables() []lab.Table {
	t := lab.Table{
		Title:  "Latency: commit → Kafka acknowledgement (wall clock on the embedded backends, noisy)",
		Header: []string{"series", "samples", "p50", "p95", "p99", "mean", "min", "max", "relay runs (joined)"},
	}
	for _, s := range r.Series {
		t.Rows = append(t.Rows, []string{
			seriesLabel(s.Name, r.Config), fmtInt(s.Samples),
			fmtMS(s.P50), fmtMS(s.P95), fmtMS(s.P99), fmtMS(s.Mean), fmtMS(s.Min), fmtMS(s.Max),
			fmt.Sprintf("%d (%d)", s.RelayRuns, s.JoinedRuns),
		})
	}
	t.Notes = []string{
		"wake-up: the writer's wake-up starts a run of a warm relay (publisher connected), which joins (heartbeat, coordination read,",
		"claims), probes, fetches and publishes; one message at a time. Lambda's asynchronous invoke adds its own delay on AWS.",
		fmt.Sprintf("polling: a relay holding every bucket finds the message at its next poll (every %v); commits %v–%v apart.",
			r.Config.PollInterval, r.Config.MaxGap/10, r.Config.MaxGap),
	}
	return []lab.Table{t}
}

func seriesLabel(name string, c LatencyConfig) string {
	switch name {
	case SeriesWake:
		return "warm relay woken by the wake-up"
	case SeriesPoll:
		return fmt.Sprintf("polling only (P=%v)", c.PollInterval)
	}
	return name
}

func fmtMS(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

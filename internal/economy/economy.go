package economy

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spillway-dev/spillway/internal/steady"
	"github.com/spillway-dev/spillway/outbox"
)

// Deployments compared.
const (
	Spillway = "spillway"
	Fargate  = "fargate"
	Streams  = "streams"
)

// Parts of a bill.
const (
	PartDynamoDB       = "dynamodb"
	PartLambdaRequests = "lambda requests"
	PartLambdaDuration = "lambda duration"
	PartSchedule       = "schedule"
	PartFargate        = "fargate task"
	PartTotal          = "total"
)

// Defaults of Config.
const (
	DefaultValueSize = 1024
	// DefaultMemoryMB is the stack's relay memory (infra/spillway).
	DefaultMemoryMB = 128
)

// DefaultRates are the rates of the table, messages per second.
var DefaultRates = []float64{0, 0.1, 1, 10, 100}

// DefaultDuration is how long a rate is simulated: long enough for a
// steady state and for a run's start (the first cold start, the linger
// learning the traffic: a month's once) to weigh less than 1 % of its
// messages, so a p99 is the traffic's, not the start's (about 170 messages
// at 0.1 msg/s, 1,800 at 1 msg/s); short enough to keep the study near a
// few minutes of wall time.
func DefaultDuration(rate float64) time.Duration {
	switch {
	case rate <= 0:
		return 10 * time.Minute
	case rate < 10:
		return 30 * time.Minute
	case rate < 100:
		return 5 * time.Minute
	}
	return time.Minute
}

// Config describes one economy run. Zero fields take their defaults.
type Config struct {
	// Rates in messages per second. Default DefaultRates.
	Rates []float64
	// Duration returns how long a rate's writes are simulated. Default
	// DefaultDuration.
	Duration func(rate float64) time.Duration
	// ValueSize is every message value's size. Default 1 KB.
	ValueSize int
	// Buckets is the bucket count. Default 8.
	Buckets int
	// MemoryMB is the relay function's memory. Default 128, the stack's.
	MemoryMB int
	// IdleTimeout is the drain-mode relay's linger
	// (SPILLWAY_IDLE_TIMEOUT). Default: the function's.
	IdleTimeout time.Duration
	// MaxIdleTimeout is its longer linger under steady traffic
	// (SPILLWAY_MAX_IDLE_TIMEOUT). Default: the function's.
	MaxIdleTimeout time.Duration
	// TargetLatency is the table's runs' latency dial
	// (SPILLWAY_TARGET_LATENCY). Default: the function's.
	TargetLatency time.Duration
	// Doorbell makes the table's Spillway and Fargate relays listen on the
	// doorbell and its writers ring it (SPILLWAY_DOORBELL_TOPIC). Default
	// false; the economy study prices the deployment with it.
	Doorbell bool
	// Settings are how relays learn of commits that the curve measures at
	// CurveRates, in drain mode, the first its baseline. Default
	// DefaultSettings.
	Settings []Setting
	// CurveRates are the rates of the curve. Default none: no curve (the
	// economy study measures DefaultCurveRates).
	CurveRates []float64
	// Seed fixes the scenario's randomness. Default 1.
	Seed uint64
	// Progress receives a line per run. Optional.
	Progress io.Writer
}

func (c Config) withDefaults() Config {
	if len(c.Rates) == 0 {
		c.Rates = DefaultRates
	}
	if c.Duration == nil {
		c.Duration = DefaultDuration
	}
	if len(c.Settings) == 0 {
		c.Settings = DefaultSettings
	}
	c.ValueSize = cmp.Or(c.ValueSize, DefaultValueSize)
	c.Buckets = cmp.Or(c.Buckets, outbox.DefaultBucketCount)
	c.MemoryMB = cmp.Or(c.MemoryMB, DefaultMemoryMB)
	c.Seed = cmp.Or(c.Seed, steady.DefaultSeed)
	return c
}

func (c Config) validate() error {
	const op = "validate economy config"
	for _, r := range c.Rates {
		if r < 0 {
			return outbox.Misconfigured(op, "rates must be >= 0, got %v", r)
		}
		if d := c.Duration(r); d <= 0 {
			return outbox.Misconfigured(op, "duration of rate %v must be > 0, got %v", r, d)
		}
	}
	if c.MemoryMB < 128 || c.MemoryMB > 10240 {
		return outbox.Misconfigured(op, "MemoryMB must be in [128, 10240] (Lambda's range), got %d", c.MemoryMB)
	}
	return nil
}

// Run measures every rate and prices the three deployments. It must be
// called inside a testing/synctest bubble: each rate's steady scenario
// (steady.Run) runs on the bubble's clock.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Result{}, err
	}
	res := Result{Prices: OnDemandPrices, MemoryMB: cfg.MemoryMB, ValueSize: cfg.ValueSize, Buckets: cfg.Buckets, Seed: cfg.Seed, Doorbell: cfg.Doorbell}
	main := Setting{Target: cfg.TargetLatency, Doorbell: cfg.Doorbell}
	for _, rate := range cfg.Rates {
		m, err := measure(ctx, cfg, rate, outbox.ModeDrain, main)
		if err != nil {
			return Result{}, err
		}
		res.Runs = append(res.Runs, m)
		res.Lines = append(res.Lines, spillwayBill(res.Prices, cfg, m)...)
		hold := modelledIdleHold(cfg, m)
		if rate > 0 {
			if hold, err = measure(ctx, cfg, rate, outbox.ModeHold, main); err != nil {
				return Result{}, err
			}
			res.Runs = append(res.Runs, hold)
		}
		res.Lines = append(res.Lines, fargateBill(res.Prices, rate, hold)...)
		res.Lines = append(res.Lines, streamsBill(res.Prices, cfg, rate)...)
	}
	curve, err := runCurve(ctx, cfg, res)
	if err != nil {
		return Result{}, err
	}
	res.Curve = curve
	res.Assumptions = Assumptions(cfg)
	return res, nil
}

// holdTail is how long a held relay outlives the writes at most, when the
// writes fit one relay lifetime.
const holdTail = 30 * time.Second

// Measured is one steady-scenario run the bill prices (its Config.Rate 0
// at no traffic), or its model where none ran.
type Measured struct {
	steady.Report
	// Setting is how its relays learned of commits.
	Setting Setting `json:"setting"`
	// Modelled reports figures that were not run but modelled.
	Modelled bool `json:"modelled,omitempty"`
}

// perMonth scales a run's count to a 30-day month of the same traffic:
// what the run consumed, tail included, over its write time.
func (m Measured) perMonth(n float64) float64 {
	if m.Config.Duration <= 0 {
		return 0
	}
	return n * SecondsPerMonth / m.Config.Duration.Seconds()
}

// measure runs the steady scenario at rate in mode, its relays learning
// of commits as s says.
func measure(ctx context.Context, cfg Config, rate float64, mode outbox.Mode, s Setting) (Measured, error) {
	sc := steady.Config{
		Rate: rate, Duration: cfg.Duration(rate), ValueSize: cfg.ValueSize, Buckets: cfg.Buckets,
		Seed: cfg.Seed, Relay: outbox.RelayOptions{Mode: mode, TargetLatency: s.Target},
		Doorbell: s.Doorbell, DoorbellDown: s.Down,
	}
	if mode == outbox.ModeDrain {
		sc.Relay.IdleTimeout, sc.Relay.MaxIdleTimeout = cfg.IdleTimeout, cfg.MaxIdleTimeout
	}
	if rate == 0 {
		sc.Rate = -1
	}
	if mode == outbox.ModeHold {
		// A held relay polls until its deadline: split the writes into
		// equal lifetimes of at most the function's 15 minutes that end
		// shortly after the writes, so the run's idle tail stays small
		// against its write time.
		lifetimes := (sc.Duration + holdTail + steady.DefaultRelayTimeout - 1) / steady.DefaultRelayTimeout
		sc.RelayTimeout = sc.Duration/lifetimes + holdTail
	}
	rep, err := steady.Run(ctx, sc)
	if err != nil {
		return Measured{}, fmt.Errorf("economy: %v msg/s, %s mode: %w", rate, mode, err)
	}
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "economy: %v msg/s, %s mode, %s: %d messages over %v simulated\n",
			rate, mode, s, rep.Relayed, rep.Simulated.Round(time.Second))
	}
	rep.Config.Rate = rate // steady runs no traffic at a negative rate
	return Measured{Report: rep, Setting: s}, nil
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// Idle deployment modes.
const (
	// IdleDrain is the default Lambda deployment: drain-mode relays started
	// by the schedule, which on an idle table only probe and exit.
	IdleDrain = "drain"
	// IdleHold is a hold-mode deployment while a relay is held: back-to-back
	// invocations that join and poll their share until the function
	// timeout, next to the schedule's sweeps.
	IdleHold = "hold"
	// IdleAlwaysOn is one relay that runs all the time (a container or a
	// host process), polling every PollInterval and renewing every
	// LeaseRenewInterval.
	IdleAlwaysOn = "always-on"
)

// IdleConfig parameterises the idle-cost simulation. Zero fields take their
// defaults.
type IdleConfig struct {
	// Window is the simulated time. Default 1 h.
	Window time.Duration
	// BucketCount is the table's bucket count. Default 8.
	BucketCount int
	// Schedule is the sweep interval of the drain and hold deployments.
	// Default 1 min (EventBridge Scheduler rate(1 minute)).
	Schedule time.Duration
	// FunctionTimeout is the relay function's timeout, the length of a held
	// invocation. Default 15 min (design §7).
	FunctionTimeout time.Duration
	// PollInterval and RenewInterval are the held and always-on relays'
	// PollInterval and LeaseRenewInterval. Default 1 s and 10 s.
	PollInterval, RenewInterval time.Duration
	// Modes lists the deployments to simulate. Default all three.
	Modes []string
}

func (c IdleConfig) withDefaults() IdleConfig {
	setDuration(&c.Window, time.Hour)
	setCount(&c.BucketCount, outbox.DefaultBucketCount)
	setDuration(&c.Schedule, time.Minute)
	setDuration(&c.FunctionTimeout, 15*time.Minute)
	setDuration(&c.PollInterval, outbox.DefaultPollInterval)
	setDuration(&c.RenewInterval, outbox.DefaultLeaseRenewInterval)
	if len(c.Modes) == 0 {
		c.Modes = []string{IdleDrain, IdleHold, IdleAlwaysOn}
	}
	return c
}

// IdleResult is the DynamoDB cost of deployments with nothing to relay.
type IdleResult struct {
	Config IdleConfig
	Prices Prices
	Modes  []IdleCost
}

// IdleCost is what one deployment spent in the simulated window.
type IdleCost struct {
	Mode string
	// Runs counts relay runs (invocations) started in the window; Joined
	// those that took part in the fleet (heartbeat and leases).
	Runs, Joined int
	// Requests are the DynamoDB requests of the window by operation.
	Requests map[string]int
	// ReadUnits and WriteUnits are the capacity units of the window.
	ReadUnits, WriteUnits float64
	// PerHour scales the window to one hour.
	PerHour Rate
}

// Rate is a request and unit rate with its on-demand price.
type Rate struct {
	Requests              float64
	ReadUnits, WriteUnits float64
	USD                   float64
}

var idleScenario = Scenario{
	Name:    "idle",
	Summary: "request units per hour of an idle 8-bucket deployment: drain + schedule, hold, always-on (simulated hour)",
	Run: func(ctx context.Context, env Env) (Result, error) {
		return RunIdle(ctx, env, IdleConfig{})
	},
}

// RunIdle simulates each deployment for cfg.Window on a manual clock, with
// the real relay engine against DynamoDB and Kafka, and counts the
// requests and capacity units.
func RunIdle(ctx context.Context, env Env, cfg IdleConfig) (res IdleResult, err error) {
	cfg = cfg.withDefaults()
	if cfg.Window < 0 || cfg.BucketCount < 1 || cfg.Schedule < 0 || cfg.FunctionTimeout < 0 || cfg.PollInterval < 0 || cfg.RenewInterval < 0 {
		return IdleResult{}, fmt.Errorf("bench: idle config %+v: want positive durations and buckets", cfg)
	}
	b, err := startBackends(ctx, env)
	if err != nil {
		return IdleResult{}, err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	res = IdleResult{Config: cfg, Prices: OnDemandPrices}
	for _, mode := range cfg.Modes {
		env.progressf("idle: simulating %v of %s", cfg.Window, mode)
		cost, err := simulateIdle(ctx, b, cfg, mode)
		if err != nil {
			return IdleResult{}, fmt.Errorf("bench: idle %s: %w", mode, err)
		}
		res.Modes = append(res.Modes, cost)
	}
	return res, nil
}

// idleRun is one mode's simulation.
type idleRun struct {
	cfg   IdleConfig
	sim   *simulation
	b     *backends
	opts  outboxddb.Options
	pub   outbox.Publisher
	start time.Time

	runs, joined int
}

func simulateIdle(ctx context.Context, b *backends, cfg IdleConfig, mode string) (IdleCost, error) {
	clock := outboxlocal.NewManualClock(simStart)
	opts, err := b.newTable(ctx, cfg.BucketCount, clock)
	if err != nil {
		return IdleCost{}, err
	}
	pub, err := b.newPublisher(ctx)
	if err != nil {
		return IdleCost{}, err
	}
	defer pub.Close()
	run := &idleRun{cfg: cfg, sim: newSimulation(ctx, clock), b: b, opts: opts, pub: pub, start: simStart}
	// Actors start at once (a sweep is due at the start): count from here.
	before := b.ddb.Counter.Snapshot()
	switch mode {
	case IdleDrain:
		err = run.spawnSchedule()
	case IdleHold:
		if err = run.spawnSchedule(); err == nil {
			err = run.spawnHeld()
		}
	case IdleAlwaysOn:
		err = run.spawnAlwaysOn()
	default:
		err = fmt.Errorf("unknown mode %q (want %s, %s or %s)", mode, IdleDrain, IdleHold, IdleAlwaysOn)
	}
	if err != nil {
		_ = run.sim.stop()
		return IdleCost{}, err
	}
	runErr := run.sim.runUntil(simStart.Add(cfg.Window))
	counts := b.ddb.Counter.Snapshot().Since(before)
	if err := run.sim.stop(); err != nil {
		return IdleCost{}, err
	}
	if runErr != nil {
		return IdleCost{}, runErr
	}
	scale := float64(time.Hour) / float64(cfg.Window)
	cost := IdleCost{
		Mode: mode, Runs: run.runs, Joined: run.joined,
		Requests: counts.Requests, ReadUnits: counts.ReadUnits, WriteUnits: counts.WriteUnits,
	}
	cost.PerHour = Rate{
		Requests:   float64(counts.TotalRequests()) * scale,
		ReadUnits:  counts.ReadUnits * scale,
		WriteUnits: counts.WriteUnits * scale,
	}
	cost.PerHour.USD = OnDemandPrices.USD(cost.PerHour.WriteUnits, cost.PerHour.ReadUnits)
	return cost, nil
}

// relay builds an idle relay in its own execution environment (its own
// store; the environments share the client, and so the Counter, and the
// publisher): default options with the configured poll and renewal
// intervals.
func (r *idleRun) relay(id string, mode outbox.Mode) (*outbox.Relay, error) {
	p, err := r.b.newRelay(r.sim.ctx, r.opts, r.pub, outbox.RelayOptions{
		RelayID: id, BucketCount: r.cfg.BucketCount, Mode: mode,
		PollInterval: r.cfg.PollInterval, LeaseRenewInterval: r.cfg.RenewInterval,
	}, r.sim.clock, nil)
	if err != nil {
		return nil, err
	}
	return p.Relay, nil
}

// spawnSchedule starts the schedule: a drain-mode relay (one warm execution
// environment) run with TriggerSchedule at every interval of the window.
func (r *idleRun) spawnSchedule() error {
	return r.spawnInvocations("schedule", outbox.ModeDrain, outbox.TriggerSchedule, r.cfg.Schedule)
}

// spawnHeld starts a hold-mode relay invoked at every function timeout of
// the window, each invocation joining and polling its share until its
// budget. A schedule sweep on an idle table never joins, so this is the
// cost of a hold deployment while a relay is held (after a writer's
// wake-up); once the last held invocation ends, an idle hold deployment
// costs what the drain deployment costs.
func (r *idleRun) spawnHeld() error {
	return r.spawnInvocations("held", outbox.ModeHold, outbox.TriggerDirect, r.cfg.FunctionTimeout)
}

// spawnInvocations starts one warm execution environment whose relay is
// invoked with trigger at every interval of the window, each invocation's
// deadline the function timeout after its start.
func (r *idleRun) spawnInvocations(id string, mode outbox.Mode, trigger outbox.Trigger, every time.Duration) error {
	relay, err := r.relay(id, mode)
	if err != nil {
		return err
	}
	end := r.start.Add(r.cfg.Window)
	r.sim.spawn(func(ctx context.Context) error {
		for at := r.start; at.Before(end); at = at.Add(every) {
			if !r.sim.sleepUntil(ctx, at) {
				return nil
			}
			res, err := relay.Run(ctx, outbox.RunInput{Trigger: trigger, Deadline: at.Add(r.cfg.FunctionTimeout)})
			if err != nil {
				return fmt.Errorf("%s invocation at %v: %w", id, at.Sub(r.start), err)
			}
			if ctx.Err() != nil {
				return nil
			}
			r.count(res)
		}
		r.sim.park(ctx)
		return nil
	})
	return nil
}

// spawnAlwaysOn starts one hold-mode relay without a deadline.
func (r *idleRun) spawnAlwaysOn() error {
	relay, err := r.relay("always-on", outbox.ModeHold)
	if err != nil {
		return err
	}
	r.runs, r.joined = 1, 1
	r.sim.spawn(func(ctx context.Context) error {
		res, err := relay.Run(ctx, outbox.RunInput{Trigger: outbox.TriggerDirect})
		if err == nil && ctx.Err() == nil {
			err = fmt.Errorf("always-on relay stopped before the window ended: %s", res.Reason)
		}
		return err
	})
	return nil
}

// count records a finished run; actors run one at a time between clock
// moves, but the schedule and a held relay may finish at the same instant.
func (r *idleRun) count(res outbox.RunResult) {
	r.sim.mu.Lock()
	defer r.sim.mu.Unlock()
	r.runs++
	if res.Joined {
		r.joined++
	}
}

// Tables renders the idle costs.
func (r IdleResult) Tables() []Table {
	t := Table{
		Title:  fmt.Sprintf("Idle cost: %d buckets, nothing to relay, %v simulated on a manual clock with the real relay engine", r.Config.BucketCount, r.Config.Window),
		Header: []string{"deployment", "runs (joined)", "Query", "PutItem", "UpdateItem", "requests/h", "RRU/h", "WRU/h", "USD/h", "USD/month"},
	}
	for _, m := range r.Modes {
		t.Rows = append(t.Rows, []string{
			idleLabel(m.Mode, r.Config),
			fmt.Sprintf("%d (%d)", m.Runs, m.Joined),
			fmtInt(m.Requests["Query"]), fmtInt(m.Requests["PutItem"]), fmtInt(m.Requests["UpdateItem"]),
			fmtF(m.PerHour.Requests, 0), fmtF(m.PerHour.ReadUnits, 1), fmtF(m.PerHour.WriteUnits, 1),
			fmtUSD(m.PerHour.USD), fmtUSD(m.PerHour.USD * hoursPerMonth),
		})
	}
	t.Notes = []string{
		"USD: " + r.Prices.Source + "; month = 30 days.",
		fmt.Sprintf("drain: the %v schedule probes every bucket (eventually consistent, Limit 1) and exits when nothing is pending.", r.Config.Schedule),
		fmt.Sprintf("hold: invocations of %v that join and poll until their budget, plus the schedule; a sweep never joins an idle table,", r.Config.FunctionTimeout),
		"      so after the last held invocation an idle hold deployment costs what drain costs.",
		fmt.Sprintf("always-on: one relay polling its buckets every %v and renewing every %v.", r.Config.PollInterval, r.Config.RenewInterval),
	}
	return []Table{t}
}

func idleLabel(mode string, c IdleConfig) string {
	switch mode {
	case IdleDrain:
		return fmt.Sprintf("drain + %v schedule", c.Schedule)
	case IdleHold:
		return fmt.Sprintf("hold (%v invocations) + schedule", c.FunctionTimeout)
	case IdleAlwaysOn:
		return fmt.Sprintf("always-on (P=%v, I=%v)", c.PollInterval, c.RenewInterval)
	}
	return mode
}

func setDuration(p *time.Duration, v time.Duration) {
	if *p == 0 {
		*p = v
	}
}

func setCount(p *int, v int) {
	if *p == 0 {
		*p = v
	}
}

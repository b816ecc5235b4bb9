package economy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spillway-dev/spillway/internal/bench"
	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/internal/lambdasim"
	"github.com/spillway-dev/spillway/internal/relayproc"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
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
	c.Window = cmp.Or(c.Window, time.Hour)
	c.BucketCount = cmp.Or(c.BucketCount, outbox.DefaultBucketCount)
	c.Schedule = cmp.Or(c.Schedule, time.Minute)
	c.FunctionTimeout = cmp.Or(c.FunctionTimeout, 15*time.Minute)
	c.PollInterval = cmp.Or(c.PollInterval, outbox.DefaultPollInterval)
	c.RenewInterval = cmp.Or(c.RenewInterval, outbox.DefaultLeaseRenewInterval)
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

// RunIdle simulates each deployment for cfg.Window, with the real relay
// engine against DynamoDB and Kafka, and counts the requests and capacity
// units. It runs only inside the lab's synctest bubble (env.Settle), whose
// clock is the simulation's.
func RunIdle(ctx context.Context, env lab.Config, cfg IdleConfig) (res IdleResult, err error) {
	cfg = cfg.withDefaults()
	if cfg.Window < 0 || cfg.BucketCount < 1 || cfg.Schedule < 0 || cfg.FunctionTimeout < 0 || cfg.PollInterval < 0 || cfg.RenewInterval < 0 {
		return IdleResult{}, fmt.Errorf("economy: idle config %+v: want positive durations and buckets", cfg)
	}
	if env.Settle == nil {
		return IdleResult{}, lab.ErrNotInBubble
	}
	b, err := bench.StartBackends(ctx, env)
	if err != nil {
		return IdleResult{}, err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	res = IdleResult{Config: cfg, Prices: OnDemandPrices}
	for _, mode := range cfg.Modes {
		env.Progressf("idle: simulating %v of %s", cfg.Window, mode)
		cost, err := simulateIdle(ctx, env, b, cfg, mode)
		if err != nil {
			return IdleResult{}, fmt.Errorf("economy: idle %s: %w", mode, err)
		}
		res.Modes = append(res.Modes, cost)
	}
	return res, nil
}

// idleRun is one mode's simulation.
type idleRun struct {
	cfg   IdleConfig
	sim   *lab.Sim
	b     *bench.Backends
	opts  outboxddb.Options
	pub   outbox.Publisher
	start time.Time
}

func simulateIdle(ctx context.Context, env lab.Config, b *bench.Backends, cfg IdleConfig, mode string) (cost IdleCost, err error) {
	opts, err := b.NewTable(ctx, cfg.BucketCount, outbox.SystemClock{})
	if err != nil {
		return IdleCost{}, err
	}
	pub, err := b.NewPublisher(ctx)
	if err != nil {
		return IdleCost{}, err
	}
	defer pub.Close()
	sim, err := lab.NewSim(ctx, env)
	if err != nil {
		return IdleCost{}, err
	}
	run := &idleRun{cfg: cfg, sim: sim, b: b, opts: opts, pub: pub, start: sim.StartOnTheHour()}
	cost, err = run.simulate(mode)
	return cost, errors.Join(err, sim.Stop())
}

// simulate starts the deployment at the window's start (a sweep is due
// then) and counts the requests of the window.
func (r *idleRun) simulate(mode string) (IdleCost, error) {
	before := r.b.DynamoDB.Counter.Snapshot()
	var stats func() lambdasim.Stats
	var err error
	switch mode {
	case IdleDrain:
		stats, err = r.startFunction(outbox.ModeDrain, false)
	case IdleHold:
		stats, err = r.startFunction(outbox.ModeHold, true)
	case IdleAlwaysOn:
		stats, err = r.startAlwaysOn()
	default:
		err = fmt.Errorf("unknown mode %q (want %s, %s or %s)", mode, IdleDrain, IdleHold, IdleAlwaysOn)
	}
	if err != nil {
		return IdleCost{}, err
	}
	if err := r.sim.RunUntil(r.start.Add(r.cfg.Window)); err != nil {
		return IdleCost{}, err
	}
	counts := r.b.DynamoDB.Counter.Snapshot().Since(before)
	st := stats()
	if st.Errors > 0 || st.Killed > 0 {
		return IdleCost{}, fmt.Errorf("%d relay invocations failed and %d were killed at their deadline (last error: %s)", st.Errors, st.Killed, st.LastError)
	}
	scale := float64(time.Hour) / float64(r.cfg.Window)
	cost := IdleCost{
		Mode: mode, Runs: st.Invocations, Joined: st.JoinedInvocations,
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

// holdPayload is the wake-up that holds a relay: it joins whoever holds
// the buckets.
var holdPayload = []byte(`{"trigger":"wake","join":true}`)

// startFunction deploys the relay function in mode on the Lambda emulator,
// running the real relay handler in each execution environment, and sends
// the schedule's event at every interval of the window; held adds a
// wake-up at every function timeout of the window, each invocation joining
// and polling its share until its deadline. A schedule sweep on an idle
// table never joins, so the held invocations are the cost of a hold
// deployment while a relay is held (after a writer's wake-up); once the
// last one ends, an idle hold deployment costs what the drain deployment
// costs.
func (r *idleRun) startFunction(mode outbox.Mode, held bool) (func() lambdasim.Stats, error) {
	fnCfg, err := lab.FunctionConfig(r.opts.TableName, r.cfg.BucketCount,
		outbox.RelayOptions{Mode: mode, PollInterval: r.cfg.PollInterval, LeaseRenewInterval: r.cfg.RenewInterval})
	if err != nil {
		return nil, err
	}
	fn, err := lab.NewRelayFunction(lab.RelayFunction{
		Sim:    r.sim,
		Lambda: lambdasim.Config[*lab.RelayEnv]{ReservedConcurrency: 2, Timeout: r.cfg.FunctionTimeout},
		Config: fnCfg, Client: r.b.DynamoDB.Client,
		Publisher: func(*lab.RelayEnv) outbox.Publisher { return r.pub },
		// As deployed: a stopping relay watches the buckets it released
		// for a second (a probe of each), so that a commit whose writer
		// skipped its wake-up is not left to the schedule.
		Continuations: true,
		Logger:        bench.QuietLogger(),
	})
	if err != nil {
		return nil, err
	}
	r.sim.Every(r.start, r.cfg.Schedule, func(now time.Time) bool { fn.Send(lab.SchedulePayload, now); return true })
	if held {
		// The wake-up comes a millisecond after the schedule's event of the
		// same minute: started at one instant, the two invocations' requests
		// would interleave in whichever order the runtime ran them, and a
		// seed would not give one report.
		r.sim.Every(r.start.Add(time.Millisecond), r.cfg.FunctionTimeout, func(now time.Time) bool { fn.Send(holdPayload, now); return true })
	}
	return fn.Stats, nil
}

// startAlwaysOn starts one hold-mode relay without a deadline, as a
// container or host process runs it.
func (r *idleRun) startAlwaysOn() (func() lambdasim.Stats, error) {
	p, err := r.b.NewRelay(r.sim.Context(), relayproc.Config{
		Store: outboxddb.StoreOptions{Options: r.opts}, Publisher: r.pub,
		Relay: outbox.RelayOptions{
			RelayID: "always-on", BucketCount: r.cfg.BucketCount, Mode: outbox.ModeHold,
			PollInterval: r.cfg.PollInterval, LeaseRenewInterval: r.cfg.RenewInterval,
		},
	})
	if err != nil {
		return nil, err
	}
	r.sim.Go(func(ctx context.Context) error {
		res, err := p.Relay.Run(ctx, outbox.RunInput{Trigger: outbox.TriggerDirect})
		if err == nil && ctx.Err() == nil {
			err = fmt.Errorf("always-on relay stopped before the window ended: %s", res.Reason)
		}
		return err
	})
	return func() lambdasim.Stats { return lambdasim.Stats{Invocations: 1, JoinedInvocations: 1} }, nil
}

// Tables renders the idle costs.
func (r IdleResult) Tables() []lab.Table {
	t := lab.Table{
		Title:  fmt.Sprintf("Idle cost: %d buckets, nothing to relay, %v simulated with the real relay engine", r.Config.BucketCount, r.Config.Window),
		Header: []string{"deployment", "runs (joined)", "Query", "PutItem", "UpdateItem", "requests/h", "RRU/h", "WRU/h", "USD/h", "USD/month"},
	}
	for _, m := range r.Modes {
		t.Rows = append(t.Rows, []string{
			idleLabel(m.Mode, r.Config),
			fmt.Sprintf("%d (%d)", m.Runs, m.Joined),
			fmt.Sprint(m.Requests["Query"]), fmt.Sprint(m.Requests["PutItem"]), fmt.Sprint(m.Requests["UpdateItem"]),
			fmt.Sprintf("%.0f", m.PerHour.Requests), fmt.Sprintf("%.1f", m.PerHour.ReadUnits), fmt.Sprintf("%.1f", m.PerHour.WriteUnits),
			unitUSD(m.PerHour.USD), unitUSD(m.PerHour.USD * hoursPerMonth),
		})
	}
	t.Notes = []string{
		"USD: " + r.Prices.Source + "; month = 30 days.",
		fmt.Sprintf("drain: the %v schedule probes every bucket (eventually consistent, Limit 1) and exits when nothing is pending.", r.Config.Schedule),
		fmt.Sprintf("hold: invocations of %v that join and poll until their budget, plus the schedule; a sweep never joins an idle table,", r.Config.FunctionTimeout),
		"      so after the last held invocation an idle hold deployment costs what drain costs; as deployed, each stop probes the buckets",
		"      it released once more a second later (the continuation watch).",
		fmt.Sprintf("always-on: one relay polling its buckets every %v and renewing every %v.", r.Config.PollInterval, r.Config.RenewInterval),
	}
	return []lab.Table{t}
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

package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/spillway-dev/spillway/internal/lambdasim"
	"github.com/spillway-dev/spillway/internal/sleep"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// NotifierTimeout replaces a wake-up notifier's 2 s bound on one invoke in a
// simulation: the emulated invoke never hangs, and the bound's timer would
// only add instants to the run.
const NotifierTimeout = time.Hour

// RelayFunctionName names the relay function in a simulation's Invoke
// calls (writers' and continuation wake-ups); the emulator hosts one
// function and ignores it.
const RelayFunctionName = "spillway-relay"

// SchedulePayload is the event the relay function's schedule sends.
var SchedulePayload = []byte(`{"trigger":"schedule"}`)

// RelayFunction describes the relay function a simulation deploys on the
// Lambda emulator (internal/lambdasim). Every execution environment runs
// the real outboxlambda.RelayHandler, built as the function's init builds
// it: its own relay id, outboxddb.Store, publisher and, with
// Continuations, continuation notifier (whose wake-ups invoke the emulated
// function), kept across its warm invocations.
type RelayFunction struct {
	// Lambda configures the emulated function: scheduler and context
	// (unless Sim gives them), concurrency, timeout, latencies and hooks.
	// NewRelayFunction sets its NewEnv.
	Lambda lambdasim.Config[*RelayEnv]
	// Sim, when set, runs the function on a simulation: Sim is its
	// scheduler, Sim.Context its context, and Sim.Stop waits for the
	// invocations still running, so that none of their requests lands
	// after the study's counts. Default: Lambda's scheduler and context.
	Sim *Sim
	// Config is the relay function's configuration, as
	// outboxlambda.LoadConfig reads it from the environment the stack sets
	// (required); every store is built from its StoreOptions.
	Config outboxlambda.Config
	// Client is every environment's DynamoDB client (required unless Env
	// gives every environment a client of its own).
	Client outboxddb.Client
	// MaxConcurrency, when positive, bounds the requests a store sends at
	// once: 1 makes them land one after another, in an order a seed
	// reproduces, where requests sent together would land at one instant of
	// the bubble in any order. Default: the store's.
	MaxConcurrency int
	// RelayID names environment n's relay (n counts the environments from
	// 1). Default relay-NN.
	RelayID func(n int) string
	// Env, when set, prepares environment env before its store and handler
	// are built: it may rename env.RelayID, replace env.Clock and
	// env.Client, and set env.State. An error fails the environment's
	// creation. Default: none.
	Env func(env *RelayEnv) error
	// HandlerConfig, when set, adjusts env's handler configuration just
	// before the handler is built: its Config (batch size, mode), its
	// Notifier. Default: none.
	HandlerConfig func(env *RelayEnv, cfg *outboxlambda.RelayHandlerConfig)
	// Hooks are given to every store (each must implement
	// outboxddb.HookRequest) and every handler's relay (each must implement
	// one of the relay's hook interfaces too). Default: none.
	Hooks []outbox.Hook
	// Publisher returns environment env's Kafka publisher (required).
	Publisher func(env *RelayEnv) outbox.Publisher
	// Store returns the store env's handler uses instead of its
	// outboxddb.Store, to observe or count its calls; it may set
	// env.State. Default: the outboxddb.Store itself.
	Store func(env *RelayEnv, store *outboxddb.Store) outbox.Store
	// Continuations gives every relay a continuation notifier, as the
	// deployed function has: a stopping relay wakes the function for the
	// buckets it released with work left, after watching them a moment for
	// commits whose writers skipped their wake-up. Without it the schedule
	// finds that work, and a stop watches nothing.
	Continuations bool
	// Logger receives the relays' logs. Default: none.
	Logger *slog.Logger
	// Stagger starts every invocation of environment n n nanoseconds late,
	// so that invocations the emulator starts at one instant (throttled
	// events retried together) send their requests at distinct instants,
	// whose order the bubble keeps and a seed reproduces. Default: none.
	Stagger bool
}

// RelayEnv is one execution environment of a RelayFunction.
type RelayEnv struct {
	// RelayID is the environment's relay id.
	RelayID string
	// Clock is the environment's host clock, which its store, notifier and
	// handler read: outbox.SystemClock (the bubble's in a simulation)
	// unless RelayFunction.Env replaced it.
	Clock outbox.Clock
	// Client is the environment's DynamoDB client: RelayFunction.Client
	// unless RelayFunction.Env replaced it.
	Client outboxddb.Client
	// Handler is the environment's relay handler.
	Handler *outboxlambda.RelayHandler
	// State is what the simulation keeps per environment, set by
	// RelayFunction.Store; nil otherwise.
	State any

	delay time.Duration
}

// Handle runs one invocation of the environment's relay handler, after the
// environment's stagger.
func (e *RelayEnv) Handle(ctx context.Context, payload json.RawMessage) (outboxlambda.RelayResponse, error) {
	if !sleep.For(e.delay, ctx.Done()) {
		return outboxlambda.RelayResponse{RelayID: e.RelayID}, context.Cause(ctx)
	}
	return e.Handler.Handle(ctx, payload)
}

// NewRelayFunction validates rf and returns the emulated relay function,
// without environments yet: the emulator creates them on demand. The
// relays' clock is outbox.SystemClock, the time package's: the bubble's in
// a simulation, unless RelayFunction.Env gives an environment its own.
func NewRelayFunction(rf RelayFunction) (*lambdasim.Function[*RelayEnv], error) {
	if (rf.Client == nil && rf.Env == nil) || rf.Publisher == nil {
		return nil, fmt.Errorf("lab: a relay function needs a Client (or an Env that gives one) and a Publisher")
	}
	if rf.RelayID == nil {
		rf.RelayID = func(n int) string { return fmt.Sprintf("relay-%02d", n) }
	}
	if rf.Logger == nil {
		rf.Logger = slog.New(slog.DiscardHandler)
	}
	var fn *lambdasim.Function[*RelayEnv]
	cfg := rf.Lambda
	cfg.NewEnv = func(n int) (*RelayEnv, error) { return rf.newEnv(fn, n) }
	if rf.Sim != nil {
		cfg.Scheduler, cfg.Context = rf.Sim, rf.Sim.Context()
	}
	fn, err := lambdasim.New(cfg)
	if err == nil && rf.Sim != nil {
		rf.Sim.Go(func(ctx context.Context) error {
			<-ctx.Done()
			fn.Wait()
			return nil
		})
	}
	return fn, err
}

// FunctionConfig is the relay function's configuration on table with
// buckets, read through outboxlambda.LoadConfig from the environment the
// stack would set: every non-zero setting of o the function exposes (Mode,
// PollInterval, TargetLatency, IdleTimeout, MaxIdleTimeout, LeaseDuration,
// LeaseRenewInterval, StopMargin, BatchSize), with the function's defaults
// and validation for the rest.
func FunctionConfig(table string, buckets int, o outbox.RelayOptions) (outboxlambda.Config, error) {
	return FunctionConfigWith(table, buckets, o, nil)
}

// DoorbellEnv is the environment a relay function with the doorbell gets
// beside FunctionConfig's (FunctionConfigWith): the topic and the brokers
// it needs, which the simulation's publisher and lab.Doorbell stand in
// for.
var DoorbellEnv = map[string]string{outboxconf.EnvDoorbellTopic: "spillway-doorbell", outboxconf.EnvKafkaBrokers: "kafka.lab:9092"}

// FunctionConfigWith is FunctionConfig with the variables of extra set
// too (DoorbellEnv).
func FunctionConfigWith(table string, buckets int, o outbox.RelayOptions, extra map[string]string) (outboxlambda.Config, error) {
	env := map[string]string{outboxconf.EnvTable: table, outboxconf.EnvBucketCount: fmt.Sprint(buckets), outboxconf.EnvMode: string(o.Mode)}
	for k, v := range extra {
		env[k] = v
	}
	for name, d := range map[string]time.Duration{
		outboxconf.EnvPollInterval: o.PollInterval, outboxconf.EnvTargetLatency: o.TargetLatency,
		outboxconf.EnvIdleTimeout: o.IdleTimeout, outboxconf.EnvMaxIdleTimeout: o.MaxIdleTimeout,
		outboxconf.EnvLeaseDuration: o.LeaseDuration, outboxconf.EnvLeaseRenewInterval: o.LeaseRenewInterval,
		outboxconf.EnvStopMargin: o.StopMargin,
	} {
		if d != 0 {
			env[name] = d.String()
		}
	}
	if o.BatchSize != 0 {
		env[outboxconf.EnvBatchSize] = fmt.Sprint(o.BatchSize)
	}
	return outboxlambda.LoadConfig(func(name string) string { return env[name] })
}

// newEnv builds environment n of fn the way the relay function's init
// does.
func (rf RelayFunction) newEnv(fn *lambdasim.Function[*RelayEnv], n int) (*RelayEnv, error) {
	env := &RelayEnv{RelayID: rf.RelayID(n), Clock: outbox.SystemClock{}, Client: rf.Client}
	if rf.Stagger {
		env.delay = time.Duration(n)
	}
	if rf.Env != nil {
		if err := rf.Env(env); err != nil {
			return nil, err
		}
	}
	if env.Client == nil {
		return nil, fmt.Errorf("lab: relay %s has no DynamoDB client", env.RelayID)
	}
	opts := rf.Config.StoreOptions()
	opts.Clock, opts.Hooks, opts.Logger = env.Clock, rf.Hooks, rf.Logger
	if rf.MaxConcurrency > 0 {
		opts.MaxConcurrency = rf.MaxConcurrency
	}
	ddb, err := outboxddb.NewStore(env.Client, opts)
	if err != nil {
		return nil, err
	}
	var store outbox.Store = ddb
	if rf.Store != nil {
		store = rf.Store(env, ddb)
	}
	var notifier outbox.Notifier
	if rf.Continuations {
		if notifier, err = outboxlambda.NewNotifier(outboxlambda.NotifierConfig{
			Client: fn, FunctionName: RelayFunctionName, Clock: env.Clock, Logger: rf.Logger, Timeout: NotifierTimeout,
		}); err != nil {
			return nil, err
		}
	}
	hc := outboxlambda.RelayHandlerConfig{
		Config:    rf.Config,
		RelayID:   env.RelayID,
		Store:     store,
		Publisher: rf.Publisher(env),
		Notifier:  notifier,
		Clock:     env.Clock,
		Hooks:     rf.Hooks,
		Logger:    rf.Logger,
	}
	if rf.HandlerConfig != nil {
		rf.HandlerConfig(env, &hc)
	}
	if env.Handler, err = outboxlambda.NewRelayHandler(hc); err != nil {
		return nil, err
	}
	return env, nil
}

// Publisher stands in for Kafka in a simulation: it acknowledges every
// record after one produce round trip (Latency, default none). An
// environment's first Init costs InitLatency (connection, metadata,
// producer id), later ones PingLatency, as with the franz-go client the
// function keeps across warm invocations. Use one per environment: its
// state is the environment's, touched by one invocation at a time.
type Publisher struct {
	InitLatency, PingLatency, Latency time.Duration
	// Acked, when set, is told every acknowledged batch and when.
	Acked func(msgs []outbox.Message, at time.Time)

	inited bool
}

var _ outbox.Publisher = (*Publisher)(nil)

// Init implements outbox.Publisher.
func (p *Publisher) Init(ctx context.Context) error {
	d := p.PingLatency
	if !p.inited {
		d = p.InitLatency
	}
	if !sleep.For(d, ctx.Done()) {
		return fmt.Errorf("lab: initialise publisher: %w", context.Cause(ctx))
	}
	p.inited = true
	return nil
}

// Publish implements outbox.Publisher.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) (int, error) {
	if !sleep.For(p.Latency, ctx.Done()) {
		return 0, fmt.Errorf("lab: publish %d messages: %w", len(msgs), context.Cause(ctx))
	}
	if p.Acked != nil {
		p.Acked(msgs, time.Now())
	}
	return len(msgs), nil
}

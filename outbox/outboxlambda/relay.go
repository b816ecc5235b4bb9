package outboxlambda

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/generation"
)

// relayIDSuffixBytes is the random part of a relay id: 8 bytes, 16 hex
// digits, so two execution environments never share an id.
const relayIDSuffixBytes = 8

// NewRelayID returns a relay id for one execution environment: the function
// name, reduced to printable ASCII without spaces and cut so the id fits
// outbox.MaxRelayIDLength, then '-' and 16 random hex digits.
func NewRelayID(functionName string) string {
	var b [relayIDSuffixBytes]byte
	_, _ = rand.Read(b[:])
	suffix := "-" + hex.EncodeToString(b[:])
	name := make([]byte, 0, len(functionName))
	for i := 0; i < len(functionName); i++ {
		c := functionName[i]
		if c < 0x21 || c > 0x7e {
			c = '_'
		}
		name = append(name, c)
	}
	if len(name) == 0 {
		name = append(name, "relay"...)
	}
	if room := outbox.MaxRelayIDLength - len(suffix); len(name) > room {
		name = name[:room]
	}
	return string(name) + suffix
}

// RelayHandlerConfig wires a RelayHandler.
type RelayHandlerConfig struct {
	// Config is the loaded environment configuration (required).
	Config Config
	// RelayID is this execution environment's relay id. Default
	// NewRelayID(FunctionName).
	RelayID string
	// FunctionName names the function in the default relay id. Default
	// "relay".
	FunctionName string
	// Store and Publisher are the outbox table and Kafka (required); both
	// live as long as the execution environment.
	Store     outbox.Store
	Publisher outbox.Publisher
	// PreviousStore is the previous generation's store, required when
	// Config names one (Config.Previous): the handler then relays through
	// an generation.Relay.
	PreviousStore GenerationStore
	// Notifier sends continuation wake-ups. Optional.
	Notifier outbox.Notifier
	// Doorbell brings the writers' rings for the buckets the relay holds
	// (outbox.RelayConfig.Doorbell); it lives as long as the execution
	// environment. Optional.
	Doorbell outbox.Doorbell
	// Clock is the relay's clock; the invocation's deadline is converted to
	// it. Default outbox.SystemClock.
	Clock outbox.Clock
	// Hooks and Tracer receive the relay's reports (outbox.RelayConfig's
	// Hooks) and spans. Optional.
	Hooks  []outbox.Hook
	Tracer outbox.Tracer
	// Tracing opens each invocation's root span and exports the spans
	// before Handle returns. Optional.
	Tracing Tracing
	// Logger receives the relay's logs and one summary line per
	// invocation. Default slog.Default().
	Logger *slog.Logger
	// Metrics, when set, is flushed to MetricsOutput (default os.Stdout)
	// every MetricsInterval of a run and at the end of every invocation.
	Metrics       MetricsFlusher
	MetricsOutput io.Writer
}

// RelayHandler runs one relay lifetime per invocation. It holds a single
// relay for the execution environment, so a warm invocation resumes the
// leases of the previous one under the same id.
type RelayHandler struct {
	relay   runner
	pub     outbox.Publisher
	relayID string
	decoder EventDecoder
	clock   outbox.Clock
	log     *slog.Logger
	metrics metricsSink
	invoke  invocationTrace
	// active is the run in progress, which Shutdown stops.
	active activeRun
}

// NewRelayHandler validates cfg and builds the relay. Errors are
// misconfigurations: the function must exit at init.
func NewRelayHandler(cfg RelayHandlerConfig) (*RelayHandler, error) {
	if cfg.RelayID == "" {
		name := cfg.FunctionName
		if name == "" {
			name = "relay"
		}
		cfg.RelayID = NewRelayID(name)
	}
	if cfg.Clock == nil {
		cfg.Clock = outbox.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// A relay of one generation serves it only once the generation it
	// replaces, if any, is drained; one of two generations is gated by
	// the generation relay instead.
	var gate outbox.GenerationGate
	if _, twoGenerations := cfg.Config.Previous(); !twoGenerations {
		gate, _ = cfg.Store.(outbox.GenerationGate)
	}
	relay, err := outbox.NewRelay(outbox.RelayConfig{
		Gate:      gate,
		Options:   cfg.Config.RelayOptions(cfg.RelayID),
		Store:     cfg.Store,
		Publisher: cfg.Publisher,
		Clock:     cfg.Clock,
		Notifier:  cfg.Notifier,
		Doorbell:  cfg.Doorbell,
		Hooks:     cfg.Hooks,
		Tracer:    cfg.Tracer,
		Logger:    cfg.Logger,
		MaxHops:   cfg.Config.MaxHops,
	})
	if err != nil {
		return nil, err
	}
	var run runner = relay
	if prev, ok := cfg.Config.Previous(); ok {
		if run, err = newGenerationRelay(cfg, relay, prev); err != nil {
			return nil, err
		}
	}
	return &RelayHandler{
		relay:   run,
		pub:     cfg.Publisher,
		relayID: cfg.RelayID,
		decoder: EventDecoder{
			BucketCount:  cfg.Config.BucketCount,
			KeyPrefix:    cfg.Config.KeyPrefix,
			PartitionKey: cfg.Config.PartitionKey,
			Logger:       cfg.Logger,
		},
		clock:   cfg.Clock,
		log:     cfg.Logger.With("relayId", cfg.RelayID),
		metrics: newMetricsSink(cfg.Metrics, cfg.MetricsOutput, cfg.Clock),
		invoke:  invocationTrace{tracing: cfg.Tracing, name: cmp.Or(cfg.FunctionName, "relay")},
	}, nil
}

// runner is a relay of one or of two generations.
type runner interface {
	Run(ctx context.Context, in outbox.RunInput) (outbox.RunResult, error)
}

// GenerationStore is a store that also keeps its generation's marker, as
// outboxddb.Store does.
type GenerationStore interface {
	outbox.Store
	generation.Store
}

// newGenerationRelay wraps current in a relay that drains the previous
// generation first: a second relay, same id and publisher, on
// cfg.PreviousStore, in drain mode so a run can go on to the current
// generation.
func newGenerationRelay(cfg RelayHandlerConfig, current *outbox.Relay, prev generation.Generation) (*generation.Relay, error) {
	if cfg.PreviousStore == nil {
		return nil, outbox.Misconfigured("new relay handler", "the configuration names previous generation %s but no store for it was given", prev)
	}
	opts := cfg.Config.RelayOptions(cfg.RelayID)
	opts.BucketCount, opts.Mode = prev.BucketCount, outbox.ModeDrain
	previous, err := outbox.NewRelay(outbox.RelayConfig{
		Options: opts, Store: cfg.PreviousStore, Publisher: cfg.Publisher, Clock: cfg.Clock, Notifier: cfg.Notifier,
		Hooks: cfg.Hooks, Tracer: cfg.Tracer, Logger: cfg.Logger.With("generation", prev.String()), MaxHops: cfg.Config.MaxHops,
	})
	if err != nil {
		return nil, err
	}
	return generation.NewRelay(generation.RelayConfig{
		Previous: previous, Current: current, Generations: cfg.PreviousStore,
		PreviousGeneration: prev, CurrentGeneration: cfg.Config.Current(), Clock: cfg.Clock, Logger: cfg.Logger,
	})
}

// RelayID returns the execution environment's relay id.
func (h *RelayHandler) RelayID() string { return h.relayID }

// RelayResponse summarises one invocation. Lists are never null.
type RelayResponse struct {
	// Trigger is the event's source: schedule, wake or streams.
	Trigger Source `json:"trigger"`
	// RelayID is the execution environment's relay id.
	RelayID string `json:"relayId"`
	// Reason is why the run stopped (outbox.StopReason), or "no-hints" for
	// a stream batch without message inserts, which starts no run.
	Reason string `json:"reason"`
	// Buckets are the hinted buckets; Hop the wake-up's chain position.
	Buckets []int `json:"buckets"`
	Hop     int   `json:"hop"`
	// Joined reports that the relay took part in the fleet.
	Joined bool `json:"joined"`
	// Published and Deleted count messages; Rounds acquisition rounds;
	// Refused refused conditional writes.
	Published int `json:"published"`
	Deleted   int `json:"deleted"`
	Rounds    int `json:"rounds"`
	Refused   int `json:"refused"`
	// Released lists the buckets the stop released.
	Released []int `json:"released"`
	// ReleaseSkipped reports leases left to lapse because the stop did
	// not fit before the deadline.
	ReleaseSkipped bool `json:"releaseSkipped"`
	// WorkLeft lists buckets still pending after the stop.
	WorkLeft []int `json:"workLeft"`
	// WakeUpSent reports the continuation wake-up.
	WakeUpSent bool `json:"wakeUpSent"`
	// BudgetUsed is the share of the time to the deadline spent, percent.
	BudgetUsed float64 `json:"budgetUsed"`
	// Records, Ignored and Malformed count a stream batch's records.
	Records   int `json:"records,omitempty"`
	Ignored   int `json:"ignored,omitempty"`
	Malformed int `json:"malformed,omitempty"`
	// Error is set for a stream batch whose run failed: the handler
	// reports it here instead of failing the batch.
	Error string `json:"error,omitempty"`
}

// NoHints is the RelayResponse.Reason of a stream batch that carried no
// message insert.
const NoHints = "no-hints"

// Handle decodes the payload, runs the relay until its work is done or the
// invocation's budget is spent, and returns a summary. The budget comes
// from ctx's deadline (Lambda sets it from the function timeout); without
// one the run ends when drained.
//
// A payload that is none of the accepted shapes and a misconfiguration are
// function errors. A DynamoDB Streams batch is never failed: a failure is
// logged and reported in the response, since the stream is only a hint and
// a failed batch would be retried and block its shard.
func (h *RelayHandler) Handle(ctx context.Context, payload json.RawMessage) (RelayResponse, error) {
	return traced(ctx, h.invoke, func(ctx context.Context) (RelayResponse, error) { return h.handle(ctx, payload) })
}

func (h *RelayHandler) handle(ctx context.Context, payload json.RawMessage) (RelayResponse, error) {
	defer h.metrics.flush(ctx, h.log)
	ev, err := h.decoder.Decode(payload)
	if err != nil {
		h.log.ErrorContext(ctx, "relay event refused", "error", err)
		return RelayResponse{}, err
	}
	resp := RelayResponse{
		Trigger: ev.Source, RelayID: h.relayID, Buckets: nonNil(ev.Buckets), Hop: ev.Hop,
		Released: []int{}, WorkLeft: []int{},
		Records: ev.Records, Ignored: ev.Ignored, Malformed: ev.Malformed,
	}
	if ev.Source == SourceStreams && len(ev.Buckets) == 0 {
		resp.Reason = NoHints
		h.logSummary(ctx, resp)
		return resp, nil
	}
	in := outbox.RunInput{Trigger: outbox.TriggerSchedule, Deadline: h.deadline(ctx), Buckets: ev.Buckets, Hop: ev.Hop, Join: ev.Join,
		StopTimeout: shutdownStop}
	if ev.Source != SourceSchedule {
		in.Trigger = outbox.TriggerWake
	}
	stopMetrics := h.metrics.periodic(ctx, h.log)
	runCtx, ended := h.active.begin(ctx)
	res, runErr := h.relay.Run(runCtx, in)
	ended()
	stopMetrics()
	resp.Reason = string(res.Reason)
	resp.Joined = res.Joined
	resp.Published, resp.Deleted, resp.Rounds, resp.Refused = res.Published, res.Deleted, res.Rounds, res.Refused
	resp.Released, resp.WorkLeft = nonNil(res.Released), nonNil(res.WorkLeft)
	resp.ReleaseSkipped, resp.WakeUpSent, resp.BudgetUsed = res.ReleaseSkipped, res.WakeUpSent, res.BudgetUsed
	if runErr != nil {
		resp.Error = runErr.Error()
		h.log.ErrorContext(ctx, "relay run failed", "trigger", ev.Source, "error", runErr)
		if ev.Source != SourceStreams {
			return resp, runErr
		}
	}
	h.logSummary(ctx, resp)
	return resp, nil
}

// deadline converts ctx's wall-clock deadline to the relay's clock: the
// same time left, measured from the clock's now.
func (h *RelayHandler) deadline(ctx context.Context) time.Time {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Time{}
	}
	return h.clock.Now().Add(time.Until(d))
}

func (h *RelayHandler) logSummary(ctx context.Context, r RelayResponse) {
	h.log.LogAttrs(ctx, slog.LevelInfo, "relay invocation finished",
		slog.String("trigger", string(r.Trigger)), slog.String("reason", r.Reason),
		slog.Any("buckets", r.Buckets), slog.Int("hop", r.Hop),
		slog.Bool("joined", r.Joined), slog.Int("published", r.Published), slog.Int("deleted", r.Deleted),
		slog.Int("rounds", r.Rounds), slog.Int("refused", r.Refused), slog.Any("released", r.Released),
		slog.Bool("releaseSkipped", r.ReleaseSkipped), slog.Any("workLeft", r.WorkLeft),
		slog.Bool("wakeUpSent", r.WakeUpSent), slog.Float64("budgetUsed", r.BudgetUsed))
}

// nonNil makes an absent list encode as [] in the response, not null.
func nonNil(b []int) []int {
	if b == nil {
		return []int{}
	}
	return b
}

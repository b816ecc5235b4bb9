package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spillway-dev/spillway/outbox/lease"
)

// RelayConfig wires a relay to its store, publisher and environment.
type RelayConfig struct {
	// Options are the relay options; zero fields take their defaults.
	Options RelayOptions
	// Store is the outbox table (required).
	Store Store
	// Publisher sends to Kafka (required).
	Publisher Publisher
	// Clock reads the time of every lease decision; waits are the time
	// package's. Default SystemClock.
	Clock Clock
	// Notifier sends the wake-up a stopping relay owes when work is left.
	// Optional: without one the next schedule finds the work.
	Notifier Notifier
	// Doorbell, when set, brings the writers' rings for the buckets the
	// relay holds: a rung bucket is fetched at once, without a probe, and
	// busy buckets are no longer probed at TargetLatency unless it is set
	// (the probes are the dial a relay without a doorbell has). The poll
	// stays the floor. Optional.
	Doorbell Doorbell
	// Hooks receive the relay's reports, each through the Hook interfaces
	// it implements. Optional.
	Hooks []Hook
	// Tracer opens spans around acquire, drain, publish, delete and release.
	// Default NoopTracer.
	Tracer Tracer
	// Logger receives the relay's logs. Default slog.Default().
	Logger *slog.Logger
	// MaxHops bounds a chain of continuation wake-ups: a run started by hop
	// n sends hop n+1 only while n+1 <= MaxHops. Zero sends none.
	MaxHops int
	// Gate, when set, is asked once per run, after the relay decided to
	// join and before it claims anything, whether it may serve its
	// generation (outboxddb.Store implements it with the predecessor
	// marker). A refusal ends the run as fatal with the gate's error.
	// Optional: without it the relay serves its generation.
	Gate GenerationGate
}

// GenerationGate tells a relay whether it may serve its generation
// (RelayConfig.Gate). It is the core's only view of generations, kept here
// because the run asks it before claiming anything: outboxddb.Store
// implements it with the predecessor marker, and the rest of the
// generation protocol lives in package outbox/generation.
type GenerationGate interface {
	// CheckServable returns nil when the relay may serve its generation,
	// an error matching generation.ErrNotOpen while the generation it
	// replaces is not drained, or the error of the reads it took.
	CheckServable(ctx context.Context) error
}

// Relay moves messages from a Store to a Publisher under fair-share leases.
// One relay runs one Run at a time; its state (owned buckets, per-bucket
// head-row backoff) carries over between runs, as a warm Lambda execution
// environment resumes its own leases.
type Relay struct {
	opts     RelayOptions
	store    Store
	pub      Publisher
	clock    Clock
	notifier Notifier
	bell     Doorbell
	hooks    hooks
	tracer   Tracer
	log      *slog.Logger
	roundLog *slog.Logger
	maxHops  int
	gate     GenerationGate
	req      lease.Request
	// lease owns the lease book: every lease decision and every write's
	// grant; it survives runs, as a warm execution environment resumes
	// its own leases.
	lease *leaseKeeper
	held  *byteBudget // nil: no MaxHeldBytes

	// running holds a token while a Run runs: one at a time, and a second
	// caller's wait is a channel send, durable in a synctest bubble.
	running chan struct{}
	// work and sampledAt are touched only by the run holding running;
	// they survive runs, so a warm execution environment keeps its view
	// of the traffic and samples the backlog once per interval.
	work      recentWork
	sampledAt time.Time
	// pubInitialised: the publisher was initialised once, so its next
	// initialisation is a check of a live connection (startInit).
	pubInitialised bool
	// strandedAt is when the last stranded count was taken (the relay's
	// creation before the first).
	strandedAt time.Time
	// worked is when each bucket last had work (probeTimes.worked).
	worked []time.Time

	// heads are the head-row backoffs and the backoffs' jitter.
	heads *headRows
	// park parks rows and carries out replays.
	park *parking
}

// NewRelay validates cfg and returns a relay. A nil store or publisher and
// invalid options are misconfigurations.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	opts := cfg.Options.WithDefaults()
	if cfg.Doorbell != nil && cfg.Options.TargetLatency == 0 {
		// The rings tell the relay of a busy bucket's commits: probing
		// it faster than the poll would only buy what they give.
		opts.TargetLatency = opts.PollInterval
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if cfg.Store == nil || cfg.Publisher == nil {
		return nil, Misconfigured("new relay", "a store and a publisher are required")
	}
	hs, err := newHooks(opts.RelayID, cfg.Hooks)
	if err != nil {
		return nil, err
	}
	if n := cfg.Store.BucketCount(); n != opts.BucketCount {
		return nil, Misconfigured("new relay",
			"the relay's bucket count %d differs from the store's %d; writers, store and relays must use one count", opts.BucketCount, n)
	}
	q, _ := cfg.Store.(Quarantine)
	if opts.PoisonPolicy == PoisonQuarantine && q == nil {
		return nil, Misconfigured("new relay", "PoisonPolicy %q needs a store that implements outbox.Quarantine; %T does not", PoisonQuarantine, cfg.Store)
	}
	r := &Relay{
		opts:     opts,
		store:    cfg.Store,
		pub:      cfg.Publisher,
		clock:    cfg.Clock,
		notifier: cfg.Notifier,
		bell:     cfg.Doorbell,
		hooks:    hs,
		tracer:   cfg.Tracer,
		log:      cfg.Logger,
		maxHops:  cfg.MaxHops,
		gate:     cfg.Gate,
		running:  make(chan struct{}, 1),
		req: lease.Request{RelayID: opts.RelayID, BucketCount: opts.BucketCount, LeaseDuration: opts.LeaseDuration,
			RenewInterval: opts.LeaseRenewInterval, KeepEveryRound: opts.KeepEveryRound},
		held:   newByteBudget(opts.MaxHeldBytes, opts.MaxMessageBytes),
		worked: make([]time.Time, opts.BucketCount),
	}
	book := newParkedBook()
	r.heads = newHeadRows(book, opts.RelayID)
	r.park = &parking{r: r, store: q, poison: opts.PoisonPolicy == PoisonQuarantine, book: book}
	if r.clock == nil {
		r.clock = SystemClock{}
	}
	r.strandedAt = r.clock.Now()
	r.lease = newLeaseKeeper(r.clock, lease.NewBook(r.req), opts.ErrorBackoff, r.leaseLost)
	if r.tracer == nil {
		r.tracer = NoopTracer{}
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	// The lease protocol names the relay in its own messages.
	r.roundLog = r.log
	r.log = r.log.With("relayId", opts.RelayID)
	return r, nil
}

// Options returns the relay's effective options.
func (r *Relay) Options() RelayOptions { return r.opts }

// Trigger says why a run started; it decides whether the relay joins the
// fleet at once or first checks that someone must.
type Trigger string

// Triggers of a run.
const (
	// TriggerDirect joins the fleet at once (CLI drain, always-on relays).
	TriggerDirect Trigger = "direct"
	// TriggerSchedule is the periodic sweep: probe every bucket with a cheap
	// read and join only if pending work has no live owner.
	TriggerSchedule Trigger = "schedule"
	// TriggerWake is a wake-up for hinted buckets (commit notification,
	// stream record, continuation): join only if a hinted bucket has no live
	// owner.
	TriggerWake Trigger = "wake"
)

// RunInput parameterises one run.
type RunInput struct {
	// Trigger decides how the run starts. Default TriggerDirect.
	Trigger Trigger
	// Deadline is when the run must have returned, on the relay's Clock.
	// Zero means no deadline: the run ends when drained or ctx is done.
	Deadline time.Time
	// Buckets are the hinted buckets of a wake-up; empty means unknown.
	Buckets []int
	// Hop is the wake-up chain position of this run (0 for writers' wake-ups
	// and the schedule).
	Hop int
	// Join makes a woken relay take a share even when live peers hold its
	// hinted buckets.
	Join bool
	// StopTimeout bounds the stop that the end of Run's ctx starts,
	// counted from that moment (see Run). Default RelayOptions.StopMargin.
	StopTimeout time.Duration
}

// StopReason says why a run returned.
type StopReason string

// Stop reasons.
const (
	// StopNothingPending: a sweep found no pending message.
	StopNothingPending StopReason = "nothing-pending"
	// StopPeerLive: every bucket with work is held by a live peer that will
	// drain it.
	StopPeerLive StopReason = "peer-live"
	// StopDrained: drain mode found no more work after the idle timeout.
	StopDrained StopReason = "drained"
	// StopBudget: the budget (deadline minus stop margin) was reached.
	StopBudget StopReason = "budget"
	// StopCancelled: ctx was cancelled.
	StopCancelled StopReason = "cancelled"
	// StopFatal: a misconfiguration or publisher initialisation failure.
	StopFatal StopReason = "fatal"
)

// RunResult summarises one run.
type RunResult struct {
	Reason StopReason
	// Joined reports that the relay wrote a heartbeat and took part in the
	// fleet; false for runs that only probed or read.
	Joined bool
	// Published counts messages acknowledged by Kafka (retries count again).
	Published int
	// Deleted counts messages removed from the table.
	Deleted int
	// MaxOwned is the largest number of buckets owned at once.
	MaxOwned int
	// Rounds counts acquisition rounds.
	Rounds int
	// Refused counts conditional writes the store refused in this run.
	Refused int
	// Released lists the buckets released by the stop protocol.
	Released []int
	// ReleaseUnfinished reports that leases still named the relay after
	// every release pass; they lapse after LeaseDuration.
	ReleaseUnfinished bool
	// ReleaseSkipped reports that the stop protocol did not fit before the
	// deadline; the leases lapse after LeaseDuration instead.
	ReleaseSkipped bool
	// WorkLeft lists buckets found pending after the stop, for which a
	// wake-up was sent when allowed.
	WorkLeft []int
	// WakeUpSent reports that the stop sent a wake-up.
	WakeUpSent bool
	// Errors counts failed cycles (backed off and retried).
	Errors int
	// Started and Ended are on the relay's clock.
	Started, Ended time.Time
	// BudgetUsed is the share of the time to the deadline spent, in percent;
	// zero without a deadline.
	BudgetUsed float64
}

// Run is one relay lifetime: it joins the fleet if the trigger calls for it,
// relays until its work is done or its budget is spent, then stops
// gracefully if that fits before the deadline. It returns an error only for
// what must not be retried (misconfiguration) and for a publisher that
// cannot start; every other failure is backed off and retried inside the run.
//
// The end of ctx (a cancellation, its deadline) stops the run as its budget
// does, within in.StopTimeout of that moment, and never past in.Deadline:
// nothing new starts, a publish in flight sends nothing more and settles
// what it sent, the rows Kafka acknowledged are deleted and the leases are
// released, conditionally, so peers take the buckets over at once. The
// last part of that time is kept for the release: what is still in flight
// then (a publish whose broker does not answer) is left to finish on its
// own and nothing of its outcome is acted on, so its rows stay for the
// next owner (duplicates, never loss or reordering). Run returns once
// every goroutine it started has ended. ctx's values reach every call the
// run makes; its end does not cut them short.
func (r *Relay) Run(ctx context.Context, in RunInput) (RunResult, error) {
	r.running <- struct{}{}
	defer func() { <-r.running }()
	run := r.newRun(ctx, in)
	unwatch := run.watchStop()
	err := run.execute()
	unwatch()
	run.drains.Wait()
	run.cut(context.Canceled)
	run.res.Deleted = int(run.deleted.Load())
	run.res.Ended = r.clock.Now()
	if !in.Deadline.IsZero() {
		total := in.Deadline.Sub(run.res.Started)
		if total > 0 {
			run.res.BudgetUsed = 100 * float64(run.res.Ended.Sub(run.res.Started)) / float64(total)
		}
	}
	r.hooks.runEnd(run.res)
	// Debug: hosts (the Lambda handler, the CLI) log their own summary.
	r.log.LogAttrs(ctx, slog.LevelDebug, "relay run finished",
		slog.String("reason", string(run.res.Reason)), slog.Bool("joined", run.res.Joined),
		slog.Int("published", run.res.Published), slog.Int("deleted", run.res.Deleted),
		slog.Int("rounds", run.res.Rounds), slog.Int("refused", run.res.Refused),
		slog.Bool("releaseSkipped", run.res.ReleaseSkipped), slog.Any("workLeft", run.res.WorkLeft))
	return run.res, err
}

// stopMargin is the time kept back before the deadline: the configured
// margin, but never more than a third of the time left, so short deadlines
// still relay.
func (r *Relay) stopMargin(now, deadline time.Time) time.Duration {
	m := r.opts.StopMargin
	if third := deadline.Sub(now) / 3; third < m {
		m = third
	}
	return max(m, 0)
}

// errCycle wraps a cycle failure that is retried after a backoff.
func errCycle(op string, err error) error { return fmt.Errorf("outbox: relay %s: %w", op, err) }

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

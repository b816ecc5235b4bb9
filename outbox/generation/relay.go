package generation

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/internal/sleep"
)

// RelayConfig wires a relay that serves a previous and a current
// generation of one table while the bucket count changes.
type RelayConfig struct {
	// Previous relays the previous generation (its store on the previous
	// key prefix and bucket count). Build it in outbox.ModeDrain: a run of it
	// returns once the generation is empty, so the same run can go on to
	// the current one.
	Previous *outbox.Relay
	// Current relays the current generation.
	Current *outbox.Relay
	// Generations keeps the previous generation's marker: usually the
	// previous relay's store.
	Generations Store
	// PreviousGeneration and CurrentGeneration name the two generations;
	// they must match the two relays' stores.
	PreviousGeneration, CurrentGeneration Generation
	// Clock reads the time of every lease decision; the waits between a
	// hold-mode run's looks at the previous generation are the time
	// package's. Default SystemClock.
	Clock outbox.Clock
	// Logger receives phase changes. Default slog.Default().
	Logger *slog.Logger
}

// Relay is a relay serving two generations (see
// Plan): it relays the previous generation, and nothing of the
// current one, until the previous one is sealed and empty; the run that
// finds it so marks it drained and goes on with the current generation.
// Once it has seen the marker drained it serves only the current
// generation without reading the marker again.
type Relay struct {
	cfg     RelayConfig
	drained atomic.Bool
}

// NewRelay validates cfg. Missing relays or store, generations
// that are invalid, share a key prefix, or do not match the relays' bucket
// counts are misconfigurations.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	const op = "new generation relay"
	if cfg.Previous == nil || cfg.Current == nil || cfg.Generations == nil {
		return nil, outbox.Misconfigured(op, "a previous relay, a current relay and a generation store are required")
	}
	for _, g := range []Generation{cfg.PreviousGeneration, cfg.CurrentGeneration} {
		if err := g.Validate(op); err != nil {
			return nil, err
		}
	}
	if cfg.PreviousGeneration.KeyPrefix == cfg.CurrentGeneration.KeyPrefix {
		return nil, outbox.Misconfigured(op, "previous and current generation share the key prefix %q; a new bucket count needs a new key prefix", cfg.CurrentGeneration.KeyPrefix)
	}
	if p, c := cfg.Previous.Options().BucketCount, cfg.Current.Options().BucketCount; p != cfg.PreviousGeneration.BucketCount || c != cfg.CurrentGeneration.BucketCount {
		return nil, outbox.Misconfigured(op, "the relays count %d and %d buckets, the generations %s and %s", p, c, cfg.PreviousGeneration, cfg.CurrentGeneration)
	}
	if cfg.Previous.Options().Mode != outbox.ModeDrain {
		return nil, outbox.Misconfigured(op, "the previous generation's relay runs in mode %q; it must drain (ModeDrain) so a run can go on to the current generation", cfg.Previous.Options().Mode)
	}
	if cfg.Clock == nil {
		cfg.Clock = outbox.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Relay{cfg: cfg}, nil
}

// Current returns the relay of the current generation.
func (g *Relay) Current() *outbox.Relay { return g.cfg.Current }

// Run is outbox.Relay.Run over two generations. Wake-up hints are dropped while
// the previous generation is served: they may count the buckets of either
// generation, so the previous relay probes all its buckets instead. A
// hold-mode run (the current relay's Mode) keeps looking at the previous
// generation every PollInterval until it is drained or the run ends; a
// drain-mode run returns after one pass over it.
func (g *Relay) Run(ctx context.Context, in outbox.RunInput) (outbox.RunResult, error) {
	if g.isDrained() {
		return g.cfg.Current.Run(ctx, in)
	}
	var (
		total    outbox.RunResult
		contents Contents
		served   bool
	)
	m, err := g.cfg.Generations.ReadGeneration(ctx)
	for err == nil {
		var step Step
		if step, err = Plan(m, g.cfg.PreviousGeneration, g.cfg.CurrentGeneration, contents); err != nil {
			break
		}
		switch step {
		case StepOpen:
			m, err = g.cfg.Generations.OpenGeneration(ctx, g.cfg.CurrentGeneration)
		case StepCheckEmpty:
			contents, err = g.cfg.Generations.GenerationContents(ctx)
			g.logContents(ctx, contents)
		case StepMarkDrained:
			m, err = g.cfg.Generations.FinishGeneration(ctx, g.cfg.CurrentGeneration)
		case StepServeCurrent:
			g.setDrained()
			res, err := g.cfg.Current.Run(ctx, in)
			return mergeRuns(total, res, !total.Started.IsZero()), err
		case StepServePrevious:
			if served {
				// One pass per run; in hold mode, look again later.
				if !g.waitForPrevious(ctx, in) {
					return total, nil
				}
				m, err = g.cfg.Generations.ReadGeneration(ctx)
				served, contents = false, Contents{}
				continue
			}
			res, runErr := g.cfg.Previous.Run(ctx, outbox.RunInput{Trigger: in.Trigger, Deadline: in.Deadline, Hop: in.Hop, Join: in.Join, StopTimeout: in.StopTimeout})
			total, served = mergeRuns(total, res, !total.Started.IsZero()), true
			if runErr != nil {
				return total, runErr
			}
			// A sealed generation is looked into again after the pass.
			contents = Contents{}
		}
	}
	return g.failed(total, err)
}

// waitForPrevious decides, after a pass over the previous generation that
// did not retire it, whether the run looks again: only in hold mode, after
// PollInterval, while ctx and the budget last.
func (g *Relay) waitForPrevious(ctx context.Context, in outbox.RunInput) bool {
	cur := g.cfg.Current.Options()
	if cur.Mode != outbox.ModeHold {
		return false
	}
	if !in.Deadline.IsZero() && !g.cfg.Clock.Now().Add(cur.PollInterval).Before(in.Deadline.Add(-cur.StopMargin)) {
		return false
	}
	return sleep.For(cur.PollInterval, ctx.Done())
}

func (g *Relay) logContents(ctx context.Context, c Contents) {
	g.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "previous generation sealed; looked for what is left",
		slog.String("previous", g.cfg.PreviousGeneration.String()), slog.String("current", g.cfg.CurrentGeneration.String()),
		slog.Any("messageBuckets", c.Messages), slog.Any("parkedBuckets", c.Parked))
}

// failed ends a run on a generation error: misconfigurations (and unknown
// phases) are fatal, anything else is for the next run to retry.
func (g *Relay) failed(total outbox.RunResult, err error) (outbox.RunResult, error) {
	if total.Started.IsZero() {
		total.Started = g.cfg.Clock.Now()
	}
	total.Ended = g.cfg.Clock.Now()
	total.Reason = outbox.StopFatal
	if !errors.Is(err, outbox.ErrMisconfigured) {
		total.Errors++
		g.cfg.Logger.Warn("reading or moving the previous generation's marker failed; the next run retries",
			"previous", g.cfg.PreviousGeneration.String(), "error", err)
	}
	return total, err
}

func (g *Relay) isDrained() bool { return g.drained.Load() }

func (g *Relay) setDrained() {
	if g.drained.CompareAndSwap(false, true) {
		g.cfg.Logger.Info("previous generation drained; serving only the current one",
			"previous", g.cfg.PreviousGeneration.String(), "current", g.cfg.CurrentGeneration.String())
	}
}

// mergeRuns adds run b to the total a of earlier runs of the same call
// (none when !started): counts add up, the outcome is b's.
func mergeRuns(a, b outbox.RunResult, started bool) outbox.RunResult {
	if !started {
		return b
	}
	b.Started = a.Started
	b.Joined = a.Joined || b.Joined
	b.Published += a.Published
	b.Deleted += a.Deleted
	b.MaxOwned = max(a.MaxOwned, b.MaxOwned)
	b.Rounds += a.Rounds
	b.Refused += a.Refused
	b.Errors += a.Errors
	b.ReleaseUnfinished = a.ReleaseUnfinished || b.ReleaseUnfinished
	b.ReleaseSkipped = a.ReleaseSkipped || b.ReleaseSkipped
	return b
}

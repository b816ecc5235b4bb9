package outbox_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/generation"
)

var (
	oldGen = generation.Generation{KeyPrefix: "OUTBOX", BucketCount: 2}
	newGen = generation.Generation{KeyPrefix: "OUTBOX2", BucketCount: 4}
)

// memGenerations keeps a marker in memory and looks into the previous
// generation's memStore. The operator seals at sealAt (zero: never).
type memGenerations struct {
	mu     sync.Mutex
	clock  outbox.Clock
	prev   *memStore
	marker generation.Marker
	sealAt time.Time
	reads  int
	err    error
}

func (g *memGenerations) ReadGeneration(context.Context) (generation.Marker, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reads++
	if !g.sealAt.IsZero() && !g.clock.Now().Before(g.sealAt) && g.marker.Phase == generation.PhaseOpen {
		g.marker.Phase, g.marker.SealedAt = generation.PhaseSealed, g.clock.Now()
	}
	return g.marker, g.err
}

func (g *memGenerations) OpenGeneration(_ context.Context, succ generation.Generation) (generation.Marker, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.marker.Exists {
		g.marker = generation.Marker{Exists: true, Phase: generation.PhaseOpen, Generation: oldGen, Successor: succ, OpenedAt: g.clock.Now()}
	}
	return g.marker, nil
}

func (g *memGenerations) move(from, to generation.Phase) (generation.Marker, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.marker.Phase == to {
		return g.marker, nil
	}
	if g.marker.Phase != from {
		return g.marker, generation.ErrPhase
	}
	g.marker.Phase = to
	return g.marker, nil
}

func (g *memGenerations) SealGeneration(context.Context, generation.Generation) (generation.Marker, error) {
	return g.move(generation.PhaseOpen, generation.PhaseSealed)
}

func (g *memGenerations) FinishGeneration(context.Context, generation.Generation) (generation.Marker, error) {
	return g.move(generation.PhaseSealed, generation.PhaseDrained)
}

func (g *memGenerations) GenerationContents(ctx context.Context) (generation.Contents, error) {
	pending, err := g.prev.observed.PendingBuckets(ctx, []int{0, 1})
	return generation.Contents{Checked: true, Messages: pending}, err
}

func (g *memGenerations) phase() generation.Phase {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.marker.Phase
}

// genEnv is a generation relay on fakes; its tests run in a synctest
// bubble, like relayEnv's.
type genEnv struct {
	clock     outbox.Clock
	prev, cur *memStore
	pub       *memPublisher
	gens      *memGenerations
	relay     *generation.Relay
}

func newGenEnv(t *testing.T, mode outbox.Mode) *genEnv {
	t.Helper()
	clk := outbox.SystemClock{}
	if now := clk.Now(); !now.Equal(t0) {
		t.Fatalf("the relay's clock reads %v, want %v: run the test in a synctest bubble", now, t0)
	}
	e := &genEnv{clock: clk, prev: newMemStore(clk, oldGen.BucketCount), cur: newMemStore(clk, newGen.BucketCount), pub: newMemPublisher()}
	e.gens = &memGenerations{clock: clk, prev: e.prev}
	log := slog.New(slog.DiscardHandler)
	relay := func(s *memStore, g generation.Generation, mode outbox.Mode) *outbox.Relay {
		r, err := outbox.NewRelay(outbox.RelayConfig{Options: outbox.RelayOptions{RelayID: "relay-a", BucketCount: g.BucketCount, Mode: mode},
			Store: s.observed, Publisher: e.pub, Clock: clk, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var err error
	e.relay, err = generation.NewRelay(generation.RelayConfig{
		Previous: relay(e.prev, oldGen, outbox.ModeDrain), Current: relay(e.cur, newGen, mode), Generations: e.gens,
		PreviousGeneration: oldGen, CurrentGeneration: newGen, Clock: clk, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *genEnv) run(t *testing.T, in outbox.RunInput) outbox.RunResult {
	t.Helper()
	res, err := e.relay.Run(context.Background(), in)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

// sentKeys returns the keys of the published messages in publish order.
func (e *genEnv) sentKeys() []string {
	var keys []string
	for _, m := range e.pub.sent() {
		keys = append(keys, string(m.Key))
	}
	return keys
}

func TestGenerationRelay(t *testing.T) {
	// A drain-mode run while the previous generation is open opens the marker,
	// relays the previous generation and returns: nothing of the current one.
	t.Run("WhileOpen_RelaysOnlyThePreviousGeneration", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newGenEnv(t, outbox.ModeDrain)
			e.prev.add(0, "old-a")
			e.prev.add(1, "old-b")
			e.cur.add(3, "new-a")
			res := e.run(t, outbox.RunInput{})
			if res.Published != 2 || e.gens.phase() != generation.PhaseOpen || e.cur.pending() != 1 {
				t.Fatalf("%+v, phase %q, %d current pending; want the 2 old messages only", res, e.gens.phase(), e.cur.pending())
			}
			if e.cur.count("fetch") != 0 || e.cur.count("heartbeat") != 0 {
				t.Fatalf("the current generation was touched: %d fetches, %d acquisitions", e.cur.count("fetch"), e.cur.count("heartbeat"))
			}
			// One read before the pass; the marker is not read again after it.
			if e.gens.reads != 1 {
				t.Fatalf("%d marker reads, want 1", e.gens.reads)
			}
		})
	})

	// A hold-mode run looks at the marker every poll interval while the
	// previous generation is open; once the operator seals it the run drains
	// what is left, marks it drained and relays the current generation, old
	// messages first.
	t.Run("HoldMode_WaitsForTheSeal_ThenServesTheCurrentGeneration", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newGenEnv(t, outbox.ModeHold)
			e.prev.add(0, "old-a")
			e.cur.add(3, "new-a")
			e.gens.sealAt = t0.Add(10 * time.Second)
			e.prev.afterFetch = func(int) {
				// A late old-generation write before the seal.
				e.prev.afterFetch = nil
				e.prev.add(1, "old-b")
			}
			res := e.run(t, outbox.RunInput{Deadline: t0.Add(time.Minute)})
			if e.gens.phase() != generation.PhaseDrained || e.prev.pending() != 0 || e.cur.pending() != 0 {
				t.Fatalf("%+v: phase %q, pending %d old and %d new; want drained and empty", res, e.gens.phase(), e.prev.pending(), e.cur.pending())
			}
			got := e.sentKeys()
			if len(got) != 3 || got[2] != "new-a" {
				t.Fatalf("published %v; want both old messages before new-a", got)
			}
			if res.Published != 3 {
				t.Fatalf("the run reports %d published, want 3", res.Published)
			}
			// The first pass ends after the drain relay's idle timeout and stop;
			// then one read per poll interval until the seal at 10 s: the count is
			// fixed on the bubble's clock.
			if e.gens.reads != 4 {
				t.Fatalf("%d marker reads, want 4", e.gens.reads)
			}
		})
	})

	// A failed marker read fails the run before anything is relayed; a marker
	// naming another successor is a misconfiguration.
	t.Run("MarkerProblems_StopTheRun", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newGenEnv(t, outbox.ModeDrain)
			e.prev.add(0, "old-a")
			e.gens.err = errors.New("throttled")
			if _, err := e.relay.Run(context.Background(), outbox.RunInput{}); err == nil || errors.Is(err, outbox.ErrMisconfigured) {
				t.Fatalf("a failed marker read: %v; want the read error, not a misconfiguration", err)
			}
			e.gens.err = nil
			e.gens.marker = generation.Marker{Exists: true, Phase: generation.PhaseOpen, Generation: oldGen, Successor: generation.Generation{KeyPrefix: "OTHER", BucketCount: 4}}
			res, err := e.relay.Run(context.Background(), outbox.RunInput{})
			if !errors.Is(err, outbox.ErrMisconfigured) || res.Reason != outbox.StopFatal {
				t.Fatalf("a marker naming another successor: %+v, %v; want a fatal misconfiguration", res, err)
			}
			if len(e.pub.sent()) != 0 {
				t.Fatalf("published %d messages despite the marker problems", len(e.pub.sent()))
			}
		})
	})

	t.Run("NewGenerationRelay_RefusesBadConfigurations", func(t *testing.T) {
		clk := outbox.SystemClock{}
		relay := func(count int, mode outbox.Mode) *outbox.Relay {
			r, err := outbox.NewRelay(outbox.RelayConfig{Options: outbox.RelayOptions{RelayID: "r", BucketCount: count, Mode: mode},
				Store: newMemStore(clk, count).observed, Publisher: newMemPublisher(), Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		gens := &memGenerations{clock: clk}
		for name, cfg := range map[string]generation.RelayConfig{
			"no previous relay":          {Current: relay(4, outbox.ModeDrain), Generations: gens, PreviousGeneration: oldGen, CurrentGeneration: newGen},
			"previous relay holds":       {Previous: relay(2, outbox.ModeHold), Current: relay(4, outbox.ModeDrain), Generations: gens, PreviousGeneration: oldGen, CurrentGeneration: newGen},
			"same key prefix":            {Previous: relay(2, outbox.ModeDrain), Current: relay(4, outbox.ModeDrain), Generations: gens, PreviousGeneration: oldGen, CurrentGeneration: generation.Generation{KeyPrefix: "OUTBOX", BucketCount: 4}},
			"relay with another count":   {Previous: relay(3, outbox.ModeDrain), Current: relay(4, outbox.ModeDrain), Generations: gens, PreviousGeneration: oldGen, CurrentGeneration: newGen},
			"generation without buckets": {Previous: relay(2, outbox.ModeDrain), Current: relay(4, outbox.ModeDrain), Generations: gens, PreviousGeneration: oldGen, CurrentGeneration: generation.Generation{KeyPrefix: "X"}},
		} {
			if _, err := generation.NewRelay(cfg); !errors.Is(err, outbox.ErrMisconfigured) {
				t.Errorf("%s: %v; want a misconfiguration", name, err)
			}
		}
	})
}

package outboxlambda

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// genBundle is a table changing from 4 buckets under OUTBOX to 16 under
// OUTBOX2, with relays configured with both generations.
type genBundle struct {
	*bundle
	prev, cur *outboxddb.Store // for looking; the relays have their own
	restarts  int
}

func setupGenerations(t *testing.T) *genBundle {
	t.Helper()
	b := setup(t, bundleOptions{vars: map[string]string{
		outboxconf.EnvKeyPrefix: "OUTBOX2", outboxconf.EnvBucketCount: "16",
		outboxconf.EnvPreviousKeyPrefix: "OUTBOX", outboxconf.EnvPreviousBucketCount: "4",
	}})
	return &genBundle{bundle: b, prev: b.newStore(t, b.cfg.PreviousStoreOptions()), cur: b.newStore(t)}
}

// writer returns a writer of the previous (old) or the current generation.
func (g *genBundle) writer(t *testing.T, old bool) *outboxddb.Writer {
	t.Helper()
	opts := g.cfg.StoreOptions()
	if old {
		opts = g.cfg.PreviousStoreOptions()
		opts.GenerationCheck = true
	}
	w, err := outboxddb.NewWriter(g.ddb.Client, opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// write enqueues value n of key with w (bucket from w's generation).
func (g *genBundle) write(t *testing.T, w *outboxddb.Writer, old bool, key string, n int) error {
	t.Helper()
	count := g.cfg.BucketCount
	if old {
		count = g.cfg.PreviousBucketCount
	}
	m, err := outbox.NewMessage(g.topic("orders"), []byte(key), []byte(strconv.Itoa(n)), outbox.MessageOptions{BucketCount: count})
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.Enqueue(t.Context(), m)
	return err
}

// crash replaces the relay handler by a fresh one, as a new execution
// environment after a crash: a new relay id and nothing in memory.
func (g *genBundle) crash(t *testing.T) {
	t.Helper()
	g.restarts++
	hc := RelayHandlerConfig{Config: g.cfg, RelayID: fmt.Sprintf("restarted-%d", g.restarts), Store: g.newStore(t),
		PreviousStore: g.newStore(t, g.cfg.PreviousStoreOptions()), Publisher: g.pub, Logger: testLogger(t)}
	var err error
	if g.relay, err = NewRelayHandler(hc); err != nil {
		t.Fatal(err)
	}
}

func (g *genBundle) sweep(t *testing.T) RelayResponse {
	t.Helper()
	return handleRelay(t, g.bundle, t.Context(), g.sample(t, "relay.schedule.json"))
}

func (g *genBundle) contents(t *testing.T, s *outboxddb.Store) outbox.GenerationContents {
	t.Helper()
	c, err := s.GenerationContents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (g *genBundle) phase(t *testing.T) outbox.GenerationPhase {
	t.Helper()
	m, err := g.prev.ReadGeneration(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return m.Phase
}

// published returns the values Kafka holds per key, first occurrences only
// (a crash may publish a message twice).
func (g *genBundle) published(t *testing.T) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	seen := map[string]bool{}
	for _, r := range outboxtest.ConsumeAll(t, g.kafka, g.topic("orders")) {
		id, _ := header(r, outbox.DefaultMessageIDHeaderName)
		if seen[id] {
			continue
		}
		seen[id] = true
		n, _ := strconv.Atoi(string(r.Value))
		out[string(r.Key)] = append(out[string(r.Key)], n)
	}
	return out
}

// Writers switch one after the other while relays serve both generations;
// a relay restarts (a crash: new id, nothing in memory) in every phase. Each
// key's messages reach Kafka in the order they were written, the new
// generation only after the old one was sealed and drained, and the old
// generation's partitions end empty.
func TestGenerations_KeepKeyOrderAcrossTheSwitch_ThroughACrashInEveryPhase(t *testing.T) {
	g := setupGenerations(t)
	keys := []string{"k0", "k1", "k2", "k3", "k4", "k5"}
	oldA, oldB := g.writer(t, true), g.writer(t, true)
	newA, newB := g.writer(t, false), g.writer(t, false)
	for _, k := range keys {
		for n := range 2 {
			if err := g.write(t, oldA, true, k, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Writer A switches; writer B still writes the old generation.
	for _, k := range keys {
		if err := g.write(t, newA, false, k, 2); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys[3:] {
		if err := g.write(t, oldB, true, k, 3); err != nil {
			t.Fatal(err)
		}
	}
	// Phase open (no marker yet): the relay opens the marker and relays
	// only the old generation.
	resp := g.sweep(t)
	if g.phase(t) != outbox.PhaseOpen || resp.Published != 15 || len(g.contents(t, g.cur).Messages) == 0 {
		t.Fatalf("open: %+v, phase %q; want the 15 old messages published and the new ones waiting", resp, g.phase(t))
	}
	g.crash(t)
	// Writer B switches too; what it writes now waits behind its old writes.
	for _, k := range keys[3:] {
		if err := g.write(t, newB, false, k, 4); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys[:3] {
		if err := g.write(t, oldB, true, k, 3); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.prev.SealGeneration(t.Context(), g.cfg.Current()); err != nil {
		t.Fatal(err)
	}
	// A stale Go writer after the seal is refused.
	if err := g.write(t, oldA, true, "k0", 99); !errors.Is(err, outbox.ErrGenerationSealed) {
		t.Fatalf("a stale writer after the seal: %v; want ErrGenerationSealed", err)
	}
	// Sealed, not empty: a fresh relay drains the rest of the old
	// generation, marks it drained and goes on with the new one.
	resp = g.sweep(t)
	if g.phase(t) != outbox.PhaseDrained || !g.contents(t, g.prev).Empty() || resp.Published != 3+6+3 {
		t.Fatalf("sealed: %+v, phase %q; want 3 old and 9 new messages published, the old generation drained", resp, g.phase(t))
	}
	g.crash(t)
	// Drained: a fresh relay serves only the new generation.
	if err := g.write(t, newA, false, "k0", 5); err != nil {
		t.Fatal(err)
	}
	if resp = g.sweep(t); resp.Published != 1 {
		t.Fatalf("drained: %+v; want the one new message", resp)
	}
	// The old generation goes first: for k0-k2, B's old write 3 reaches
	// Kafka before A's new write 2, although A wrote first — two writers
	// on two generations race like any two writers. Each writer's own
	// order holds, and nothing new overtakes anything old.
	want := map[string][]int{}
	for i, k := range keys {
		want[k] = []int{0, 1, 3, 2}
		if i >= 3 {
			want[k] = []int{0, 1, 3, 2, 4}
		}
	}
	want["k0"] = append(want["k0"], 5)
	got := g.published(t)
	for _, k := range keys {
		if !slices.Equal(got[k], want[k]) {
			t.Errorf("key %s reached Kafka as %v, want %v", k, got[k], want[k])
		}
	}
	if c := g.contents(t, g.prev); !c.Empty() {
		t.Errorf("the old generation still holds %+v", c)
	}
}

// sweepCounting runs a schedule sweep and returns what it cost.
func (g *genBundle) sweepCounting(t *testing.T) (RelayResponse, outboxlocal.Counts) {
	t.Helper()
	before := g.ddb.Counter.Snapshot()
	resp := g.sweep(t)
	return resp, g.ddb.Counter.Snapshot().Since(before)
}

func wantCost(t *testing.T, what string, c outboxlocal.Counts, requests map[string]int, read, write float64) {
	t.Helper()
	t.Logf("%s: %v, %.1f read units, %.1f write units", what, c.Requests, c.ReadUnits, c.WriteUnits)
	if !maps.Equal(c.Requests, requests) || c.ReadUnits != read || c.WriteUnits != write {
		t.Errorf("%s: %v, %.1f read and %.1f write units; want %v, %.1f and %.1f", what, c.Requests, c.ReadUnits, c.WriteUnits, requests, read, write)
	}
}

// What serving two generations costs an idle schedule sweep in each phase,
// and a crash between the look into the sealed generation and the finish:
// the next relay looks again and finishes.
func TestGenerations_SweepCostPerPhase_AndACrashBeforeTheFinish(t *testing.T) {
	g := setupGenerations(t)
	_, c := g.sweepCounting(t)
	// Marker read, open put, 4 eventually consistent probes.
	wantCost(t, "first sweep (opens the marker)", c, map[string]int{"Query": 5, "PutItem": 1}, 3, 1)
	_, c = g.sweepCounting(t)
	wantCost(t, "open sweep", c, map[string]int{"Query": 5}, 3, 0)
	if _, err := g.prev.SealGeneration(t.Context(), g.cfg.Current()); err != nil {
		t.Fatal(err)
	}
	// The crashed relay looked and found nothing; it never finished.
	if !g.contents(t, g.prev).Empty() {
		t.Fatal("the old generation is not empty")
	}
	g.crash(t)
	resp, c := g.sweepCounting(t)
	if g.phase(t) != outbox.PhaseDrained {
		t.Fatalf("after the sealed sweep: %+v, phase %q; want drained", resp, g.phase(t))
	}
	// Marker read, 3 × 4 consistent looks (parked, messages, parked;
	// nothing left, so no pass over the old buckets), the finish and its
	// re-read, 16 probes of the new buckets.
	wantCost(t, "sealed sweep (finishes)", c, map[string]int{"Query": 1 + 12 + 1 + 16, "UpdateItem": 1}, 1+12+1+8, 1)
	_, c = g.sweepCounting(t)
	wantCost(t, "drained sweep, same environment", c, map[string]int{"Query": 16}, 8, 0)
	g.crash(t)
	_, c = g.sweepCounting(t)
	wantCost(t, "drained sweep, new environment", c, map[string]int{"Query": 1 + 16}, 1+8, 0)
}

// A relay whose previous generation does not match the marker stops as
// misconfigured instead of serving either generation.
func TestGenerations_MarkerOfAnotherBucketCount_IsAMisconfiguration(t *testing.T) {
	g := setupGenerations(t)
	g.sweep(t)
	g.cfg.PreviousBucketCount = 8
	g.crash(t)
	_, err := g.relay.Handle(t.Context(), g.sample(t, "relay.schedule.json"))
	if !errors.Is(err, outbox.ErrMisconfigured) || !strings.Contains(err.Error(), "OUTBOX/4") {
		t.Fatalf("a relay configured with OUTBOX/8 against a marker of OUTBOX/4: %v; want a misconfiguration naming both", err)
	}
}

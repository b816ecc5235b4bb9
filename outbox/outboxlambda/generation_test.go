package outboxlambda

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/generation"
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
	return &genBundle{bundle: b, prev: b.newStore(t, b.cfg.PreviousStoreOptions().Options), cur: b.newStore(t)}
}

// writer returns a writer of the old configuration (the previous
// generation, with its check) or of the new one (both generations: it
// writes the previous one until the seal).
func (g *genBundle) writer(t *testing.T, old bool) *outboxddb.Writer {
	t.Helper()
	opts := g.cfg.WriterOptions()
	if old {
		opts.Options = g.cfg.PreviousStoreOptions().Options
		opts.PreviousKeyPrefix, opts.PreviousBucketCount = "", 0
		opts.GenerationCheck = true
	}
	w, err := outboxddb.NewWriter(g.ddb.Client, opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// write enqueues value n of key with w (bucket from w's generation).
func (g *genBundle) write(t *testing.T, w *outboxddb.Writer, key string, n int) error {
	t.Helper()
	m, err := outbox.NewMessage(g.topic("orders"), []byte(key), []byte(strconv.Itoa(n)), outbox.MessageOptions{})
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
		PreviousStore: g.newStore(t, g.cfg.PreviousStoreOptions().Options), Publisher: g.pub, Logger: testLogger(t)}
	var err error
	if g.relay, err = NewRelayHandler(hc); err != nil {
		t.Fatal(err)
	}
}

func (g *genBundle) sweep(t *testing.T) RelayResponse {
	t.Helper()
	return handleRelay(t, g.bundle, t.Context(), g.sample(t, "relay.schedule.json"))
}

func (g *genBundle) contents(t *testing.T, s *outboxddb.Store) generation.Contents {
	t.Helper()
	c, err := s.GenerationContents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (g *genBundle) phase(t *testing.T) generation.Phase {
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

// commit writes value n of key in one transaction with the key's business
// item, whose version condition serializes the key's commits whichever
// writer instance makes them (as an application's own data does): n
// commits only after n-1. A writer of the old generation prepares its
// generation check with the message; a refusal for the seal is built again
// once, as a caller's retry loop does.
func (g *genBundle) commit(t *testing.T, w *outboxddb.Writer, key string, n int) error {
	t.Helper()
	for attempt := 0; ; attempt++ {
		m, err := outbox.NewMessage(g.topic("orders"), []byte(key), []byte(strconv.Itoa(n)), outbox.MessageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := w.Prepare(t.Context(), m)
		if err != nil {
			return err
		}
		items := append(p.Items(), g.businessPut(key, n))
		_, err = g.ddb.Client.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err = p.Explain(err); err == nil || attempt > 0 || !errors.Is(err, generation.ErrSealed) {
			return err
		}
	}
}

// businessPut stores version n of key's business item, if the stored
// version is n-1.
func (g *genBundle) businessPut(key string, n int) types.TransactWriteItem {
	put := &types.Put{
		TableName: aws.String(g.cfg.Table),
		Item: map[string]types.AttributeValue{
			g.cfg.PartitionKey: str("ORDER#" + key), g.cfg.SortKey: str("ORDER"),
			"Version": &types.AttributeValueMemberN{Value: strconv.Itoa(n)},
		},
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": g.cfg.PartitionKey},
	}
	if n > 0 {
		put.ConditionExpression = aws.String("#v = :prev")
		put.ExpressionAttributeNames = map[string]string{"#v": "Version"}
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":prev": &types.AttributeValueMemberN{Value: strconv.Itoa(n - 1)}}
	}
	return types.TransactWriteItem{Put: put}
}

func TestGenerations(t *testing.T) {
	// A rolling writer switch: instance A already runs the new configuration
	// (both generations), instance B still the old one (the old generation,
	// with its check), and they take turns on every key, serialized by the
	// key's business item. Relays serve both generations and restart (a
	// crash: new id, nothing in memory) in every phase. Each key reaches Kafka
	// in commit order: the seal is the switch point, so A's commits before it
	// land in the old generation with B's, and B is refused after it.
	t.Run("RollingWriterSwitch_KeepsCommitOrder_ThroughACrashInEveryPhase", func(t *testing.T) {
		g := setupGenerations(t)
		keys := []string{"k0", "k1", "k2", "k3", "k4", "k5"}
		newA, oldB := g.writer(t, false), g.writer(t, true)
		for _, k := range keys {
			for n := range 4 {
				w := newA
				if n%2 == 0 {
					w = oldB
				}
				if err := g.commit(t, w, k, n); err != nil {
					t.Fatalf("commit %s:%d: %v", k, n, err)
				}
			}
		}
		// Open (the first sweep writes the marker): everything committed so
		// far is in the old generation and published.
		resp := g.sweep(t)
		if g.phase(t) != generation.PhaseOpen || resp.Published != 24 {
			t.Errorf("open: %+v, phase %q; want all 24 messages published from the old generation", resp, g.phase(t))
		}
		g.crash(t)
		if _, err := g.prev.SealGeneration(t.Context(), g.cfg.Current()); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			// B is refused after the seal and restarts with the new
			// configuration; A switches after one refusal.
			if err := g.commit(t, oldB, k, 4); !errors.Is(err, generation.ErrSealed) {
				t.Fatalf("the old configuration after the seal: %v; want generation.ErrSealed", err)
			}
			if err := g.commit(t, newA, k, 4); err != nil {
				t.Fatal(err)
			}
			if err := g.commit(t, g.writer(t, false), k, 5); err != nil {
				t.Fatal(err)
			}
		}
		// Sealed: a fresh relay finds the old generation empty, marks it
		// drained and goes on with the new one.
		resp = g.sweep(t)
		if g.phase(t) != generation.PhaseDrained || resp.Published != 12 {
			t.Errorf("sealed: %+v, phase %q; want the 12 new messages published, the old generation drained", resp, g.phase(t))
		}
		g.crash(t)
		if err := g.commit(t, newA, "k0", 6); err != nil {
			t.Fatal(err)
		}
		if resp = g.sweep(t); resp.Published != 1 {
			t.Errorf("drained: %+v; want the one new message", resp)
		}
		got := g.published(t)
		for _, k := range keys {
			want := []int{0, 1, 2, 3, 4, 5}
			if k == "k0" {
				want = append(want, 6)
			}
			if !slices.Equal(got[k], want) {
				t.Errorf("key %s reached Kafka as %v, want commit order %v", k, got[k], want)
			}
		}
		if c := g.contents(t, g.prev); !c.Empty() {
			t.Errorf("the old generation still holds %+v", c)
		}
	})

	// A relay configured with the new generation alone, deployed too early,
	// claims nothing and publishes nothing while the old generation is not
	// drained (its predecessor marker names the old one), so a message
	// committed after the seal does not overtake one committed before it. Once
	// the old generation is drained it serves; it then remembers that, for
	// good.
	t.Run("RelayOfTheNewGenerationAlone_WaitsForTheOldToDrain", func(t *testing.T) {
		g := setupGenerations(t)
		g.sweep(t) // opens the marker
		if err := g.write(t, g.writer(t, true), "k", 0); err != nil {
			t.Fatal(err)
		}
		if _, err := g.prev.SealGeneration(t.Context(), g.cfg.Current()); err != nil {
			t.Fatal(err)
		}
		if err := g.write(t, g.writer(t, false), "k", 1); err != nil {
			t.Fatal(err)
		}
		early := g.alone(t, "early")
		for _, phase := range []string{"sealed", "sealed, again"} {
			before := g.ddb.Counter.Snapshot()
			resp, err := early.Handle(t.Context(), g.sample(t, "relay.schedule.json"))
			if !errors.Is(err, generation.ErrNotOpen) || resp.Published != 0 || len(g.leases(t)) != 0 {
				t.Fatalf("%s: %+v, %v; want generation.ErrNotOpen, nothing published or claimed", phase, resp, err)
			}
			c := g.ddb.Counter.Snapshot().Since(before)
			t.Logf("%s: a refused run: %v, %.1f read units", phase, c.Requests, c.ReadUnits)
		}
		if got := g.published(t); len(got["k"]) != 0 {
			t.Fatalf("the early relay published %v", got["k"])
		}
		// The relays serving both generations drain the old one.
		if resp := g.sweep(t); resp.Published != 2 || g.phase(t) != generation.PhaseDrained {
			t.Fatalf("the two-generation relay: %+v, phase %q", resp, g.phase(t))
		}
		if err := g.write(t, g.writer(t, false), "k", 2); err != nil {
			t.Fatal(err)
		}
		before := g.ddb.Counter.Snapshot()
		resp, err := early.Handle(t.Context(), g.sample(t, "relay.schedule.json"))
		if err != nil || resp.Published != 1 {
			t.Fatalf("after the drain: %+v, %v; want the new message published", resp, err)
		}
		c := g.ddb.Counter.Snapshot().Since(before)
		t.Logf("first served run: %v, %.1f read units", c.Requests, c.ReadUnits)
		if got := g.published(t); !slices.Equal(got["k"], []int{0, 1, 2}) {
			t.Fatalf("k reached Kafka as %v, want commit order [0 1 2]", got["k"])
		}
	})

	// What serving two generations costs an idle schedule sweep in each phase,
	// and a crash between the look into the sealed generation and the finish:
	// the next relay looks again and finishes.
	t.Run("SweepCostPerPhase_AndACrashBeforeTheFinish", func(t *testing.T) {
		g := setupGenerations(t)
		_, c := g.sweepCounting(t)
		// Marker read, the open (marker, predecessor marker and the new
		// generation's layout record in one transaction), 4 eventually
		// consistent probes, and in every sweep the replay requests (a relay
		// of either poison policy carries marked replays out): one
		// consistent single-item read.
		wantCost(t, "first sweep (opens the marker)", c, map[string]int{"Query": 5 + 1, "TransactWriteItems": 1}, 3+1, 6)
		_, c = g.sweepCounting(t)
		wantCost(t, "open sweep", c, map[string]int{"Query": 5 + 1}, 3+1, 0)
		if _, err := g.prev.SealGeneration(t.Context(), g.cfg.Current()); err != nil {
			t.Fatal(err)
		}
		// The crashed relay looked and found nothing; it never finished.
		if !g.contents(t, g.prev).Empty() {
			t.Fatal("the old generation is not empty")
		}
		g.crash(t)
		resp, c := g.sweepCounting(t)
		if g.phase(t) != generation.PhaseDrained {
			t.Fatalf("after the sealed sweep: %+v, phase %q; want drained", resp, g.phase(t))
		}
		// Marker read, 3 × 4 consistent looks (parked, messages, parked;
		// nothing left, so no pass over the old buckets), the finish and its
		// re-read, 16 probes of the new buckets.
		wantCost(t, "sealed sweep (finishes)", c, map[string]int{"Query": 1 + 12 + 1 + 16 + 1, "UpdateItem": 1}, 1+12+1+8+1, 1)
		_, c = g.sweepCounting(t)
		wantCost(t, "drained sweep, same environment", c, map[string]int{"Query": 16 + 1}, 8+1, 0)
		g.crash(t)
		_, c = g.sweepCounting(t)
		wantCost(t, "drained sweep, new environment", c, map[string]int{"Query": 1 + 16 + 1}, 1+8+1, 0)
	})

	// A relay whose previous generation does not match the marker stops as
	// misconfigured instead of serving either generation.
	t.Run("MarkerOfAnotherBucketCount_IsAMisconfiguration", func(t *testing.T) {
		g := setupGenerations(t)
		g.sweep(t)
		g.cfg.PreviousBucketCount = 8
		g.crash(t)
		_, err := g.relay.Handle(t.Context(), g.sample(t, "relay.schedule.json"))
		if !errors.Is(err, outbox.ErrMisconfigured) || !strings.Contains(err.Error(), "OUTBOX/4") {
			t.Fatalf("a relay configured with OUTBOX/8 against a marker of OUTBOX/4: %v; want a misconfiguration naming both", err)
		}
	})
}

// alone returns a relay handler configured with the new generation alone.
func (g *genBundle) alone(t *testing.T, id string) *RelayHandler {
	t.Helper()
	cfg := g.cfg
	cfg.PreviousKeyPrefix, cfg.PreviousBucketCount = "", 0
	h, err := NewRelayHandler(RelayHandlerConfig{Config: cfg, RelayID: id, Store: g.newStore(t, cfg.TableOptions()), Publisher: g.pub, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return h
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

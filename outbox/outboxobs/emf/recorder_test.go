package emf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

func newRecorder(t *testing.T, cfg Config) *Recorder {
	t.Helper()
	r, err := NewRecorder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRecorderRelayInvocationGolden(t *testing.T) {
	r := newRecorder(t, Config{Outbox: "orders", FunctionName: "spillway-relay"})
	kafkaErr := errors.New("NOT_ENOUGH_REPLICAS")
	ev := func(e outbox.Event) {
		e.RelayID = "spillway-relay-3f9a"
		r.Observe(e)
	}
	ev(outbox.Event{Kind: outbox.EventRound, Bucket: -1, Count: 2})
	ev(outbox.Event{Kind: outbox.EventClaim, Bucket: -1, Count: 2})
	ev(outbox.Event{Kind: outbox.EventOwned, Bucket: -1, Count: 2})
	ev(outbox.Event{Kind: outbox.EventBacklog, Bucket: -1, Count: 50, Duration: 100 * time.Second})
	ev(outbox.Event{Kind: outbox.EventBatchFetched, Bucket: 3, Count: 3})
	ev(outbox.Event{Kind: outbox.EventPublish, Bucket: 3, Count: 3,
		Latencies: []time.Duration{12 * time.Millisecond, 7500 * time.Microsecond, 40 * time.Millisecond}})
	ev(outbox.Event{Kind: outbox.EventDelete, Bucket: 3, Count: 3})
	ev(outbox.Event{Kind: outbox.EventPublish, Bucket: 5, Count: 1, Latencies: []time.Duration{3 * time.Millisecond}, Err: kafkaErr})
	ev(outbox.Event{Kind: outbox.EventBackoff, Bucket: 5, Duration: time.Second, Err: kafkaErr})
	ev(outbox.Event{Kind: outbox.EventHeadRowRetry, Bucket: 5})
	// An operator's replay: published (above, like any message) and
	// counted on its own.
	ev(outbox.Event{Kind: outbox.EventReplayed, Bucket: 3, Count: 2})
	// Neither a lapsed lease nor shutdown cancellation is a Kafka failure.
	ev(outbox.Event{Kind: outbox.EventPublish, Bucket: 6, Err: outbox.ErrLeaseLost})
	ev(outbox.Event{Kind: outbox.EventPublish, Bucket: 6, Err: context.Canceled})
	ev(outbox.Event{Kind: outbox.EventRound, Bucket: -1, Err: errors.New("throttled")})
	ev(outbox.Event{Kind: outbox.EventRound, Bucket: -1, Count: 3})
	ev(outbox.Event{Kind: outbox.EventClaim, Bucket: -1, Count: 1})
	ev(outbox.Event{Kind: outbox.EventOwned, Bucket: -1, Count: 3})
	ev(outbox.Event{Kind: outbox.EventRefusedWrite, Bucket: 4, Count: 1, Op: "claim"})
	ev(outbox.Event{Kind: outbox.EventThrottle, Bucket: 4, Count: 1, Op: "delete"})
	ev(outbox.Event{Kind: outbox.EventBacklog, Bucket: -1, Err: errors.New("timeout")})
	ev(outbox.Event{Kind: outbox.EventBacklog, Bucket: -1, Count: 42, Duration: 90500 * time.Millisecond})
	ev(outbox.Event{Kind: outbox.EventRelease, Bucket: -1, Count: 3})
	ev(outbox.Event{Kind: outbox.EventOwned, Bucket: -1, Count: 0})
	ev(outbox.Event{Kind: outbox.EventWakeUpSent, Bucket: -1, Count: 2, Err: errors.New("invoke failed")})
	ev(outbox.Event{Kind: outbox.EventWakeUpSent, Bucket: -1, Count: 2})
	ev(outbox.Event{Kind: outbox.EventStop, Bucket: -1, BudgetUsed: 37, Stop: outbox.StopDrained})
	r.AddDynamoDB(10, 5, 12)
	r.AddDynamoDB(2, 0.5, 4)
	if err := r.SetProperty(PropertyRequestID, "c6af9ac6-7b61-11e6-9a41-93e8deadbeef"); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	if err := r.Flush(&out, goldenTime); err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "relay_invocation.golden.json", out.Bytes())

	// The flush started a new invocation: nothing is left to write.
	out.Reset()
	if err := r.Flush(&out, goldenTime); err != nil || out.Len() != 0 {
		t.Fatalf("second flush: %v, wrote %q", err, out.String())
	}
}

func TestRecorderEnqueueInvocationGolden(t *testing.T) {
	r := newRecorder(t, Config{Outbox: "orders", FunctionName: "spillway-enqueue"})
	r.Observe(outbox.Event{Kind: outbox.EventEnqueue, Bucket: 2, Count: 3})
	r.Observe(outbox.Event{Kind: outbox.EventEnqueue, Bucket: 7, Count: 1})
	r.Observe(outbox.Event{Kind: outbox.EventEnqueueRejected, Bucket: -1, Count: 2, Err: outbox.ErrInvalidMessage})
	r.AddDynamoDB(2, 0, 8)
	if err := r.SetProperty(PropertyRequestID, "3e1f2d1c-0000-4000-8000-000000000001"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := r.Flush(&out, goldenTime); err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "enqueue_invocation.golden.json", out.Bytes())
}

func TestRecorderLatencyOverflowGolden(t *testing.T) {
	r := newRecorder(t, Config{Outbox: "orders", FunctionName: "spillway-relay"})
	lat := make([]time.Duration, 250)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Millisecond
	}
	r.Observe(outbox.Event{Kind: outbox.EventPublish, RelayID: "r-1", Bucket: 0, Count: 250, Latencies: lat})
	r.Observe(outbox.Event{Kind: outbox.EventStop, RelayID: "r-1", Bucket: -1, BudgetUsed: 10})
	var out bytes.Buffer
	if err := r.Flush(&out, goldenTime); err != nil {
		t.Fatal(err)
	}
	assertGolden(t, "latency_overflow.golden.json", out.Bytes())
}

func TestRecorderWritesNothingWhenIdle(t *testing.T) {
	r := newRecorder(t, Config{})
	if err := r.SetProperty(PropertyRequestID, "x"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := r.Flush(&out, goldenTime); err != nil || out.Len() != 0 {
		t.Fatalf("idle flush: %v, wrote %q", err, out.String())
	}
}

func TestRecorderDefaults(t *testing.T) {
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "fn-from-env")
	r := newRecorder(t, Config{})
	r.Observe(outbox.Event{Kind: outbox.EventEnqueue, Count: 1})
	var out bytes.Buffer
	if err := r.Flush(&out, goldenTime); err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(out.Bytes(), &root); err != nil {
		t.Fatal(err)
	}
	ns := root["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Namespace"]
	if ns != outboxconf.DefaultMetricsNamespace || root["Outbox"] != outbox.DefaultMetricsName || root["FunctionName"] != "fn-from-env" {
		t.Fatalf("defaults: namespace %v, outbox %v, function %v", ns, root["Outbox"], root["FunctionName"])
	}

	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "")
	r = newRecorder(t, Config{})
	r.Observe(outbox.Event{Kind: outbox.EventEnqueue, Count: 1})
	out.Reset()
	if err := r.Flush(&out, goldenTime); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out.Bytes(), &root); err != nil || root["FunctionName"] != DefaultFunctionName {
		t.Fatalf("FunctionName outside Lambda = %v (%v)", root["FunctionName"], err)
	}
}

func TestNewRecorderRefusesInvalidNames(t *testing.T) {
	for _, cfg := range []Config{{Outbox: "  "}, {Namespace: "AWS/Spillway"}, {FunctionName: string(make([]byte, 1025))}} {
		if _, err := NewRecorder(cfg); !errors.Is(err, ErrInvalidDocument) {
			t.Errorf("NewRecorder(%+v) err = %v, want ErrInvalidDocument", cfg, err)
		}
	}
}

func TestSetProperty(t *testing.T) {
	r := newRecorder(t, Config{})
	for _, name := range []string{"", "_aws", outboxconf.MetricMessagesPublished, outboxconf.DimensionOutbox, PropertyWriteUnitsPerMessage} {
		if err := r.SetProperty(name, "x"); !errors.Is(err, ErrInvalidDocument) {
			t.Errorf("SetProperty(%q) err = %v, want ErrInvalidDocument", name, err)
		}
	}
	if err := r.SetProperty("Ch", make(chan int)); !errors.Is(err, ErrInvalidDocument) {
		t.Errorf("unencodable value: err = %v", err)
	}
	// A later value replaces an earlier one; an explicit RelayId wins over
	// the events' relay id.
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(r.SetProperty("Mode", "drain"))
	must(r.SetProperty("Mode", "hold"))
	must(r.SetProperty(PropertyRelayID, "cli"))
	r.Observe(outbox.Event{Kind: outbox.EventClaim, RelayID: "from-event", Count: 1})
	var out bytes.Buffer
	must(r.Flush(&out, goldenTime))
	if err := validateEMF(bytes.TrimSuffix(out.Bytes(), []byte("\n"))); err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	must(json.Unmarshal(out.Bytes(), &root))
	if root["Mode"] != "hold" || root[PropertyRelayID] != "cli" {
		t.Fatalf("properties: Mode %v, RelayId %v", root["Mode"], root[PropertyRelayID])
	}
}

func TestRecorderFlushResetsEvenOnWriteError(t *testing.T) {
	r := newRecorder(t, Config{})
	r.Observe(outbox.Event{Kind: outbox.EventPublish, Count: 5})
	boom := errors.New("closed")
	if err := r.Flush(failingWriter{boom}, goldenTime); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	r.Observe(outbox.Event{Kind: outbox.EventPublish, Count: 2})
	var out bytes.Buffer
	if err := r.Flush(&out, goldenTime); err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(out.Bytes(), &root); err != nil {
		t.Fatal(err)
	}
	if root[outboxconf.MetricMessagesPublished] != 2.0 {
		t.Fatalf("MessagesPublished = %v, want 2 (the failed flush's 5 must not carry over)", root[outboxconf.MetricMessagesPublished])
	}
}

func TestRecorderClampsBadInput(t *testing.T) {
	r := newRecorder(t, Config{})
	r.Observe(outbox.Event{Kind: outbox.EventPublish, Count: -3, Latencies: []time.Duration{-time.Second}})
	r.Observe(outbox.Event{Kind: outbox.EventBacklog, Count: 0, Duration: -time.Minute})
	r.AddDynamoDB(-1, -2, 0)
	var out bytes.Buffer
	if err := r.Flush(&out, goldenTime); err != nil {
		t.Fatal(err)
	}
	line := bytes.TrimSuffix(out.Bytes(), []byte("\n"))
	if err := validateEMF(line); err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := json.Unmarshal(line, &root); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"MessagesPublished", "PublishLatency", "OldestPendingAge", "DynamoDBRequests", "ReadUnits", "WriteUnits"} {
		if root[name] != 0.0 {
			t.Errorf("%s = %v, want 0", name, root[name])
		}
	}
	if _, ok := root[PropertyWriteUnitsPerMessage]; ok {
		t.Error("ratio written without messages")
	}
}

func TestSampleIsSystematicAndBounded(t *testing.T) {
	s := newSample(4)
	for i := range 10 {
		s.add(float64(i + 1))
	}
	if want := []float64{1, 5, 9}; !slices.Equal(s.values, want) {
		t.Fatalf("sample of 1..10 with max 4 = %v, want %v", s.values, want)
	}

	s = newSample(DefaultMaxLatencyValues)
	for i := range 10000 {
		s.add(float64(i))
	}
	// Multiples of 8 below 10000 are 1250 > 1000, so the stride is 16.
	if len(s.values) != 625 {
		t.Fatalf("kept %d values, want 625", len(s.values))
	}
	for i, v := range s.values {
		if v != float64(16*i) {
			t.Fatalf("value %d = %v, want %d", i, v, 16*i)
		}
	}
}

// TestRecorderConcurrentObserve counts exactly under contention (and gives
// the race detector a workout).
func TestRecorderConcurrentObserve(t *testing.T) {
	r := newRecorder(t, Config{})
	const goroutines, perG = 8, 1000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range perG {
				r.Observe(outbox.Event{Kind: outbox.EventPublish, Bucket: g, Count: 1, Latencies: []time.Duration{time.Duration(i) * time.Millisecond}})
				r.Observe(outbox.Event{Kind: outbox.EventRefusedWrite, Bucket: g, Count: 1})
				r.AddDynamoDB(1, 0.5, 1)
			}
		})
	}
	wg.Wait()
	var out bytes.Buffer
	if err := r.Flush(&out, goldenTime); err != nil {
		t.Fatal(err)
	}
	totals := sumLines(t, out.Bytes())
	want := map[string]float64{
		"MessagesPublished": goroutines * perG, "RefusedConditionalWrites": goroutines * perG,
		"DynamoDBRequests": goroutines * perG, "ReadUnits": goroutines * perG / 2, "WriteUnits": goroutines * perG,
		// 8000 values: the stride reaches 8, which keeps exactly 1000.
		"PublishLatency#": DefaultMaxLatencyValues,
	}
	for name, v := range want {
		if totals[name] != v {
			t.Errorf("%s = %v, want %v", name, totals[name], v)
		}
	}
}

// sumLines validates every line and sums each metric over the lines;
// "<name>#" holds the number of values.
func sumLines(t *testing.T, out []byte) map[string]float64 {
	t.Helper()
	totals := map[string]float64{}
	for i, line := range splitLines(t, out) {
		if err := validateEMF(line); err != nil {
			t.Fatalf("line %d: %v\n%s", i, err, line)
		}
		var root map[string]any
		if err := json.Unmarshal(line, &root); err != nil {
			t.Fatal(err)
		}
		for _, d := range root["_aws"].(map[string]any)["CloudWatchMetrics"].([]any) {
			for _, def := range d.(map[string]any)["Metrics"].([]any) {
				name := def.(map[string]any)["Name"].(string)
				switch v := root[name].(type) {
				case float64:
					totals[name] += v
					totals[name+"#"]++
				case []any:
					for _, x := range v {
						totals[name] += x.(float64)
					}
					totals[name+"#"] += float64(len(v))
				}
			}
		}
	}
	return totals
}

// TestRecorderRandomStreamsStayValid feeds seeded random event streams,
// including extreme counts and thousands of latencies, and checks every
// flushed line with the validator and the counters against a tally.
func TestRecorderRandomStreamsStayValid(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	kinds := []outbox.EventKind{
		outbox.EventRound, outbox.EventClaim, outbox.EventRelease, outbox.EventLeaseLost, outbox.EventRefusedWrite,
		outbox.EventThrottle, outbox.EventBatchFetched, outbox.EventPublish, outbox.EventDelete, outbox.EventBackoff,
		outbox.EventHeadRowRetry, outbox.EventBacklog, outbox.EventWakeUpSent, outbox.EventReleaseSkipped,
		outbox.EventStop, outbox.EventEnqueue, outbox.EventEnqueueRejected, outbox.EventOwned, outbox.EventKind(99),
	}
	lines := 0
	for inv := range 200 {
		maxLatency := 1 + rng.IntN(1500)
		r := newRecorder(t, Config{Outbox: "o", FunctionName: "f", MaxLatencyValues: maxLatency})
		var published, enqueued, latencies float64
		for range rng.IntN(300) {
			e := outbox.Event{Kind: kinds[rng.IntN(len(kinds))], Bucket: rng.IntN(64) - 1, Count: rng.IntN(1 << 20), RelayID: "relay-x"}
			if rng.IntN(4) == 0 {
				e.Err = errors.New("random failure")
			}
			e.Duration = time.Duration(rng.Int64N(int64(time.Hour)))
			if e.Kind == outbox.EventPublish {
				published += float64(e.Count)
				e.Latencies = make([]time.Duration, rng.IntN(400))
				for i := range e.Latencies {
					e.Latencies[i] = time.Duration(rng.Int64N(int64(10 * time.Second)))
				}
				latencies += float64(len(e.Latencies))
			}
			if e.Kind == outbox.EventEnqueue {
				enqueued += float64(e.Count)
			}
			r.Observe(e)
			if rng.IntN(10) == 0 {
				r.AddDynamoDB(rng.IntN(100), rng.Float64()*50, rng.Float64()*50)
			}
		}
		var out bytes.Buffer
		if err := r.Flush(&out, goldenTime.Add(time.Duration(inv)*time.Second)); err != nil {
			t.Fatalf("invocation %d: %v", inv, err)
		}
		totals := sumLines(t, out.Bytes())
		lines += len(splitLines(t, out.Bytes()))
		if totals["MessagesPublished"] != published || totals["MessagesEnqueued"] != enqueued {
			t.Fatalf("invocation %d: published %v/%v enqueued %v/%v", inv,
				totals["MessagesPublished"], published, totals["MessagesEnqueued"], enqueued)
		}
		if kept := totals["PublishLatency#"]; kept > latencies || kept > float64(maxLatency) || (latencies > 0 && kept == 0) {
			t.Fatalf("invocation %d: kept %v of %v latencies", inv, kept, latencies)
		}
	}
	t.Logf("200 invocations, %d lines validated", lines)
	if lines < 200 {
		t.Fatalf("only %d lines for 200 invocations: the streams were too sparse to prove anything", lines)
	}
}

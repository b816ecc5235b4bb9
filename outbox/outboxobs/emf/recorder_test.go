package emf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

func newRecorder(t *testing.T, cfg Config) *Recorder {
	t.Helper()
	r, err := NewRecorder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRecorder(t *testing.T) {
	t.Run("RelayInvocationGolden", func(t *testing.T) {
		r := newRecorder(t, Config{Outbox: "orders", FunctionName: "spillway-relay"})
		kafkaErr := errors.New("NOT_ENOUGH_REPLICAS")
		const id = "spillway-relay-3f9a"
		r.OnRound(id, time.Second, lease.Acquisition{}, nil)
		r.OnLeases(id, 2, 2, 0)
		r.OnBacklog(id, 50, 100*time.Second)
		r.OnFetch(id, 3, 3)
		r.OnPublish(id, 3, 3, []time.Duration{12 * time.Millisecond, 7500 * time.Microsecond, 40 * time.Millisecond}, nil)
		r.OnDelete(id, 3, 3)
		r.OnPublish(id, 5, 1, []time.Duration{3 * time.Millisecond}, kafkaErr)
		r.OnBackoff(id, 5, time.Second, kafkaErr)
		r.OnHeadRowRetry(id, 5)
		// An operator's replay: published (above, like any message) and
		// counted on its own.
		r.OnReplay(id, 3, 2)
		// Neither a lapsed lease nor shutdown cancellation is a Kafka failure.
		r.OnPublish(id, 6, 0, nil, outbox.ErrLeaseLost)
		r.OnPublish(id, 6, 0, nil, context.Canceled)
		r.OnRound(id, time.Second, lease.Acquisition{}, errors.New("throttled"))
		r.OnRound(id, time.Second, lease.Acquisition{}, nil)
		r.OnLeases(id, 3, 1, 0)
		r.OnRefused(outboxddb.Request{Op: outboxddb.OpClaim, RelayID: id, Bucket: 4, OneBucket: true})
		r.OnThrottle(outboxddb.Request{Op: outboxddb.OpDelete, Bucket: 4, OneBucket: true}, errors.New("slow down"))
		r.OnBacklog(id, 42, 90500*time.Millisecond)
		r.OnLeases(id, 0, 0, 3)
		r.OnWakeUp(outbox.WakeUp{Buckets: []int{1, 2}}, errors.New("invoke failed"))
		r.OnWakeUp(outbox.WakeUp{Buckets: []int{1, 2}}, nil)
		r.OnRunEnd(id, outbox.RunResult{Reason: outbox.StopDrained, BudgetUsed: 37})
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
	})

	t.Run("EnqueueInvocationGolden", func(t *testing.T) {
		r := newRecorder(t, Config{Outbox: "orders", FunctionName: "spillway-enqueue"})
		r.OnEnqueue(3)
		r.OnEnqueue(1)
		r.OnEnqueueRejected(2, outbox.ErrInvalidMessage)
		r.AddDynamoDB(2, 0, 8)
		if err := r.SetProperty(PropertyRequestID, "3e1f2d1c-0000-4000-8000-000000000001"); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := r.Flush(&out, goldenTime); err != nil {
			t.Fatal(err)
		}
		assertGolden(t, "enqueue_invocation.golden.json", out.Bytes())
	})

	t.Run("LatencyOverflowGolden", func(t *testing.T) {
		r := newRecorder(t, Config{Outbox: "orders", FunctionName: "spillway-relay"})
		lat := make([]time.Duration, 250)
		for i := range lat {
			lat[i] = time.Duration(i+1) * time.Millisecond
		}
		r.OnPublish("r-1", 0, 250, lat, nil)
		r.OnRunEnd("r-1", outbox.RunResult{Reason: outbox.StopDrained, BudgetUsed: 10})
		var out bytes.Buffer
		if err := r.Flush(&out, goldenTime); err != nil {
			t.Fatal(err)
		}
		assertGolden(t, "latency_overflow.golden.json", out.Bytes())
	})

	// A stranded count is a gauge: the last count of the invocation, zero
	// included, so the stack's alarm returns to OK once they are gone.
	t.Run("StrandedMessagesGauge", func(t *testing.T) {
		r := newRecorder(t, Config{Outbox: "orders", FunctionName: "spillway-relay"})
		r.OnStranded("r-1", 5)
		r.OnStranded("r-1", 3)
		var out bytes.Buffer
		if err := r.Flush(&out, goldenTime); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), `"StrandedMessages":3`) || !strings.Contains(out.String(), `{"Name":"StrandedMessages","Unit":"Count"}`) {
			t.Fatalf("flushed %s; want StrandedMessages 3 (Count)", out.String())
		}
		r.OnStranded("r-1", 0)
		out.Reset()
		if err := r.Flush(&out, goldenTime); err != nil || !strings.Contains(out.String(), `"StrandedMessages":0`) {
			t.Fatalf("flushed %s, %v; want StrandedMessages 0", out.String(), err)
		}
	})

	t.Run("WritesNothingWhenIdle", func(t *testing.T) {
		r := newRecorder(t, Config{})
		if err := r.SetProperty(PropertyRequestID, "x"); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := r.Flush(&out, goldenTime); err != nil || out.Len() != 0 {
			t.Fatalf("idle flush: %v, wrote %q", err, out.String())
		}
	})

	t.Run("Defaults", func(t *testing.T) {
		t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "fn-from-env")
		r := newRecorder(t, Config{})
		r.OnEnqueue(1)
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
		r.OnEnqueue(1)
		out.Reset()
		if err := r.Flush(&out, goldenTime); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(out.Bytes(), &root); err != nil || root["FunctionName"] != DefaultFunctionName {
			t.Fatalf("FunctionName outside Lambda = %v (%v)", root["FunctionName"], err)
		}
	})

	t.Run("NewRecorderRefusesInvalidNames", func(t *testing.T) {
		for _, cfg := range []Config{{Outbox: "  "}, {Namespace: "AWS/Spillway"}, {FunctionName: string(make([]byte, 1025))}} {
			if _, err := NewRecorder(cfg); !errors.Is(err, ErrInvalidDocument) {
				t.Errorf("NewRecorder(%+v) err = %v, want ErrInvalidDocument", cfg, err)
			}
		}
	})

	t.Run("SetProperty", func(t *testing.T) {
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
		r.OnLeases("from-event", 1, 1, 0)
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
	})

	t.Run("FlushResetsEvenOnWriteError", func(t *testing.T) {
		r := newRecorder(t, Config{})
		r.OnPublish("", 0, 5, nil, nil)
		boom := errors.New("closed")
		if err := r.Flush(failingWriter{boom}, goldenTime); !errors.Is(err, boom) {
			t.Fatalf("err = %v, want %v", err, boom)
		}
		r.OnPublish("", 0, 2, nil, nil)
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
	})

	t.Run("ClampsBadInput", func(t *testing.T) {
		r := newRecorder(t, Config{})
		r.OnPublish("", 0, -3, []time.Duration{-time.Second}, nil)
		r.OnBacklog("", 0, -time.Minute)
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
	})

	t.Run("SampleIsSystematicAndBounded", func(t *testing.T) {
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
	})

	// ConcurrentHooks counts exactly under contention (and gives
	// the race detector a workout).
	t.Run("ConcurrentHooks", func(t *testing.T) {
		r := newRecorder(t, Config{})
		const goroutines, perG = 8, 1000
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for i := range perG {
					r.OnPublish("relay", g, 1, []time.Duration{time.Duration(i) * time.Millisecond}, nil)
					r.OnRefused(outboxddb.Request{Op: outboxddb.OpKeep, Bucket: g, OneBucket: true})
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
	})

	// RandomStreamsStayValid feeds seeded random event streams,
	// including extreme counts and thousands of latencies, and checks every
	// flushed line with the validator and the counters against a tally.
	t.Run("RandomStreamsStayValid", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 11))
		// report makes one random hook call with n, d and err, adding what it
		// published and enqueued.
		var published, enqueued, latencies float64
		const id = "relay-x"
		reports := []func(r *Recorder, n int, d time.Duration, err error){
			func(r *Recorder, _ int, d time.Duration, err error) { r.OnRound(id, d, lease.Acquisition{}, err) },
			func(r *Recorder, n int, _ time.Duration, _ error) { r.OnLeases(id, n, n/2, n/3) },
			func(r *Recorder, n int, _ time.Duration, _ error) { r.OnLeaseLost(id, n, outbox.LossKeepRefused) },
			func(r *Recorder, n int, _ time.Duration, _ error) { r.OnReleaseSkipped(id, n) },
			func(r *Recorder, n int, _ time.Duration, _ error) { r.OnFetch(id, n%64, n) },
			func(r *Recorder, n int, _ time.Duration, err error) {
				lat := make([]time.Duration, rng.IntN(400))
				for i := range lat {
					lat[i] = time.Duration(rng.Int64N(int64(10 * time.Second)))
				}
				published += float64(n)
				latencies += float64(len(lat))
				r.OnPublish(id, n%64, n, lat, err)
			},
			func(r *Recorder, n int, _ time.Duration, _ error) { r.OnDelete(id, n%64, n) },
			func(r *Recorder, n int, d time.Duration, err error) { r.OnBackoff(id, n%64, d, err) },
			func(r *Recorder, n int, _ time.Duration, _ error) { r.OnHeadRowRetry(id, n%64) },
			func(r *Recorder, n int, _ time.Duration, _ error) {
				r.OnPark(id, outbox.Parking{Bucket: n % 64, Reason: outbox.ParkUnknownTopic})
			},
			func(r *Recorder, n int, _ time.Duration, _ error) { r.OnReplay(id, n%64, n) },
			func(r *Recorder, n int, _ time.Duration, _ error) { r.OnParkedBacklog(id, int64(n)) },
			func(r *Recorder, n int, _ time.Duration, _ error) { r.OnStranded(id, int64(n)) },
			func(r *Recorder, n int, d time.Duration, _ error) { r.OnBacklog(id, int64(n), d) },
			func(r *Recorder, _ int, d time.Duration, err error) { r.OnRetry(id, d, err) },
			func(r *Recorder, _ int, d time.Duration, _ error) {
				r.OnRunEnd(id, outbox.RunResult{Reason: outbox.StopDrained, BudgetUsed: d.Minutes()})
			},
			func(r *Recorder, n int, _ time.Duration, err error) {
				r.OnWakeUp(outbox.WakeUp{Buckets: []int{n % 64}}, err)
			},
			func(r *Recorder, n int, _ time.Duration, _ error) {
				r.OnRefused(outboxddb.Request{Op: outboxddb.OpKeep, RelayID: id, Bucket: n % 64, OneBucket: true})
			},
			func(r *Recorder, _ int, _ time.Duration, err error) {
				r.OnThrottle(outboxddb.Request{Op: outboxddb.OpCommit}, err)
			},
			func(r *Recorder, n int, _ time.Duration, _ error) {
				enqueued += float64(n)
				r.OnEnqueue(n)
			},
			func(r *Recorder, n int, _ time.Duration, err error) { r.OnEnqueueRejected(n, err) },
		}
		lines := 0
		for inv := range 200 {
			maxLatency := 1 + rng.IntN(1500)
			r := newRecorder(t, Config{Outbox: "o", FunctionName: "f", MaxLatencyValues: maxLatency})
			published, enqueued, latencies = 0, 0, 0
			for range rng.IntN(300) {
				var err error
				if rng.IntN(4) == 0 {
					err = errors.New("random failure")
				}
				reports[rng.IntN(len(reports))](r, rng.IntN(1<<20), time.Duration(rng.Int64N(int64(time.Hour))), err)
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
	})
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

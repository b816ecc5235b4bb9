package bench

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"
)

// checkRendering fails the test when a result does not marshal to JSON or
// renders no table with rows.
func checkRendering(t *testing.T, r lab.Report) {
	t.Helper()
	if _, err := json.Marshal(r); err != nil {
		t.Errorf("%T does not marshal: %v", r, err)
	}
	tables := r.Tables()
	if len(tables) == 0 {
		t.Fatalf("%T renders no table", r)
	}
	for _, tb := range tables {
		var b strings.Builder
		if err := tb.Write(&b); err != nil || len(tb.Rows) == 0 {
			t.Errorf("%T table %q: %d rows, %v", r, tb.Title, len(tb.Rows), err)
		}
	}
}

func TestScenario(t *testing.T) {
	// Registry_OnlyRealTimeScenarios: the package registers the real-time
	// scenarios of `spillway bench` and no simulated study, so the CLI, which
	// links it, links none (internal/economy owns the cost and idle studies).
	t.Run("Registry_OnlyRealTimeScenarios", func(t *testing.T) {
		var names []string
		for _, s := range lab.Scenarios(false) {
			names = append(names, s.Name)
		}
		if got := strings.Join(names, ","); got != "throughput,latency,memory" {
			t.Errorf("real-time scenarios %v, want throughput, latency, memory", names)
		}
		if studies := lab.Scenarios(true); len(studies) != 0 {
			t.Errorf("bench registers simulated studies %+v, want none", studies)
		}
	})

	// TimedScenarios_Run runs the timed scenarios on tiny workloads. Their
	// times are never asserted; what they count is.
	t.Run("TimedScenarios_Run", func(t *testing.T) {
		tp, err := RunThroughput(t.Context(), lab.Config{}, ThroughputConfig{
			Messages: 120,
			Cases:    []ThroughputCase{{Relays: 2, Buckets: 8, ValueSize: 1 << 10}},
		})
		if err != nil {
			t.Fatal(err)
		}
		c := tp.Cases[0]
		if c.Messages != 120 || c.Published < 120 || c.Elapsed <= 0 || c.RequestsPerMessage <= 0 {
			t.Errorf("throughput case %+v: want 120 messages published at least once, a duration and requests", c)
		}
		checkRendering(t, tp)

		lat, err := RunLatency(t.Context(), lab.Config{}, LatencyConfig{Samples: 3, MaxGap: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if len(lat.Series) != 2 {
			t.Fatalf("%d latency series, want 2", len(lat.Series))
		}
		for _, s := range lat.Series {
			if s.Samples != 3 || s.Min <= 0 || s.Min > s.P50 || s.P50 > s.P95 || s.P95 > s.P99 || s.P99 > s.Max {
				t.Errorf("series %+v: want 3 ordered, positive samples", s)
			}
		}
		if w := lat.Series[0]; w.Name != SeriesWake || w.RelayRuns != 3 || w.JoinedRuns != 3 {
			t.Errorf("wake-up series %+v: want one joined run per sample", w)
		}
		checkRendering(t, lat)
	})

	t.Run("Summarize_NearestRankPercentiles", func(t *testing.T) {
		lat := make([]time.Duration, 100)
		for i := range lat {
			lat[i] = time.Duration(100-i) * time.Millisecond // 100 … 1 ms
		}
		s := summarize("x", lat)
		if s.Min != time.Millisecond || s.P50 != 50*time.Millisecond || s.P95 != 95*time.Millisecond ||
			s.P99 != 99*time.Millisecond || s.Max != 100*time.Millisecond || s.Mean != 50500*time.Microsecond {
			t.Errorf("summarize = %+v", s)
		}
		if one := summarize("one", []time.Duration{7}); one.P50 != 7 || one.P99 != 7 {
			t.Errorf("one sample: %+v", one)
		}
	})

	// LabelShares_SplitsARealProfileByLabel profiles CPU work done under
	// the spillway label and checks that the profile's samples come back with
	// it; the share is a positive control for the throughput table's split.
	t.Run("LabelShares_SplitsARealProfileByLabel", func(t *testing.T) {
		var sink uint64
		share, err := profileCPU("", "", func() error {
			pprof.Do(t.Context(), pprof.Labels(labelKey, labelSpillway), func(ctx context.Context) {
				x := uint64(88172645463325252)
				for range 400_000_000 {
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
				}
				sink = x
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if share.Unavailable != "" {
			t.Skipf("profiling unavailable: %s", share.Unavailable)
		}
		// The loop runs in this package, under the spillway label: the frame
		// walk charges it to Spillway's own code.
		if share.Samples == 0 || share.Spillway < 50 || share.Backend != 0 || share.InSpillway[CauseRelay] < 50 {
			t.Errorf("share %+v (sink %d): want samples, mostly spillway and its own code, no backend", share, sink)
		}
	})

	t.Run("DescribeMachine_ReadsTheRuntime", func(t *testing.T) {
		m := DescribeMachine()
		if m.CPUs < 1 || m.GOMAXPROCS < 1 || m.GoVersion == "" || m.OS == "" {
			t.Errorf("machine %+v", m)
		}
		if _, err := os.Stat("/proc/meminfo"); err == nil && m.MemoryBytes <= 0 {
			t.Errorf("machine %+v: /proc/meminfo exists but no memory read", m)
		}
	})

	// MemoryScenario_Run drains a tiny workload through the real CLI, built
	// for the test, and checks what the drain's process reports.
	t.Run("MemoryScenario_Run", func(t *testing.T) {
		if testing.Short() {
			t.Skip("builds the spillway CLI")
		}
		exe := filepath.Join(t.TempDir(), "spillway")
		build := exec.CommandContext(t.Context(), "go", "build", "-o", exe, "github.com/spillway-dev/spillway/cmd/spillway")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("build the CLI: %v\n%s", err, out)
		}
		res, err := RunMemory(t.Context(), lab.Config{}, MemoryConfig{
			Messages: 40, Cases: []MemoryCase{{ValueSize: 64 << 10, MemoryMB: 128}}, Command: []string{exe},
		})
		if err != nil {
			t.Fatal(err)
		}
		c := res.Cases[0]
		if c.Published < 40 || c.PeakHeld < 1 || c.PeakHeld > 40 || c.PeakHeapBytes == 0 || c.HeldBudget <= 0 || c.Elapsed <= 0 {
			t.Errorf("memory case %+v: want 40 messages published, 1 to 40 held at once, a heap, a budget and a duration", c)
		}
		if runtime.GOOS == "linux" && c.PeakRSSKB <= 0 {
			t.Errorf("memory case %+v: no peak RSS on Linux", c)
		}
		checkRendering(t, res)
	})
}

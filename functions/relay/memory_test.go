package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// envMeasureRSS opts in to the peak-memory measurement: it stores tens of
// megabytes in the embedded servers and takes a minute.
const envMeasureRSS = "SPILLWAY_MEASURE_RSS"

// TestRelayPeakMemory measures the relay bootstrap's peak resident set
// (VmHWM) under the runtime emulator while it drains a backlog of 16 KB
// messages as fast as it can (every bucket at once, full batches): the
// highest rate this machine drives it at, and the most it holds at once.
// The stack's default relay memory is chosen from it.
func TestRelayPeakMemory(t *testing.T) {
	if os.Getenv(envMeasureRSS) == "" {
		t.Skipf("skipping: set %s=1 to measure the relay's peak memory (stores ~50 MB in the embedded servers)", envMeasureRSS)
	}
	const messages, valueSize = 3000, 16 << 10
	f := newFixture(t)
	table := f.env[outboxconf.EnvTable]
	w, err := outboxddb.NewWriter(f.ddb.Client, outboxddb.WriterOptions{Options: outboxddb.Options{TableName: table}})
	if err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte("v"), valueSize)
	topic := f.kafka.Topic("orders")
	for i := range messages {
		m, err := outbox.NewMessage(topic, fmt.Appendf(nil, "key-%d", i%64), value, outbox.MessageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Enqueue(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	extra := map[string]string{"AWS_LAMBDA_FUNCTION_TIMEOUT": "300"}
	// The settings under study pass through from the test's environment.
	for _, k := range []string{outboxconf.EnvBatchSize, outboxconf.EnvMemoryMB, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "GOMEMLIMIT", "GOGC"} {
		if v := os.Getenv(k); v != "" {
			extra[k] = v
		}
	}
	relay := f.start(t, "relay", extra)
	start := time.Now()
	res := invoke[outboxlambda.RelayResponse](t, relay, []byte(`{"trigger":"schedule"}`))
	took := time.Since(start)
	if res.Published != messages {
		t.Fatalf("published %d of %d: %+v", res.Published, messages, res)
	}
	peak, err := peakRSS(bootstrap(t, "relay"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("relay (%v) drained %d messages of %d KB in %v (%.0f msg/s, %.1f MB/s): peak RSS %.1f MB",
		extra, messages, valueSize>>10, took.Round(time.Millisecond), float64(messages)/took.Seconds(),
		float64(messages*valueSize)/took.Seconds()/1e6, float64(peak)/(1<<20))
}

// peakRSS returns the VmHWM of the running process whose executable is
// bin, in bytes.
func peakRSS(bin string) (int64, error) {
	want, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return 0, err
	}
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		exe, err := os.Readlink(filepath.Join(d, "exe"))
		if err != nil || exe != want {
			continue
		}
		status, err := os.ReadFile(filepath.Join(d, "status"))
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("no running process of %s", bin)
}

package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// MemoryCase is one value size drained by one relay at one memory size.
type MemoryCase struct {
	ValueSize, MemoryMB int
}

// MemoryConfig parameterises the memory measurement. Zero fields take
// their defaults.
type MemoryConfig struct {
	// Messages per case. Default: about 160 MB of values, at least 400
	// and at most 5,000 messages.
	Messages int
	// Cases to measure. Default 1 KB, 64 KB and 395 KB values (395 KB and
	// the headers fill DynamoDB's 400 KB item) at 128, 256 and 512 MB.
	Cases []MemoryCase
	// Buckets the messages spread over. Default 8.
	Buckets int
	// Command runs the spillway CLI whose drain is measured. Default: this
	// executable, which `spillway bench` is.
	Command []string
	// Timeout bounds one case. Default 5 min.
	Timeout time.Duration
}

// DefaultMemoryValueSizes and DefaultMemoryMB span the scenario's default
// table: small, medium and the largest values an item holds, at the
// stack's default relay memory and two larger sizes.
var (
	DefaultMemoryValueSizes = []int{1 << 10, 64 << 10, 395 << 10}
	DefaultMemoryMB         = []int{128, 256, 512}
)

// RSSTarget is the share of the function's memory the relay's peak RSS
// should stay under (issue 37): headroom for what the sandbox holds beyond
// the Go process.
const RSSTarget = 0.85

func (c MemoryConfig) withDefaults() (MemoryConfig, error) {
	c.Buckets = cmp.Or(c.Buckets, 8)
	c.Timeout = cmp.Or(c.Timeout, 5*time.Minute)
	if len(c.Cases) == 0 {
		for _, size := range DefaultMemoryValueSizes {
			for _, mb := range DefaultMemoryMB {
				c.Cases = append(c.Cases, MemoryCase{ValueSize: size, MemoryMB: mb})
			}
		}
	}
	if len(c.Command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return c, fmt.Errorf("bench: memory: find the spillway executable: %w", err)
		}
		c.Command = []string{exe}
	}
	return c, nil
}

// messagesFor is the default message count of a value size.
func messagesFor(valueSize int) int {
	return min(max(160<<20/max(valueSize, 1), 400), 5000)
}

// MemoryResult holds one measurement per case.
type MemoryResult struct {
	Config MemoryConfig
	Cases  []CaseMemory
}

// CaseMemory is what one case measured in the drain's process.
type CaseMemory struct {
	MemoryCase
	Messages, Published int
	// PeakRSSKB is the drain process's peak resident set (VmHWM).
	PeakRSSKB int64
	// PeakHeapBytes is the largest sampled size of its heap's objects.
	PeakHeapBytes uint64
	// PeakHeld is the most messages fetched and not yet deleted at once.
	PeakHeld int64
	// HeldBudget is the relay's MaxHeldBytes at this memory.
	HeldBudget int64
	Elapsed    time.Duration
	PerSecond  float64
	// MBPerSecond counts the values' bytes.
	MBPerSecond float64
}

// RSSShare is the peak RSS as a share of the memory.
func (c CaseMemory) RSSShare() float64 {
	return float64(c.PeakRSSKB) / float64(c.MemoryMB<<10)
}

var memoryScenario = lab.Scenario{
	Name:    "memory",
	Summary: "peak RSS, Go heap and messages held by one relay draining 1 KB, 64 KB and 395 KB values at 128, 256 and 512 MB (a drain process of its own)",
	Run: func(ctx context.Context, env lab.Config) (lab.Report, error) {
		cfg := MemoryConfig{Messages: env.Messages}
		if env.DrainCommand != "" {
			cfg.Command = []string{env.DrainCommand}
		}
		sizes, mbs := env.ValueSizes, env.MemoryMB
		if len(sizes) == 0 {
			sizes = DefaultMemoryValueSizes
		}
		if len(mbs) == 0 {
			mbs = DefaultMemoryMB
		}
		for _, size := range sizes {
			for _, mb := range mbs {
				cfg.Cases = append(cfg.Cases, MemoryCase{ValueSize: size, MemoryMB: mb})
			}
		}
		return RunMemory(ctx, env, cfg)
	},
}

// RunMemory measures every case: it enqueues the messages on fresh
// backends, then drains them with `spillway drain --relays 1 --memory-mb
// M` in a process of its own, as Lambda runs a relay alone in its sandbox,
// and reads that process's peaks from its report.
func RunMemory(ctx context.Context, env lab.Config, cfg MemoryConfig) (MemoryResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return MemoryResult{}, err
	}
	res := MemoryResult{Config: cfg}
	for _, c := range cfg.Cases {
		if c.ValueSize < 1 || c.MemoryMB < 1 {
			return res, fmt.Errorf("bench: memory case %+v: want a value size and memory >= 1", c)
		}
		n := cmp.Or(cfg.Messages, messagesFor(c.ValueSize))
		env.Progressf("memory: %d-byte values at %d MB, %d messages", c.ValueSize, c.MemoryMB, n)
		cm, err := measureMemory(ctx, env, cfg, c, n)
		if err != nil {
			return res, fmt.Errorf("bench: memory %d-byte values at %d MB: %w", c.ValueSize, c.MemoryMB, err)
		}
		res.Cases = append(res.Cases, cm)
	}
	return res, nil
}

func measureMemory(ctx context.Context, env lab.Config, cfg MemoryConfig, c MemoryCase, n int) (cm CaseMemory, err error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	b, err := StartBackends(ctx, env)
	if err != nil {
		return cm, err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	opts, err := b.NewTable(ctx, cfg.Buckets, outbox.SystemClock{})
	if err != nil {
		return cm, err
	}
	if err := prefillLarge(ctx, b, opts, c.ValueSize, n); err != nil {
		return cm, err
	}
	out, err := drainProcess(ctx, cfg, b, opts, c.MemoryMB)
	if err != nil {
		return cm, err
	}
	if out.Pending != 0 || out.Published < int64(n) {
		return cm, fmt.Errorf("drain published %d of %d, %d pending", out.Published, n, out.Pending)
	}
	cm = CaseMemory{
		MemoryCase: c, Messages: n, Published: int(out.Published),
		PeakRSSKB: out.Memory.PeakRSSKB, PeakHeapBytes: out.Memory.PeakHeapBytes, PeakHeld: out.Memory.PeakHeldMessages,
		HeldBudget: outbox.MemoryBudgetFor(int64(c.MemoryMB) << 20).MaxHeldBytes,
		Elapsed:    time.Duration(out.Elapsed * float64(time.Second)),
	}
	cm.PerSecond = float64(n) / out.Elapsed
	cm.MBPerSecond = cm.PerSecond * float64(c.ValueSize) / 1e6
	return cm, nil
}

// benchHeaders go with every message, as a traced producer's do: the
// item's size counts them.
var benchHeaders = []outbox.Header{
	{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
	{Key: "content-type", Value: []byte("application/octet-stream")},
	{Key: "source", Value: []byte("spillway-bench")},
}

// prefillLarge enqueues n messages with headers in transactions that stay
// under DynamoDB's 4 MB per transaction.
func prefillLarge(ctx context.Context, b *Backends, opts outboxddb.Options, valueSize, n int) error {
	writer, err := outboxddb.NewWriter(b.DynamoDB.Client, outboxddb.WriterOptions{Options: opts})
	if err != nil {
		return err
	}
	w := NewWorkload(b.Topic, valueSize, opts.BucketCount)
	per := min(outboxddb.MaxTransactionItems, max(1, (3<<20)/(valueSize+1<<10)))
	for first := 0; first < n; first += per {
		msgs := make([]outbox.Message, min(per, n-first))
		for i := range msgs {
			m, err := outbox.NewMessage(b.Topic, Key(first+i), w.value, outbox.MessageOptions{Headers: benchHeaders})
			if err != nil {
				return fmt.Errorf("bench: build message %d: %w", first+i, err)
			}
			msgs[i] = m
		}
		if _, err := writer.EnqueueBatch(ctx, msgs); err != nil {
			return fmt.Errorf("enqueue messages %d..%d: %w", first, first+len(msgs)-1, err)
		}
	}
	return nil
}

// drainOutput is the part of `spillway drain --json`'s report the
// scenario reads.
type drainOutput struct {
	Published int64   `json:"published"`
	Pending   int64   `json:"pending"`
	Elapsed   float64 `json:"elapsedSeconds"`
	Memory    struct {
		PeakRSSKB        int64  `json:"peakRSSKB"`
		PeakHeapBytes    uint64 `json:"peakHeapBytes"`
		PeakHeldMessages int64  `json:"peakHeldMessages"`
	} `json:"memory"`
}

// drainProcess drains the table with one relay in a process of its own.
func drainProcess(ctx context.Context, cfg MemoryConfig, b *Backends, opts outboxddb.Options, memoryMB int) (drainOutput, error) {
	args := append(slices.Clone(cfg.Command[1:]), "drain", "--json", "--progress", "0", "--relays", "1",
		"--memory-mb", strconv.Itoa(memoryMB), "--timeout", cfg.Timeout.String(),
		"--dynamodb-endpoint", b.DynamoDB.Endpoint, "--brokers", strings.Join(b.Kafka.Brokers, ","),
		"--table", opts.TableName, "--key-prefix", opts.KeyPrefix, "--bucket-count", strconv.Itoa(opts.BucketCount))
	cmd := exec.CommandContext(ctx, cfg.Command[0], args...)
	// The process sizes its memory from --memory-mb alone.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOMEMLIMIT=") && !strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "SPILLWAY_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return drainOutput{}, fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(stderr.String()))
	}
	var out drainOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return out, fmt.Errorf("read the drain's report %q: %w", stdout.String(), err)
	}
	// The drain's own VmHWM, not the kernel's rusage of the child: a child
	// of a Go process inherits the parent's RSS in its ru_maxrss (the
	// parent's pages count until the exec), and the bench holds the
	// embedded backends' data.
	return out, nil
}

// Tables renders the memory table.
func (r MemoryResult) Tables() []lab.Table {
	t := lab.Table{
		Title:  "Memory: one relay drains the outbox in a process of its own (spillway drain --relays 1 --memory-mb M)",
		Header: []string{"value", "memory", "messages", "peak RSS", "of memory", "peak heap", "held at once", "held budget", "msgs/s", "MB/s"},
	}
	for _, c := range r.Cases {
		t.Rows = append(t.Rows, []string{
			fmtSize(c.ValueSize), fmt.Sprintf("%d MB", c.MemoryMB), fmtInt(c.Messages),
			fmt.Sprintf("%.1f MB", float64(c.PeakRSSKB)/1024), fmtPct(100 * c.RSSShare()),
			fmt.Sprintf("%.1f MB", float64(c.PeakHeapBytes)/(1<<20)), fmt.Sprint(c.PeakHeld),
			fmt.Sprintf("%.1f MB", float64(c.HeldBudget)/(1<<20)),
			fmtF(c.PerSecond, 0), fmtF(c.MBPerSecond, 1),
		})
	}
	t.Notes = []string{
		fmt.Sprintf("%d buckets; every message carries %d headers; the drain sets GOMEMLIMIT from its memory as the relay function does (outbox.MemoryBudget.SoftLimit).", r.Config.Buckets, len(benchHeaders)),
		fmt.Sprintf("peak RSS: the drain process's VmHWM (Lambda counts the sandbox's memory); the target is %.0f%% of the memory.", 100*RSSTarget),
		"peak heap: the largest sampled size of the Go heap's objects (live and unswept); held at once: messages fetched and not yet deleted.",
		"held budget: the relay's MaxHeldBytes at that memory (outbox.MemoryBudgetFor). The backends run in the bench's process.",
	}
	return []lab.Table{t}
}

// Package lab is the one registry of Spillway's measured scenarios, with
// their one configuration shape (Config) and report shape (Report). A
// scenario exists in a binary that imports its package (each registers
// itself from init), so the CLI, which links only the real-time ones
// (internal/bench), never lists a simulated study nor links testing.
// docs/development.md, "The lab", states how simulated studies run and how
// lab.Sim, lab.Client and lab.RelayFunction serve them.
package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// Config is what every scenario is given. The zero value runs on the
// embedded backends with each scenario's defaults; a simulated study runs
// at its default seed, the one its table in docs/lab/ records.
type Config struct {
	// DynamoDBEndpoint is an external DynamoDB endpoint for the real-time
	// scenarios; empty runs the embedded server.
	DynamoDBEndpoint string
	// Brokers are external Kafka seed brokers for the real-time scenarios;
	// empty runs the embedded cluster.
	Brokers []string
	// Messages sizes the real-time scenarios (messages per throughput case,
	// samples per latency series); zero takes each scenario's default.
	Messages int
	// ValueSizes and MemoryMB choose the memory scenario's cases (every
	// value size at every memory, in bytes and MB); empty takes its
	// defaults.
	ValueSizes, MemoryMB []int
	// DrainCommand runs the spillway CLI whose drain the memory scenario
	// measures, to compare releases; empty runs the bench's own executable.
	DrainCommand string
	// ProfileDir, when set, receives the labelled CPU profile of every
	// throughput case.
	ProfileDir string
	// Cases picks the throughput scenario's cases by name (r1-b8-v1024:
	// relays, buckets, value bytes); empty runs all of them.
	Cases []string
	// RoundTrips are the delays the embedded backends add to every request
	// in the real-time scenarios, as on AWS; zero adds none.
	RoundTrips RoundTrips
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
	// Settle waits until every other goroutine of the simulation's bubble
	// is durably blocked (synctest.Wait). The lab's tests set it; a
	// simulated study refuses to run without it (ErrNotInBubble), because
	// outside a bubble its clock would be the wall clock.
	Settle func()
}

// RoundTrips are per-request delays of the embedded DynamoDB and Kafka.
type RoundTrips struct {
	// DynamoDB is the mean delay of a DynamoDB request, Kafka of a
	// produce or fetch request.
	DynamoDB, Kafka time.Duration
	// Jitter spreads each delay uniformly over mean × (1 ± Jitter), Jitter
	// in [0, 1].
	Jitter float64
	// Seed seeds the draws, so a run's delays repeat.
	Seed uint64
}

// String describes the delays for a report's header.
func (rt RoundTrips) String() string {
	if rt.DynamoDB <= 0 && rt.Kafka <= 0 {
		return "none"
	}
	return fmt.Sprintf("DynamoDB %v a request, Kafka %v a produce or fetch, jitter ±%g%%, seed %d", rt.DynamoDB, rt.Kafka, rt.Jitter*100, rt.Seed)
}

// Progressf writes one progress line, if c.Progress is set.
func (c Config) Progressf(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, format+"\n", args...)
	}
}

// ErrNotInBubble is returned by a simulated study run without Config.Settle,
// that is, outside the lab's synctest bubble.
var ErrNotInBubble = errors.New("lab: a simulated study runs only inside a testing/synctest bubble (go test ./internal/lab -run TestStudies, or make lab)")

// Report is what a scenario returns: a struct of figures that marshals to
// JSON, and its rendering as text tables. A simulated study's tables hold
// only what the simulation fixes (counts, simulated times, prices), never a
// wall-clock measurement, so that they compare exactly run to run.
type Report interface {
	Tables() []Table
}

// Scenario is one named measurement.
type Scenario struct {
	// Name selects the scenario (`spillway bench --scenario NAME`, `make
	// lab SCENARIO=NAME`).
	Name string
	// Summary says in one line what it measures; `spillway bench --help`
	// lists it beside the name.
	Summary string
	// Simulated marks a study that runs only in a synctest bubble.
	Simulated bool
	// Run measures and returns the report.
	Run func(ctx context.Context, cfg Config) (Report, error)
}

var registry struct {
	mu        sync.Mutex
	scenarios []Scenario
}

// Register adds a scenario, in registration order. Call it from an init
// function; a duplicate or empty name panics, as it is a programming error.
func Register(s Scenario) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if s.Name == "" || s.Run == nil {
		panic("lab: Register needs a name and a Run function")
	}
	if slices.ContainsFunc(registry.scenarios, func(o Scenario) bool { return o.Name == s.Name }) {
		panic("lab: scenario " + s.Name + " registered twice")
	}
	registry.scenarios = append(registry.scenarios, s)
}

// Scenarios returns every registered scenario of the given kind (simulated
// or real-time), in registration order.
func Scenarios(simulated bool) []Scenario {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	var out []Scenario
	for _, s := range registry.scenarios {
		if s.Simulated == simulated {
			out = append(out, s)
		}
	}
	return out
}

// RegisterStudy registers a simulated study whose run takes the progress
// writer, refusing to run outside a bubble (ErrNotInBubble).
func RegisterStudy[R Report](name, summary string, run func(ctx context.Context, progress io.Writer) (R, error)) {
	Register(Scenario{
		Name: name, Summary: summary, Simulated: true,
		Run: func(ctx context.Context, cfg Config) (Report, error) {
			if cfg.Settle == nil {
				return nil, ErrNotInBubble
			}
			r, err := run(ctx, cfg.Progress)
			if err != nil {
				return nil, err
			}
			return r, nil
		},
	})
}

// Lookup returns the scenario registered under name.
func Lookup(name string) (Scenario, bool) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	i := slices.IndexFunc(registry.scenarios, func(s Scenario) bool { return s.Name == name })
	if i < 0 {
		return Scenario{}, false
	}
	return registry.scenarios[i], true
}

package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
)

// Env is what every scenario shares: where the backends are, how large the
// timed workloads are, and where profiles and progress go. The zero value
// runs everything on the embedded backends with each scenario's defaults.
type Env struct {
	// DynamoDBEndpoint is an external DynamoDB endpoint (DynamoDB Local, a
	// regional endpoint); empty runs the embedded server.
	DynamoDBEndpoint string
	// Brokers are external Kafka seed brokers; empty runs the embedded
	// cluster.
	Brokers []string
	// Messages sizes the timed scenarios (messages per throughput case,
	// samples per latency series); zero takes each scenario's default.
	// Counted scenarios keep their fixed workloads so their figures stay
	// comparable with the asserted ones.
	Messages int
	// ProfileDir, when set, receives the labelled CPU profile of every
	// throughput case (component=spillway or component=backend).
	ProfileDir string
	// PlotFile, when set, receives the picture of the scenarios that draw
	// one (SVG).
	PlotFile string
	// Progress receives one line per step; nil discards them.
	Progress io.Writer
}

func (e Env) progressf(format string, args ...any) {
	if e.Progress != nil {
		fmt.Fprintf(e.Progress, format+"\n", args...)
	}
}

// Result is what a scenario returns: a struct of figures that marshals to
// JSON, and its rendering as text tables.
type Result interface {
	Tables() []Table
}

// Scenario is one named measurement.
type Scenario struct {
	// Name selects the scenario (`spillway bench --scenario NAME`).
	Name string
	// Summary says in one line what it measures.
	Summary string
	// Run measures and returns the result.
	Run func(ctx context.Context, env Env) (Result, error)
}

var registry = struct {
	mu        sync.Mutex
	scenarios []Scenario
}{scenarios: []Scenario{throughputScenario, latencyScenario}}

// Register adds a scenario after the built-in ones (throughput, latency),
// in registration order. Call it from an init function; a
// duplicate or empty name panics, as it is a programming error.
func Register(s Scenario) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if s.Name == "" || s.Run == nil {
		panic("bench: Register needs a name and a Run function")
	}
	if slices.ContainsFunc(registry.scenarios, func(o Scenario) bool { return o.Name == s.Name }) {
		panic("bench: scenario " + s.Name + " registered twice")
	}
	registry.scenarios = append(registry.scenarios, s)
}

// Scenarios returns every registered scenario in running order.
func Scenarios() []Scenario {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return slices.Clone(registry.scenarios)
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

package main

import (
	"context"

	"github.com/spillway-dev/spillway/internal/bench"
	"github.com/spillway-dev/spillway/internal/steady"
)

func init() {
	bench.Register(bench.Scenario{
		Name:    "steady",
		Summary: "steady traffic on Lambda: lease churn per message, wake-ups, handovers and latency over 10 simulated minutes",
		Run:     runSteadyScenario,
	})
}

// steadyResult renders the steady scenario's report as a bench table. It
// marshals as the report itself.
type steadyResult struct {
	steady.Report
}

func (r steadyResult) Tables() []bench.Table {
	return []bench.Table{{
		Title:  r.Title(),
		Header: []string{"figure", "value", "target"},
		Rows:   r.Rows(),
		Notes:  r.Notes(),
	}}
}

// runSteadyScenario runs the steady scenario with the relay function's
// defaults. Its workload is fixed (env.Messages does not apply) and Kafka is
// simulated in memory (env.Brokers does not apply): the scenario counts
// DynamoDB coordination requests, not Kafka's cost.
func runSteadyScenario(ctx context.Context, env bench.Env) (bench.Result, error) {
	rep, err := steady.Run(ctx, steady.Config{DynamoDBEndpoint: env.DynamoDBEndpoint, Progress: env.Progress})
	if err != nil {
		return nil, err
	}
	return steadyResult{rep}, nil
}

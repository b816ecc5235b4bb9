//go:build !spillway.ops

package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spillway-dev/spillway/internal/bench"
	"github.com/spillway-dev/spillway/internal/economy"
	"github.com/spillway-dev/spillway/internal/scale"
	"github.com/spillway-dev/spillway/internal/steady"
)

// simScenarios are the bench scenarios built on the simulations. They run
// in simulated time on the embedded DynamoDB server (or --dynamodb-endpoint)
// with Kafka simulated in memory, on fixed workloads: env.Messages and
// env.Brokers do not apply. They run after the library's own scenarios, in
// this order.
var simScenarios = []bench.Scenario{
	{
		Name:    "economy",
		Summary: "the whole AWS bill per month at 0, 0.1, 1, 10 and 100 msg/s: Spillway's default deployment measured, an always-on Fargate relay and the Streams → Lambda pattern",
		Run:     runEconomyScenario,
	},
	{
		Name:    "scale",
		Summary: "the coordination partition with 256 and 1,024 buckets and 16 to 128 relays in hold mode, and a burst of 1,000 commits waking up to 128 relays",
		// The study's model is checked against the embedded server, never
		// an external endpoint.
		Run: func(ctx context.Context, env bench.Env) (bench.Result, error) {
			return asResult(scale.RunStudy(ctx, scale.Config{}, env.Progress))
		},
	},
	{
		Name:    "steady",
		Summary: "steady traffic on Lambda: lease churn per message, wake-ups, handovers and latency over 10 simulated minutes",
		Run: func(ctx context.Context, env bench.Env) (bench.Result, error) {
			return asResult(steady.Run(ctx, steady.Config{DynamoDBEndpoint: env.DynamoDBEndpoint, Progress: env.Progress}))
		},
	},
}

// asResult turns a scenario's typed result into the bench's interface,
// keeping a nil result for an error.
func asResult[R bench.Result](r R, err error) (bench.Result, error) {
	if err != nil {
		return nil, err
	}
	return r, nil
}

// runEconomyScenario runs every rate of the table on the simulated Lambda
// service and prices it; with env.PlotFile set it also draws the picture.
func runEconomyScenario(ctx context.Context, env bench.Env) (bench.Result, error) {
	res, err := economy.Run(ctx, economy.Config{DynamoDBEndpoint: env.DynamoDBEndpoint, Progress: env.Progress})
	if err != nil {
		return nil, err
	}
	if env.PlotFile != "" {
		if err := writePlot(env.PlotFile, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func writePlot(path string, res economy.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("economy plot: %w", err)
	}
	if err := res.WritePlot(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

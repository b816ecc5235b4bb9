package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spillway-dev/spillway/internal/bench"
	"github.com/spillway-dev/spillway/internal/economy"
)

func init() {
	bench.Register(bench.Scenario{
		Name:    "economy",
		Summary: "the whole AWS bill per month at 0, 0.1, 1, 10 and 100 msg/s: Spillway's default deployment measured, an always-on Fargate relay and the Streams → Lambda pattern",
		Run:     runEconomyScenario,
	})
}

// economyResult renders the economy table; it marshals as the result
// itself (one object per rate, deployment and part).
type economyResult struct {
	economy.Result
}

// runEconomyScenario runs every rate of the table on the simulated Lambda
// service and prices it; with env.PlotFile set it also draws the picture.
// Kafka is simulated in memory (env.Brokers does not apply) and the
// workload is fixed (env.Messages does not apply).
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
	return economyResult{res}, nil
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

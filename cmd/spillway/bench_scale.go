package main

import (
	"context"

	"github.com/spillway-dev/spillway/internal/bench"
	"github.com/spillway-dev/spillway/internal/scale"
)

func init() {
	bench.Register(bench.Scenario{
		Name:    "scale",
		Summary: "the coordination partition with 256 and 1,024 buckets and 16 to 128 relays in hold mode, and a burst of 1,000 commits waking up to 128 relays",
		Run:     runScaleScenario,
	})
}

// scaleResult renders the study as a bench table; it marshals as the study.
type scaleResult struct {
	scale.Study
}

func (r scaleResult) Tables() []bench.Table {
	return []bench.Table{
		{Title: r.Title(), Header: r.Header(), Rows: r.Rows(), Notes: r.Notes()},
		{Title: r.Burst.Title(), Header: []string{"figure", "value"}, Rows: r.Burst.Rows(), Notes: r.Burst.Notes()},
	}
}

// runScaleScenario runs the study with the relay's default timings. It
// simulates time and counts requests: env.Messages and env.Brokers do not
// apply, and the model is checked against the embedded server, never an
// external endpoint.
func runScaleScenario(ctx context.Context, env bench.Env) (bench.Result, error) {
	st, err := scale.RunStudy(ctx, scale.Config{}, env.Progress)
	if err != nil {
		return nil, err
	}
	return scaleResult{st}, nil
}

package economy

import (
	"context"

	"github.com/spillway-dev/spillway/internal/lab"
)

func init() {
	lab.Register(lab.Scenario{
		Name:      "economy",
		Summary:   "the whole AWS bill per month at 0, 0.1, 1, 10 and 100 msg/s: Spillway's default deployment measured, an always-on Fargate relay and the Streams → Lambda pattern",
		Simulated: true,
		Run: func(ctx context.Context, cfg lab.Config) (lab.Report, error) {
			if cfg.Settle == nil {
				return nil, lab.ErrNotInBubble
			}
			res, err := Run(ctx, Config{Seed: cfg.Seed, Progress: cfg.Progress})
			if err != nil {
				return nil, err
			}
			return res, nil
		},
	})
}

package steady

import (
	"context"

	"github.com/spillway-dev/spillway/internal/lab"
)

func init() {
	lab.Register(lab.Scenario{
		Name:      "steady",
		Summary:   "steady traffic on Lambda: lease churn per message, wake-ups, handovers and latency over 10 simulated minutes",
		Simulated: true,
		Run: func(ctx context.Context, cfg lab.Config) (lab.Report, error) {
			if cfg.Settle == nil {
				return nil, lab.ErrNotInBubble
			}
			rep, err := Run(ctx, Config{Seed: cfg.Seed, Progress: cfg.Progress})
			if err != nil {
				return nil, err
			}
			return rep, nil
		},
	})
}

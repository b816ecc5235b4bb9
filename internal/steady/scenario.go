package steady

import (
	"context"
	"io"

	"github.com/spillway-dev/spillway/internal/lab"
)

func init() {
	lab.RegisterStudy("steady", "steady traffic on Lambda: lease churn per message, wake-ups, handovers and latency over 10 simulated minutes",
		func(ctx context.Context, progress io.Writer) (Report, error) {
			return Run(ctx, Config{Progress: progress})
		})
}

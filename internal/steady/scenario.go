package steady

import (
	"context"
	"io"

	"github.com/spillway-dev/spillway/internal/lab"
)

func init() {
	lab.RegisterStudy("steady", "steady traffic on Lambda with the doorbell: lease churn per message, wake-ups, rings, handovers and latency over 10 simulated minutes",
		func(ctx context.Context, progress io.Writer) (Report, error) {
			return Run(ctx, Config{Doorbell: true, Progress: progress})
		})
}

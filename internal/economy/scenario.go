package economy

import (
	"context"
	"io"
	"testing/synctest"

	"github.com/spillway-dev/spillway/internal/lab"
)

// The bill studies, from a message's DynamoDB requests to the whole bill:
// the per-message cost of every enqueue path and of relaying, the cost of
// an idle deployment, and the monthly bill per traffic rate.
func init() {
	lab.RegisterStudy("cost", "DynamoDB requests and units per message for each enqueue path and for relaying, next to the seed's model",
		func(ctx context.Context, progress io.Writer) (CostResult, error) {
			return RunCost(ctx, lab.Config{Settle: synctest.Wait, Progress: progress}, CostConfig{})
		})
	lab.RegisterStudy("idle", "request units per hour of an idle 8-bucket deployment: drain + schedule, hold, always-on (simulated hour)",
		func(ctx context.Context, progress io.Writer) (IdleResult, error) {
			return RunIdle(ctx, lab.Config{Settle: synctest.Wait, Progress: progress}, IdleConfig{})
		})
	lab.RegisterStudy("economy", "the whole AWS bill per month at 0, 0.1, 1, 10 and 100 msg/s: Spillway's deployment with the doorbell measured, an always-on Fargate relay and the Streams → Lambda pattern; latency and bill by how a relay learns of a commit",
		func(ctx context.Context, progress io.Writer) (Result, error) {
			return Run(ctx, Config{Doorbell: true, CurveRates: DefaultCurveRates, Progress: progress})
		})
}

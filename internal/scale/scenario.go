package scale

import (
	"context"
	"io"

	"github.com/spillway-dev/spillway/internal/lab"
)

func init() {
	lab.RegisterStudy("scale", "the coordination partition of fleets of 16 to 128 relays over 256 and 1,024 buckets in hold mode, and a burst of 1,000 wake-ups scaling the relay function out and back in",
		func(ctx context.Context, progress io.Writer) (Study, error) {
			return RunStudy(ctx, Config{}, progress)
		})
}

//go:build !spillway.nootel

package outboxlambda

import (
	"cmp"
	"context"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxobs/otel"
)

func init() {
	tracingModes[outboxconf.TracingOTel] = func(ctx context.Context, getenv func(string) string) (Tracing, error) {
		return otel.New(ctx, otel.Config{ServiceName: cmp.Or(getenv(EnvFunctionName), "spillway"), Getenv: getenv})
	}
}

//go:build !spillway.nootel

package outboxlambda

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxobs/otel"
)

func init() {
	tracingModes[outboxconf.TracingOTel] = func(ctx context.Context, getenv func(string) string, log *slog.Logger) (Tracing, error) {
		p, err := otel.New(ctx, otel.Config{ServiceName: cmp.Or(getenv(EnvFunctionName), "spillway"), Getenv: getenv})
		if err != nil {
			return nil, err
		}
		return OTelTracing{Provider: p, Logger: log}, nil
	}
}

// OTelTracing is the otel mode's Tracing: Provider's spans, exported when
// each invocation ends, and an export that fails then logged to Logger
// (default slog.Default()).
type OTelTracing struct {
	*otel.Provider
	Logger *slog.Logger
}

// StartInvocation implements Tracing.
func (o OTelTracing) StartInvocation(ctx context.Context, name string) (context.Context, func(error)) {
	ctx, end := o.Provider.StartInvocation(ctx, name)
	return ctx, func(err error) {
		if ferr := end(err); ferr != nil {
			cmp.Or(o.Logger, slog.Default()).WarnContext(ctx, "exporting the invocation's spans failed", "error", ferr)
		}
	}
}

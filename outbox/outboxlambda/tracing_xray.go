//go:build !spillway.noxray

package outboxlambda

import (
	"context"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxobs/xray"
)

func init() {
	tracingModes[outboxconf.TracingXRay] = func(context.Context, func(string) string, *slog.Logger) (Tracing, error) {
		return xrayTracing{}, nil
	}
}

// xrayTracing traces with the X-Ray SDK: subsegments of the function's
// segment, which the Lambda runtime opens and sends itself, so an
// invocation needs no root span and no flush.
type xrayTracing struct{}

func (xrayTracing) InstrumentAWS(cfg *aws.Config) { xray.InstrumentAWS(cfg) }
func (xrayTracing) Tracer() outbox.Tracer         { return xray.Tracer{} }
func (xrayTracing) StartInvocation(ctx context.Context, _ string) (context.Context, func(error)) {
	return ctx, func(error) {}
}
func (xrayTracing) TraceContext(ctx context.Context) outbox.TraceContext {
	return xray.TraceContext(ctx)
}

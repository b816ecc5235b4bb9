package outboxlambda

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// Tracing is what a tracing mode (SPILLWAY_TRACING) gives the functions.
// OTelTracing wraps an *otel.Provider; NewTracing builds the mode's value.
type Tracing interface {
	// InstrumentAWS makes the AWS SDK clients built from cfg trace their
	// calls.
	InstrumentAWS(cfg *aws.Config)
	// Tracer opens the relay's and the enqueue function's spans.
	Tracer() outbox.Tracer
	// StartInvocation opens what one invocation's spans hang under and
	// returns the function that closes it with the invocation's error and
	// exports what the mode buffers; the handler calls it before
	// returning, because Lambda may freeze the process right after. The
	// end returns nothing: a failed export is the mode's to log, and never
	// takes the place of the invocation's result (a consumer that returned
	// the export's nil for a failed batch would have its offsets
	// committed).
	StartInvocation(ctx context.Context, name string) (context.Context, func(err error))
	// TraceContext returns the trace context to store on messages
	// enqueued under ctx: the caller's (outbox.TraceContextFrom), completed
	// from the span in ctx.
	TraceContext(ctx context.Context) outbox.TraceContext
}

// tracingFactory builds a mode's Tracing for the function named by getenv,
// logging to log what it reports.
type tracingFactory func(ctx context.Context, getenv func(string) string, log *slog.Logger) (Tracing, error)

// tracingModes holds the modes compiled into this binary: off always, xray
// and otel unless the build tags spillway.noxray or spillway.nootel leave
// them (and their SDKs) out.
var tracingModes = map[string]tracingFactory{
	outboxconf.TracingOff: func(context.Context, func(string) string, *slog.Logger) (Tracing, error) { return offTracing{}, nil },
}

// TracingModes lists the modes compiled into this binary, sorted.
func TracingModes() []string {
	modes := make([]string, 0, len(tracingModes))
	for m := range tracingModes {
		modes = append(modes, m)
	}
	slices.Sort(modes)
	return modes
}

// NewTracing builds the tracing of mode (a Config.Tracing value), which
// logs a failed export to log. A mode this binary was built without is a
// misconfiguration.
func NewTracing(ctx context.Context, mode string, getenv func(string) string, log *slog.Logger) (Tracing, error) {
	f, ok := tracingModes[mode]
	if !ok {
		return nil, &ConfigError{Variable: outboxconf.EnvTracing, Value: mode, Problem: tracingProblem(mode)}
	}
	return f(ctx, getenv, log)
}

// tracingProblem says why mode cannot be used.
func tracingProblem(mode string) string {
	switch mode {
	case outboxconf.TracingXRay, outboxconf.TracingOTel:
		return "this binary was built without it (build tag spillway.no" + mode +
			"); build without that tag, or use one of " + strings.Join(TracingModes(), ", ")
	}
	return "must be one of " + strings.Join([]string{outboxconf.TracingXRay, outboxconf.TracingOTel, outboxconf.TracingOff}, ", ")
}

// offTracing records nothing; messages still carry the caller's trace
// context.
type offTracing struct{}

func (offTracing) InstrumentAWS(*aws.Config) {}
func (offTracing) Tracer() outbox.Tracer     { return outbox.NoopTracer{} }
func (offTracing) StartInvocation(ctx context.Context, _ string) (context.Context, func(error)) {
	return ctx, func(error) {}
}
func (offTracing) TraceContext(ctx context.Context) outbox.TraceContext {
	return outbox.TraceContextFrom(ctx)
}

// invocationTrace names one invocation's root span; the zero value traces
// nothing.
type invocationTrace struct {
	tracing Tracing
	name    string
}

// traced runs handle under the invocation's root span and returns what
// handle returned.
func traced[T any](ctx context.Context, i invocationTrace, handle func(context.Context) (T, error)) (T, error) {
	if i.tracing == nil {
		return handle(ctx)
	}
	ctx, end := i.tracing.StartInvocation(ctx, i.name)
	v, err := handle(ctx)
	end(err)
	return v, err
}

package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxobs/otel"
)

// runTracing is `run --tracing`: off, or OpenTelemetry exporting to an
// OTLP/HTTP receiver on loopback. The zero value is off.
type runTracing struct {
	recv     *outboxlocal.OTLPReceiver
	provider *otel.Provider
}

func startRunTracing(ctx context.Context, mode string) (*runTracing, error) {
	switch mode {
	case outboxconf.TracingOff:
		return &runTracing{}, nil
	case outboxconf.TracingOTel:
	default:
		return nil, usagef("--tracing must be %s or %s, got %q", outboxconf.TracingOff, outboxconf.TracingOTel, mode)
	}
	recv, err := outboxlocal.StartOTLPReceiver()
	if err != nil {
		return nil, err
	}
	p, err := otel.New(ctx, otel.Config{ServiceName: "spillway-run", Endpoint: recv.URL})
	if err != nil {
		_ = recv.Close()
		return nil, err
	}
	return &runTracing{recv: recv, provider: p}, nil
}

// tracer and tracing configure the handlers; nil when off.
func (t *runTracing) tracer() outbox.Tracer {
	if t.provider == nil {
		return nil
	}
	return t.provider.Tracer()
}

func (t *runTracing) tracing() outboxlambda.Tracing {
	if t.provider == nil {
		return nil
	}
	return outboxlambda.OTelTracing{Provider: t.provider}
}

// spans shuts the provider down (exporting what is left) and returns how
// many spans the receiver got; 0 when off.
func (t *runTracing) spans(ctx context.Context) (int, error) {
	if t.provider == nil {
		return 0, nil
	}
	if err := t.provider.Shutdown(ctx); err != nil {
		return 0, fmt.Errorf("otel: %w", err)
	}
	return len(t.recv.Spans()), nil
}

func (t *runTracing) report(w io.Writer, n int) {
	if t.provider != nil {
		fmt.Fprintf(w, "otel: %d spans received by the OTLP/HTTP receiver at %s (%d export requests)\n", n, t.recv.URL, t.recv.Requests())
	}
}

func (t *runTracing) close() {
	if t.recv != nil {
		_ = t.recv.Close()
	}
}

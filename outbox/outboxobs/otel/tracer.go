package otel

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/spillway-dev/spillway/outbox"
)

// Tracer is an outbox.Tracer that opens OpenTelemetry spans. Build it with
// Provider.Tracer; the zero value records nothing.
type Tracer struct{ tracer trace.Tracer }

var _ outbox.Tracer = Tracer{}

// Start implements outbox.Tracer: a child of the span in ctx. A publish
// span is a producer span; the others are internal.
func (t Tracer) Start(ctx context.Context, name string) (context.Context, outbox.Span) {
	if t.tracer == nil {
		return outbox.NoopTracer{}.Start(ctx, name)
	}
	kind := trace.SpanKindInternal
	if name == outbox.SpanPublish {
		kind = trace.SpanKindProducer
	}
	ctx, s := t.tracer.Start(ctx, name, trace.WithSpanKind(kind))
	if !s.IsRecording() {
		_, none := outbox.NoopTracer{}.Start(ctx, name)
		return ctx, none
	}
	return ctx, span{s}
}

// span adapts an OpenTelemetry span to outbox.Span and outbox.SpanLinker.
type span struct{ s trace.Span }

// Annotate implements outbox.Span as a span attribute.
func (s span) Annotate(key string, value any) { s.s.SetAttributes(attributeOf(key, value)) }

// Metadata implements outbox.Span as a span attribute too: OpenTelemetry
// has no unindexed kind (the X-Ray exporter of the collector can be told
// which attributes to index).
func (s span) Metadata(key string, value any) { s.s.SetAttributes(attributeOf(key, value)) }

// End implements outbox.Span: a non-nil err is recorded as an exception
// event and sets the span's status to Error.
func (s span) End(err error) {
	if err != nil {
		s.s.RecordError(err)
		s.s.SetStatus(codes.Error, err.Error())
	}
	s.s.End()
}

// Link implements outbox.SpanLinker: each link becomes a span link to a
// remote span context. Links with malformed ids are skipped.
func (s span) Link(links []outbox.TraceLink) {
	for _, l := range links {
		tid, err1 := trace.TraceIDFromHex(l.TraceID)
		sid, err2 := trace.SpanIDFromHex(l.SpanID)
		if err1 != nil || err2 != nil {
			continue
		}
		cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, Remote: true}
		if l.Sampled {
			cfg.TraceFlags = trace.FlagsSampled
		}
		if ts, err := trace.ParseTraceState(l.TraceState); err == nil {
			cfg.TraceState = ts
		}
		s.s.AddLink(trace.Link{SpanContext: trace.NewSpanContext(cfg)})
	}
}

func attributeOf(key string, value any) attribute.KeyValue {
	switch v := value.(type) {
	case string:
		return attribute.String(key, v)
	case bool:
		return attribute.Bool(key, v)
	case int:
		return attribute.Int(key, v)
	case int32:
		return attribute.Int64(key, int64(v))
	case int64:
		return attribute.Int64(key, v)
	case uint32:
		return attribute.Int64(key, int64(v))
	case float64:
		return attribute.Float64(key, v)
	case []string:
		return attribute.StringSlice(key, v)
	case error:
		return attribute.String(key, v.Error())
	case fmt.Stringer:
		return attribute.String(key, v.String())
	default:
		return attribute.String(key, fmt.Sprint(v))
	}
}

// underRoot is a TracerProvider whose tracers start a span only under a
// root span that is still open (an invocation that has not returned);
// elsewhere they return a no-op span. So no span is a root by accident, and
// work left running after an invocation returned (a goroutine sending
// wake-ups) records nothing that would wait for the next flush or be lost
// at a freeze.
type underRoot struct {
	embedded.TracerProvider
	sdk  trace.TracerProvider
	live *liveRoots
}

func (p underRoot) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childTracer{inner: p.sdk.Tracer(name, opts...), live: p.live}
}

type childTracer struct {
	embedded.Tracer
	inner trace.Tracer
	live  *liveRoots
}

func (t childTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !t.live.open(trace.SpanContextFromContext(ctx).TraceID()) {
		return noop.NewTracerProvider().Tracer("").Start(ctx, name, opts...)
	}
	return t.inner.Start(ctx, name, opts...)
}

// liveRoots counts the open root spans per trace.
type liveRoots struct {
	mu sync.Mutex
	n  map[trace.TraceID]int
}

func (l *liveRoots) add(id trace.TraceID, delta int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[id] += delta; l.n[id] <= 0 {
		delete(l.n, id)
	}
}

func (l *liveRoots) open(id trace.TraceID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return id.IsValid() && l.n[id] > 0
}

package outbox

import (
	"context"
	"errors"
	"testing"
)

func TestTrace(t *testing.T) {
	t.Run("NoopTracerAllocatesNothing", func(t *testing.T) {
		ctx := context.Background()
		var tracer Tracer = NoopTracer{}
		err := errors.New("boom")
		allocs := testing.AllocsPerRun(100, func() {
			c, span := tracer.Start(ctx, SpanDrain)
			span.Annotate(AnnotationRelayID, "relay-1")
			span.Annotate(AnnotationOutcome, true)
			span.Metadata(MetadataOrigins, "x")
			span.End(err)
			_, span = StartSpan(c, nil, SpanPublish)
			span.End(nil)
		})
		if allocs != 0 {
			t.Fatalf("no-op tracing allocated %v times per run, want 0", allocs)
		}
	})

	t.Run("NoopTracerKeepsContext", func(t *testing.T) {
		type key string
		ctx := context.WithValue(context.Background(), key("k"), "v")
		got, _ := NoopTracer{}.Start(ctx, SpanAcquire)
		if got != ctx {
			t.Fatal("NoopTracer.Start returned a different context")
		}
		got, _ = StartSpan(ctx, nil, SpanAcquire)
		if got != ctx {
			t.Fatal("StartSpan with a nil tracer returned a different context")
		}
	})

	t.Run("StartSpanUsesTracer", func(t *testing.T) {
		rt := &recordingTracer{}
		_, span := StartSpan(context.Background(), rt, SpanRelease)
		span.End(nil)
		if len(rt.names) != 1 || rt.names[0] != SpanRelease {
			t.Fatalf("tracer saw %v, want [%s]", rt.names, SpanRelease)
		}
	})
}

type recordingTracer struct{ names []string }

func (r *recordingTracer) Start(ctx context.Context, name string) (context.Context, Span) {
	r.names = append(r.names, name)
	return ctx, noopSpan{}
}

package otel

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

func newProvider(t *testing.T) (*Provider, *outboxlocal.OTLPReceiver) {
	t.Helper()
	recv, err := outboxlocal.StartOTLPReceiver()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = recv.Close() })
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")
	p, err := New(t.Context(), Config{ServiceName: "test", Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p, recv
}

func TestProvider(t *testing.T) {
	t.Run("SpansOnlyUnderARootAndExportedWhenItEnds", func(t *testing.T) {
		p, recv := newProvider(t)
		tracer := p.Tracer()
		// Outside a root: nothing is recorded, and the span is the core's no-op.
		_, orphan := tracer.Start(t.Context(), outbox.SpanAcquire)
		orphan.End(nil)
		if _, ok := orphan.(outbox.SpanLinker); ok {
			t.Fatalf("a span outside a root is a recording span")
		}

		ctx, end := p.Start(t.Context(), "cli")
		cctx, s := tracer.Start(ctx, outbox.SpanPublish)
		s.Annotate(outbox.AnnotationBucket, 3)
		s.Annotate(outbox.AnnotationMessages, int64(2))
		s.Annotate("flag", true)
		s.Metadata(outbox.MetadataOrigins, []string{"1-5759e988-bd862e3fe1be46a994272793"})
		s.(outbox.SpanLinker).Link([]outbox.TraceLink{
			{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", Sampled: true, TraceState: "rojo=1"},
			{TraceID: "not-hex", SpanID: "00f067aa0ba902b7"},
		})
		tc := p.TraceContext(cctx)
		s.End(errors.New("broker down"))
		if len(recv.Spans()) != 0 {
			t.Fatalf("spans exported before the root ended")
		}
		if err := end(nil); err != nil {
			t.Fatal(err)
		}
		spans := recv.Spans()
		if len(spans) != 2 || spans[0].Name != outbox.SpanPublish || spans[1].Name != "cli" {
			t.Fatalf("exported %d spans", len(spans))
		}
		pub := spans[0]
		if pub.Kind != tracepb.Span_SPAN_KIND_PRODUCER || pub.Status.Code != tracepb.Status_STATUS_CODE_ERROR || pub.Status.Message != "broker down" {
			t.Errorf("publish span kind %v status %v", pub.Kind, pub.Status)
		}
		got := map[string]string{}
		for _, kv := range pub.Attributes {
			got[kv.Key] = kv.Value.String()
		}
		for k, want := range map[string]string{"bucket": "int_value:3", "messages": "int_value:2", "flag": "bool_value:true", "origins": "1-5759e988"} {
			if !strings.Contains(got[k], want) {
				t.Errorf("attribute %s = %q, want %q", k, got[k], want)
			}
		}
		if len(pub.Links) != 1 || hex.EncodeToString(pub.Links[0].SpanId) != "00f067aa0ba902b7" || pub.Links[0].Flags&1 != 1 {
			t.Errorf("links %v", pub.Links)
		}
		// The trace context names the publish span in both forms; its trace id
		// is a valid X-Ray id (the first 8 digits are the epoch seconds).
		tid, sid := hex.EncodeToString(pub.TraceId), hex.EncodeToString(pub.SpanId)
		if tc.TraceParent != "00-"+tid+"-"+sid+"-01" {
			t.Errorf("traceparent %q, want the publish span's", tc.TraceParent)
		}
		if tc.AmznTraceID != "Root=1-"+tid[:8]+"-"+tid[8:]+";Parent="+sid+";Sampled=1" {
			t.Errorf("X-Ray header %q, want the publish span's", tc.AmznTraceID)
		}
	})

	t.Run("TraceContextKeepsCallerValues", func(t *testing.T) {
		p, _ := newProvider(t)
		caller := outbox.TraceContext{TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceState: "rojo=1"}
		if got := p.TraceContext(outbox.WithTraceContext(t.Context(), caller)); got != caller {
			t.Fatalf("outside a span: %+v", got)
		}
		ctx, end := p.Start(outbox.WithTraceContext(t.Context(), caller), "writer")
		defer func() { _ = end(nil) }()
		got := p.TraceContext(ctx)
		if got.TraceParent != caller.TraceParent || got.TraceState != caller.TraceState || !strings.HasPrefix(got.AmznTraceID, "Root=1-") {
			t.Fatalf("inside a span: %+v", got)
		}
	})

	t.Run("InvocationJoinsTheLambdaSegment", func(t *testing.T) {
		p, recv := newProvider(t)
		const header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
		//lint:ignore SA1029 the key is aws-lambda-go's, a plain string
		ctx, end := p.StartInvocation(context.WithValue(t.Context(), "x-amzn-trace-id", header), "fn")
		if err := end(errors.New("boom")); err != nil {
			t.Fatal(err)
		}
		spans := recv.Spans()
		if len(spans) != 1 || hex.EncodeToString(spans[0].TraceId) != "5759e988bd862e3fe1be46a994272793" ||
			hex.EncodeToString(spans[0].ParentSpanId) != "53995c3f42cd8ad8" || spans[0].Kind != tracepb.Span_SPAN_KIND_SERVER ||
			spans[0].Status.Code != tracepb.Status_STATUS_CODE_ERROR {
			t.Fatalf("invocation span %v", spans)
		}
		_ = ctx
		// An unsampled Lambda segment: nothing is recorded or exported.
		//lint:ignore SA1029 the key is aws-lambda-go's, a plain string
		_, end = p.StartInvocation(context.WithValue(t.Context(), "x-amzn-trace-id", strings.Replace(header, "Sampled=1", "Sampled=0", 1)), "fn")
		if err := end(nil); err != nil {
			t.Fatal(err)
		}
		if n := len(recv.Spans()); n != 1 {
			t.Fatalf("an unsampled invocation exported spans: %d", n)
		}
	})

	t.Run("FlushFailureIsReported", func(t *testing.T) {
		p, recv := newProvider(t)
		_ = recv.Close()
		_, end := p.Start(t.Context(), "cli")
		if err := end(nil); err == nil {
			t.Fatal("a flush to a closed receiver reported no error")
		}
	})

	t.Run("NothingIsRecordedAfterTheRootEnded", func(t *testing.T) {
		p, recv := newProvider(t)
		ctx, end := p.Start(t.Context(), "invocation")
		if err := end(nil); err != nil {
			t.Fatal(err)
		}
		// A goroutine still holding the invocation's ctx, after it returned.
		_, late := p.Tracer().Start(ctx, outbox.SpanPublish)
		late.End(nil)
		if _, ok := late.(outbox.SpanLinker); ok {
			t.Fatal("a span under an ended root is recording")
		}
		if err := p.ForceFlush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if spans := recv.Spans(); len(spans) != 1 || spans[0].Name != "invocation" {
			t.Fatalf("exported %d spans after the root ended", len(spans))
		}
		// Two roots of one trace: children record until the last one ends.
		ctx1, end1 := p.Start(t.Context(), "a")
		_, end2 := p.Start(ctx1, "b")
		_ = end2(nil)
		if _, s := p.Tracer().Start(ctx1, outbox.SpanDrain); !isRecording(s) {
			t.Fatal("a child of an open root is not recorded")
		}
		_ = end1(nil)
	})
}

func isRecording(s outbox.Span) bool { _, ok := s.(outbox.SpanLinker); return ok }

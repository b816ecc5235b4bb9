package xray

import (
	"context"
	"testing"

	awsxray "github.com/aws/aws-xray-sdk-go/xray"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

const lambdaHeader = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"

func TestTraceContext(t *testing.T) {
	t.Run("Sources", func(t *testing.T) {
		outboxtest.NewXRayDaemon(t)
		t.Setenv(EnvTraceID, "")
		if tc := TraceContext(context.Background()); !tc.IsZero() {
			t.Fatalf("no source gave %+v", tc)
		}

		envHeader := "Root=1-00000001-0000000000000000000000aa;Parent=0000000000000001;Sampled=1"
		t.Setenv(EnvTraceID, envHeader)
		if got := TraceContext(context.Background()).AmznTraceID; got != envHeader {
			t.Fatalf("from the environment: %q", got)
		}

		//lint:ignore SA1029 aws-lambda-go stores the trace header under this string key.
		lctx := context.WithValue(context.Background(), awsxray.LambdaTraceHeaderKey, lambdaHeader)
		if got := TraceContext(lctx).AmznTraceID; got != lambdaHeader {
			t.Fatalf("the invocation's header must win over the environment: %q", got)
		}

		// Inside a span, Parent names that span.
		sctx, span := Tracer{}.Start(lctx, "enqueue")
		seg := awsxray.GetSegment(sctx)
		want := "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=" + seg.ID + ";Sampled=1"
		if got := TraceContext(sctx).AmznTraceID; got != want {
			t.Fatalf("inside a subsegment: %q, want %q", got, want)
		}
		span.End(nil)

		rctx, end := Enable(context.Background(), "writer")
		root := awsxray.GetSegment(rctx)
		want = "Root=" + root.TraceID + ";Parent=" + root.ID + ";Sampled=1"
		if got := TraceContext(rctx).AmznTraceID; got != want {
			t.Fatalf("inside a root segment: %q, want %q", got, want)
		}
		end(nil)
	})

	t.Run("KeepsCallerValues", func(t *testing.T) {
		t.Setenv(EnvTraceID, "")
		caller := outbox.TraceContext{
			TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			TraceState:  "rojo=00f067aa0ba902b7",
		}
		//lint:ignore SA1029 aws-lambda-go stores the trace header under this string key.
		ctx := context.WithValue(context.Background(), awsxray.LambdaTraceHeaderKey, lambdaHeader)
		ctx = outbox.WithTraceContext(ctx, caller)

		ctx = WithTraceContext(ctx)
		got := outbox.TraceContextFrom(ctx)
		if got.TraceParent != caller.TraceParent || got.TraceState != caller.TraceState || got.AmznTraceID != lambdaHeader {
			t.Fatalf("got %+v", got)
		}
		headers := got.Headers()
		if len(headers) != 3 || headers[2].Key != outbox.HeaderAmznTraceID || string(headers[2].Value) != lambdaHeader {
			t.Fatalf("headers = %v", headers)
		}

		callerAmzn := "Root=1-00000001-0000000000000000000000bb;Sampled=0"
		ctx = outbox.WithTraceContext(ctx, outbox.TraceContext{AmznTraceID: callerAmzn})
		if got := TraceContext(ctx).AmznTraceID; got != callerAmzn {
			t.Fatalf("a caller-supplied X-Amzn-Trace-Id was replaced by %q", got)
		}
	})
}

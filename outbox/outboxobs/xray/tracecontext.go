package xray

import (
	"context"
	"os"

	awsxray "github.com/aws/aws-xray-sdk-go/xray"

	"github.com/spillway-dev/spillway/outbox"
)

// EnvTraceID is the environment variable the Lambda runtime sets to the
// current invocation's trace header.
const EnvTraceID = "_X_AMZN_TRACE_ID"

// TraceContext returns the trace context to store on messages enqueued under
// ctx: the one ctx already carries (outbox.TraceContextFrom: W3C values, and
// a caller-supplied X-Amzn-Trace-Id, which wins), completed with the X-Ray
// trace header of, in order of preference:
//
//  1. the X-Ray segment or subsegment in ctx, with Parent set to its id so
//     the consumer links to the exact span that enqueued;
//  2. the Lambda invocation's trace header that aws-lambda-go stores in the
//     handler's ctx;
//  3. the _X_AMZN_TRACE_ID environment variable, which the runtime also
//     sets (last, because invocations running concurrently in one process
//     overwrite it).
func TraceContext(ctx context.Context) outbox.TraceContext {
	tc := outbox.TraceContextFrom(ctx)
	if tc.AmznTraceID == "" {
		tc.AmznTraceID = amznTraceHeader(ctx)
	}
	return tc
}

// WithTraceContext returns ctx carrying TraceContext(ctx), so a writer that
// reads outbox.TraceContextFrom stores the Lambda trace on its messages.
func WithTraceContext(ctx context.Context) context.Context {
	return outbox.WithTraceContext(ctx, TraceContext(ctx))
}

func amznTraceHeader(ctx context.Context) string {
	if seg := awsxray.GetSegment(ctx); seg != nil {
		if h := seg.DownstreamHeader(); h.TraceID != "" {
			return h.String()
		}
	}
	if h, _ := ctx.Value(awsxray.LambdaTraceHeaderKey).(string); h != "" {
		return h
	}
	return os.Getenv(EnvTraceID)
}

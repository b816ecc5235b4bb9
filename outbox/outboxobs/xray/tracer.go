// Package xray traces the relay with AWS X-Ray (github.com/aws/aws-xray-sdk-go):
// a Tracer that opens X-Ray subsegments behind the core's outbox.Tracer seam,
// instrumentation of AWS SDK v2 clients, and capture of the Lambda trace
// header for messages a writer enqueues.
//
// Inside Lambda with active tracing, the runtime's facade segment (carried by
// the trace header in the handler's ctx) is the parent of every span.
// Outside Lambda nothing is traced unless Enable began a root segment: a CLI
// or a test without a daemon then neither sends nor logs anything.
//
// The X-Ray SDKs reach end of support on 2027-02-25. Everything here sits
// behind outbox.Tracer and outbox.TraceContext, so an OpenTelemetry
// implementation can replace this package without touching the relay.
package xray

import (
	"context"
	"fmt"

	awsxray "github.com/aws/aws-xray-sdk-go/xray"

	"github.com/spillway-dev/spillway/outbox"
)

// MetadataNamespace is the X-Ray metadata namespace of Span.Metadata values.
const MetadataNamespace = "spillway"

// Tracer is an outbox.Tracer that opens X-Ray subsegments. Its zero value is
// ready to use.
type Tracer struct{}

var _ outbox.Tracer = Tracer{}

// Start implements outbox.Tracer. It opens a subsegment of the segment in
// ctx, or of the Lambda facade segment when ctx carries the invocation's
// trace header. Without either, tracing is off: it returns ctx unchanged and
// a span that does nothing, so the SDK never reports a missing context.
func (Tracer) Start(ctx context.Context, name string) (context.Context, outbox.Span) {
	if !Active(ctx) {
		return outbox.NoopTracer{}.Start(ctx, name)
	}
	sctx, seg := awsxray.BeginSubsegment(ctx, name)
	if seg == nil {
		return outbox.NoopTracer{}.Start(ctx, name)
	}
	return sctx, span{seg: seg}
}

// Active reports whether spans started from ctx are recorded: ctx holds an
// X-Ray segment, or a non-empty Lambda trace header (aws-lambda-go stores an
// empty one when active tracing is off).
func Active(ctx context.Context) bool {
	if awsxray.GetSegment(ctx) != nil {
		return true
	}
	h, _ := ctx.Value(awsxray.LambdaTraceHeaderKey).(string)
	return h != ""
}

// Enable begins a root segment named name for a process outside Lambda (the
// CLI) and returns a ctx under which Tracer records, plus the function that
// ends the segment and sends it to the daemon (AWS_XRAY_DAEMON_ADDRESS,
// default 127.0.0.1:2000). The SDK's sampling rules decide whether the
// segment is sent.
func Enable(ctx context.Context, name string) (context.Context, func(err error)) {
	ctx, seg := awsxray.BeginSegment(ctx, name)
	return ctx, seg.Close
}

// span adapts an X-Ray (sub)segment to outbox.Span.
type span struct{ seg *awsxray.Segment }

// Annotate implements outbox.Span. X-Ray indexes only strings, booleans and
// numbers: other integer types are widened, Stringers and errors become
// their text, anything else its fmt form.
func (s span) Annotate(key string, value any) {
	_ = s.seg.AddAnnotation(key, annotationValue(value))
}

// Metadata implements outbox.Span; values land in MetadataNamespace.
func (s span) Metadata(key string, value any) {
	_ = s.seg.AddMetadataToNamespace(MetadataNamespace, key, value)
}

// End implements outbox.Span: a non-nil err marks the subsegment as a fault
// with the error recorded as its cause.
func (s span) End(err error) { s.seg.Close(err) }

func annotationValue(v any) any {
	switch x := v.(type) {
	case bool, int, uint, float32, float64, string:
		return x
	case int8:
		return int(x)
	case int16:
		return int(x)
	case int32:
		return int(x)
	case int64:
		return intOrFloat(x)
	case uint8:
		return uint(x)
	case uint16:
		return uint(x)
	case uint32:
		return uint(x)
	case uint64:
		return uint(x)
	case error:
		return x.Error()
	case fmt.Stringer:
		return x.String()
	default:
		return fmt.Sprint(x)
	}
}

// intOrFloat keeps an int64 exact where int is as wide (every platform
// Lambda runs on) and falls back to float64 elsewhere.
func intOrFloat(x int64) any {
	if int64(int(x)) == x {
		return int(x)
	}
	return float64(x)
}

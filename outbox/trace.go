package outbox

import "context"

// Tracer opens spans around the relay's units of work. It is the seam where
// X-Ray (outboxobs/xray) or an OpenTelemetry exporter plugs in; the core
// never imports either. Implementations must be safe for concurrent use.
type Tracer interface {
	// Start opens a span named name as a child of the span in ctx (if any)
	// and returns a ctx carrying the new span. It never fails: a tracer that
	// cannot record returns ctx unchanged and a span that does nothing.
	Start(ctx context.Context, name string) (context.Context, Span)
}

// Span is one unit of traced work. Its methods never fail and are safe to
// call after End (they then do nothing useful).
type Span interface {
	// Annotate attaches an indexed key/value (searchable in X-Ray). Values
	// should be strings, booleans or numbers.
	Annotate(key string, value any)
	// Metadata attaches an unindexed key/value of any JSON-encodable type.
	Metadata(key string, value any)
	// End closes the span, recording err when non-nil.
	End(err error)
}

// Span names the relay opens; a drain span covers one bucket. SpanEnqueue
// is the span the enqueue function opens around storing a request's
// messages.
const (
	SpanAcquire = "acquire"
	SpanDrain   = "drain"
	SpanPublish = "publish"
	SpanDelete  = "delete"
	SpanRelease = "release"
	SpanEnqueue = "enqueue"
)

// Annotation keys the relay sets on its spans. X-Ray accepts only
// alphanumerics and underscores in annotation keys, so the keys are
// snake_case like the log keys.
const (
	AnnotationRelayID  = "relay_id"
	AnnotationBucket   = "bucket"
	AnnotationMessages = "messages"
	AnnotationOutcome  = "outcome"
	// MetadataOrigins is the metadata key holding the origin trace ids of a
	// published batch (see originTraces).
	MetadataOrigins = "origins"
)

// NoopTracer records nothing. It is the relay's default tracer; Start and
// every Span method allocate nothing.
type NoopTracer struct{}

// Start implements Tracer: it returns ctx unchanged and a span that does
// nothing.
func (NoopTracer) Start(ctx context.Context, _ string) (context.Context, Span) {
	return ctx, noopSpan{}
}

// noopSpan is zero-sized, so boxing it in a Span allocates nothing.
type noopSpan struct{}

func (noopSpan) Annotate(string, any) {}
func (noopSpan) Metadata(string, any) {}
func (noopSpan) End(error)            {}

// StartSpan opens a span on t, treating a nil t as NoopTracer, so optional
// tracers cost one comparison.
func StartSpan(ctx context.Context, t Tracer, name string) (context.Context, Span) {
	if t == nil {
		return ctx, noopSpan{}
	}
	return t.Start(ctx, name)
}

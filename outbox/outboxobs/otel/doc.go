// Package otel traces the relay and the enqueue function with
// OpenTelemetry (go.opentelemetry.io/otel): a Tracer behind the core's
// outbox.Tracer seam with the same span names and attributes as the X-Ray
// subsegments, links from each publish span to the writers' spans its
// messages carry, AWS SDK v2 instrumentation, the Lambda invocation as the
// root span, and the trace context for messages a writer enqueues.
//
// Spans are exported as OTLP over HTTP (http/protobuf) to the endpoint the
// standard variables name (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS, …;
// default http://localhost:4318, where the ADOT collector layer listens).
// Trace and span ids come from the X-Ray id generator and the Lambda trace
// header is read with the X-Ray propagator, so the spans join the trace of
// the function's X-Ray segment and X-Ray accepts them.
//
// Spans are recorded only under a root span that is still open (an
// invocation that has not returned, or Start for a process outside Lambda):
// AWS calls and relay work outside one, or started by a goroutine after the
// invocation returned, record nothing, so no span waits for a later flush or
// is lost when Lambda freezes the process.
package otel

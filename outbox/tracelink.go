package outbox

import (
	"strings"
)

// TraceLink names one span of another trace: the writer's span whose trace
// context a message carries. Tracers that support links (OpenTelemetry)
// attach them to the publish span, so a trace backend can follow a business
// request into Kafka.
type TraceLink struct {
	// TraceID is the 32-digit lower-case hex trace id (W3C form; an X-Ray
	// root "1-5759e988-bd862e3fe1be46a994272793" becomes
	// "5759e988bd862e3fe1be46a994272793").
	TraceID string
	// SpanID is the 16-digit lower-case hex id of the writer's span.
	SpanID string
	// Sampled is the writer's sampling decision.
	Sampled bool
	// TraceState is the W3C tracestate sent with a traceparent; empty for an
	// X-Ray header.
	TraceState string
}

// SpanLinker is implemented by spans that can link to other traces. The
// relay links every publish span to originLinks of its batch; a span that
// does not implement it (X-Ray) gets the origin trace ids as metadata only.
type SpanLinker interface {
	// Link adds links to the span. It never fails; links beyond the
	// tracer's limit are dropped by the tracer.
	Link(links []TraceLink)
}

// LinkOrigins links span to the writers' spans msgs carry when span is a
// SpanLinker, and does nothing otherwise (headers are then not decoded).
func LinkOrigins(span Span, msgs []Message) {
	if l, ok := span.(SpanLinker); ok {
		if links := originLinks(msgs); len(links) > 0 {
			l.Link(links)
		}
	}
}

// originLinks returns the distinct writer spans carried by msgs' headers, in
// first-seen order: a valid traceparent (with its tracestate), and an
// X-Amzn-Trace-Id that names its Parent span, converted to W3C form. A
// message carrying both for the same span yields one link. Headers that do
// not decode or parse are skipped: telemetry never fails a publish. It
// returns nil when no message carries a linkable span.
func originLinks(msgs []Message) []TraceLink {
	var links []TraceLink
	add := func(l TraceLink) {
		for _, have := range links {
			if have.TraceID == l.TraceID && have.SpanID == l.SpanID {
				return
			}
		}
		links = append(links, l)
	}
	for i := range msgs {
		if len(msgs[i].Headers) == 0 {
			continue
		}
		headers, err := msgs[i].DecodedHeaders()
		if err != nil {
			continue
		}
		var state string
		for _, h := range headers {
			if strings.EqualFold(h.Key, HeaderTraceState) {
				state = string(h.Value)
			}
		}
		for _, h := range headers {
			switch {
			case strings.EqualFold(h.Key, HeaderTraceParent):
				if l, ok := traceParentLink(string(h.Value)); ok {
					l.TraceState = state
					add(l)
				}
			case strings.EqualFold(h.Key, HeaderAmznTraceID):
				if l, ok := amznTraceLink(string(h.Value)); ok {
					add(l)
				}
			}
		}
	}
	return links
}

// traceParentLink parses a valid traceparent into a link.
func traceParentLink(s string) (TraceLink, bool) {
	id, ok := traceParentID(s)
	if !ok {
		return TraceLink{}, false
	}
	flags := s[53:55]
	// Bit 0 of the flags byte is "sampled"; the second hex digit holds it.
	sampled := strings.IndexByte("13579bdf", flags[1]) >= 0
	return TraceLink{TraceID: id, SpanID: s[36:52], Sampled: sampled}, true
}

// amznTraceLink parses an X-Ray header with a valid Root and Parent into a
// link; a header without Parent names no span and yields none.
func amznTraceLink(s string) (TraceLink, bool) {
	root, ok := amznTraceRoot(s)
	if !ok {
		return TraceLink{}, false
	}
	var l TraceLink
	for field := range strings.SplitSeq(s, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(field), "=")
		k, v = strings.TrimSpace(k), strings.ToLower(strings.TrimSpace(v))
		switch {
		case strings.EqualFold(k, "Parent"):
			l.SpanID = v
		case strings.EqualFold(k, "Sampled"):
			l.Sampled = v == "1"
		}
	}
	if len(l.SpanID) != 16 || !isLowerHex(l.SpanID) || isZeroHex(l.SpanID) {
		return TraceLink{}, false
	}
	l.TraceID = root[2:10] + root[11:]
	return l, true
}

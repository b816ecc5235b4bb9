package outbox

import (
	"context"
	"slices"
	"testing"
)

func TestTraceLinks(t *testing.T) {
	t.Run("originLinks", func(t *testing.T) {
		msg := func(hs ...Header) Message { return Message{Headers: EncodeHeaders(hs)} }
		h := func(k, v string) Header { return Header{Key: k, Value: []byte(v)} }
		const (
			w3c     = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
			amzn    = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
			sameW3C = "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
		)
		msgs := []Message{
			{},
			msg(h("traceparent", w3c), h("tracestate", "rojo=1")),
			msg(h("X-Amzn-Trace-Id", amzn)),
			// The same span in both forms, and a repeat: no new link.
			msg(h("Traceparent", sameW3C), h("x-amzn-trace-id", amzn)),
			msg(h("traceparent", w3c)),
			// Unsampled, parent-less, malformed: one unsampled link only.
			msg(h("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")),
			msg(h("X-Amzn-Trace-Id", "Root=1-5759e988-bd862e3fe1be46a994272794;Sampled=1")),
			msg(h("X-Amzn-Trace-Id", "Root=1-5759e988-bd862e3fe1be46a994272795;Parent=0000000000000000")),
			msg(h("traceparent", "00-zzz")),
			{Headers: []byte{9, 9}},
		}
		want := []TraceLink{
			{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7", Sampled: true, TraceState: "rojo=1"},
			{TraceID: "5759e988bd862e3fe1be46a994272793", SpanID: "53995c3f42cd8ad8", Sampled: true},
			{TraceID: "0af7651916cd43dd8448eb211c80319c", SpanID: "b7ad6b7169203331"},
		}
		if got := originLinks(msgs); !slices.Equal(got, want) {
			t.Fatalf("originLinks =\n%+v\nwant\n%+v", got, want)
		}
		if got := originLinks(msgs[:1]); got != nil {
			t.Fatalf("originLinks without traces = %v, want nil", got)
		}
	})

	t.Run("LinkOriginsOnlyLinksLinkers", func(t *testing.T) {
		msgs := []Message{{Headers: EncodeHeaders([]Header{{Key: HeaderTraceParent, Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}})}}
		s := &linkingSpan{}
		LinkOrigins(s, msgs)
		if len(s.links) != 1 || s.links[0].SpanID != "00f067aa0ba902b7" {
			t.Fatalf("links = %+v", s.links)
		}
		LinkOrigins(s, nil)
		if len(s.links) != 1 {
			t.Fatalf("a batch without traces added links: %+v", s.links)
		}
		_, noop := NoopTracer{}.Start(context.Background(), SpanPublish)
		LinkOrigins(noop, msgs) // must not panic or allocate a linker
	})
}

type linkingSpan struct {
	noopSpan
	links []TraceLink
}

func (s *linkingSpan) Link(l []TraceLink) { s.links = append(s.links, l...) }

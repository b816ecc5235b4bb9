package outboxinbox_test

import (
	"context"
	"sync"
	"testing"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
)

// recordingTracer keeps the spans it opened.
type recordingTracer struct {
	mu    sync.Mutex
	spans []*recordingSpan
}

func (r *recordingTracer) Start(ctx context.Context, name string) (context.Context, outbox.Span) {
	s := &recordingSpan{name: name, annotations: map[string]any{}}
	r.mu.Lock()
	r.spans = append(r.spans, s)
	r.mu.Unlock()
	return ctx, s
}

type recordingSpan struct {
	name        string
	annotations map[string]any
	links       []outbox.TraceLink
	ended       bool
}

func (s *recordingSpan) Annotate(k string, v any)      { s.annotations[k] = v }
func (s *recordingSpan) Metadata(string, any)          {}
func (s *recordingSpan) End(error)                     { s.ended = true }
func (s *recordingSpan) Link(links []outbox.TraceLink) { s.links = append(s.links, links...) }

func TestProcessTrace(t *testing.T) {
	t.Run("SpanPerRecord_LinkedToTheWritersTrace", func(t *testing.T) {
		e := newEnv(t)
		tracer := &recordingTracer{}
		in := e.inbox(t, "billing", nil, func(o *outboxinbox.Options) { o.Tracer = tracer })
		id := outbox.NewMessageID()
		rec := record("orders", 0, 1, "k", "v", id)
		rec.Headers = append([]outbox.Header{{Key: outbox.HeaderTraceParent, Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}, rec.Headers...)
		for range 2 {
			if _, err := in.Process(t.Context(), rec, e.handler()); err != nil {
				t.Fatal(err)
			}
		}
		if len(tracer.spans) != 2 {
			t.Fatalf("%d spans, want one per record", len(tracer.spans))
		}
		for i, want := range []string{"applied", "duplicate"} {
			s := tracer.spans[i]
			if s.name != outboxinbox.SpanConsume || !s.ended || s.annotations["outcome"] != want || s.annotations["message_id"] != id.String() {
				t.Fatalf("span %d: %+v, want an ended consume span with outcome %s", i, s, want)
			}
			if len(s.links) != 1 || s.links[0].TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || s.links[0].SpanID != "00f067aa0ba902b7" {
				t.Fatalf("span %d links %+v, want the writer's span", i, s.links)
			}
		}
	})
}

package outbox_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
)

// linkingTracer opens spans that take links, as OpenTelemetry's do, so a
// publish span asks for its batch's origin links as well as its origins.
type linkingTracer struct {
	mu    sync.Mutex
	links []outbox.TraceLink
}

func (t *linkingTracer) Start(ctx context.Context, _ string) (context.Context, outbox.Span) {
	return ctx, linkingSpan{t}
}

type linkingSpan struct{ t *linkingTracer }

func (linkingSpan) Annotate(string, any) {}
func (linkingSpan) Metadata(string, any) {}
func (linkingSpan) End(error)            {}
func (s linkingSpan) Link(links []outbox.TraceLink) {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	s.t.links = append(s.t.links, links...)
}

func TestHeaderBlobs(t *testing.T) {
	// RelayDecodesEachHeaderBlobOnce relays messages with trace headers
	// through the Kafka publisher under a tracer that links spans: the origin
	// trace ids, the span links and the records all need the headers, and the
	// blob of each fetched message is decoded once for all three. It drives the
	// real publisher against an embedded broker, so a decode of its own would
	// count too. Not parallel: the decode count covers every goroutine.
	t.Run("RelayDecodesEachHeaderBlobOnce", func(t *testing.T) {
		const buckets, perBucket = 2, 7
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
		if err != nil {
			t.Fatalf("start kfake: %v", err)
		}
		defer c.Close()
		pub, err := outboxkafka.New(outboxkafka.Config{Brokers: c.ListenAddrs()})
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Close()

		clk := outbox.SystemClock{}
		store := newMemStore(clk, buckets)
		tc := outbox.TraceContext{TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
		blob := outbox.EncodeHeaders(append(tc.Headers(), outbox.Header{Key: "type", Value: []byte("order.created")}))
		for b := range buckets {
			for range perBucket {
				m := newMsg("k")
				m.Headers = blob
				store.put(b, m)
			}
		}
		// A message without headers needs no decode.
		store.add(0, "bare")
		tracer := &linkingTracer{}
		relay, err := outbox.NewRelay(outbox.RelayConfig{
			Options: outbox.RelayOptions{RelayID: "relay-a", BucketCount: buckets, BatchSize: 3,
				IdleTimeout: 50 * time.Millisecond, MaxIdleTimeout: 50 * time.Millisecond},
			Store: store.observed, Publisher: pub, Clock: clk, Tracer: tracer,
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}

		decodes := outbox.CountHeaderDecodes(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := relay.Run(ctx, outbox.RunInput{})
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if want := buckets*perBucket + 1; res.Published != want || store.pending() != 0 {
			t.Fatalf("published %d, %d left; want %d, none left", res.Published, store.pending(), want)
		}
		// Every publish span got the link, so the headers were read for it.
		tracer.mu.Lock()
		links := len(tracer.links)
		tracer.mu.Unlock()
		if links == 0 {
			t.Fatal("no publish span was linked to the writer's span: the headers were not read")
		}
		if got, want := decodes.Load(), int64(buckets*perBucket); got != want {
			t.Fatalf("%d header decodes for %d relayed blobs: each fetched blob must be decoded once", got, want)
		}
	})
}

package outboxkafka

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/spillway-dev/spillway/outbox"
)

// BenchmarkPublish publishes batches of 500 messages of 1 KiB with a key and
// two headers, the relay's default batch size, to an embedded broker.
func BenchmarkPublish(b *testing.B) {
	const batch, size = 500, 1024
	c := newCluster(b, kfake.SeedTopics(8, "orders"))
	p := newPublisher(b, c)
	ctx := context.Background()
	if err := p.Init(ctx); err != nil {
		b.Fatalf("Init: %v", err)
	}
	value := make([]byte, size)
	headers := []outbox.Header{{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")}, {Key: "type", Value: []byte("order.created")}}
	msgs := make([]outbox.Message, batch)
	for i := range msgs {
		msgs[i] = message(b, int64(i+1), "orders", []byte{byte(i), byte(i >> 8)}, value, headers, nil)
	}
	b.SetBytes(batch * size)
	b.ReportAllocs()
	for b.Loop() {
		if n, err := p.Publish(ctx, msgs); n != batch || err != nil {
			b.Fatalf("Publish = %d, %v", n, err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
}

package outboxkafka

import (
	"context"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway-dev/spillway/outbox"
)

// BenchmarkPublish publishes batches of 500 messages of 1 KiB with a key and
// two headers, the relay's default batch size, to an embedded broker: from
// one bucket, and from 8 buckets at once sharing the publisher (and so its
// flushes), as a relay's concurrent drains do.
func BenchmarkPublish(b *testing.B) {
	for _, bc := range []struct {
		name    string
		buckets int
	}{{"1-bucket", 1}, {"8-buckets", 8}} {
		b.Run(bc.name, func(b *testing.B) { benchmarkPublish(b, bc.buckets) })
	}
}

func benchmarkPublish(b *testing.B, buckets int) {
	const batch, size = 500, 1024
	c := newCluster(b, kfake.SeedTopics(8, "orders"))
	p := newPublisher(b, c)
	ctx := context.Background()
	if err := p.Init(ctx); err != nil {
		b.Fatalf("Init: %v", err)
	}
	value := make([]byte, size)
	headers := []outbox.Header{{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")}, {Key: "type", Value: []byte("order.created")}}
	batches := make([][]outbox.Message, buckets)
	for w := range batches {
		for i := range batch {
			batches[w] = append(batches[w], message(b, int64(i+1), "orders", []byte{byte(w), byte(i), byte(i >> 8)}, value, headers, nil))
		}
	}
	produces := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Observe: true, Count: -1})
	b.SetBytes(int64(buckets * batch * size))
	b.ReportAllocs()
	for b.Loop() {
		var wg sync.WaitGroup
		for _, msgs := range batches {
			wg.Go(func() {
				if n, err := p.Publish(ctx, msgs); n != batch || err != nil {
					b.Errorf("Publish = %d, %v", n, err)
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.N*buckets*batch)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(produces.Hits())/float64(b.N), "produces/op")
}

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// BenchmarkRelayDrain measures one relay draining messages of 1 KB from one
// bucket and from eight, end to end on the embedded backends (real SDK and
// franz-go clients, the compensating DynamoDB layer, kfake). Each iteration
// enqueues 1,000 messages outside the timer and drains them with one run;
// the run's fixed cost (acquisition, probes, stop) is included.
func BenchmarkRelayDrain(b *testing.B) {
	const perIteration = 1000
	for _, buckets := range []int{1, 8} {
		b.Run(fmt.Sprintf("%d buckets", buckets), func(b *testing.B) {
			be := newBackend(b, false)
			r := be.newRig(b, outbox.RelayOptions{
				RelayID: "bench", PollInterval: 10 * time.Millisecond, IdleTimeout: 10 * time.Millisecond,
				BacklogInterval: -1,
			}, nil)
			var elapsed time.Duration
			for b.Loop() {
				b.StopTimer()
				be.enqueueBuckets(b, buckets, perIteration/buckets, 1024)
				b.StartTimer()
				start := time.Now()
				res := r.run(b, outbox.RunInput{})
				elapsed += time.Since(start)
				if res.Deleted != perIteration {
					b.Fatalf("deleted %d, want %d", res.Deleted, perIteration)
				}
			}
			b.ReportMetric(float64(b.N*perIteration)/elapsed.Seconds(), "msgs/s")
		})
	}
}

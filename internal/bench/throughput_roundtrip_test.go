package bench

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"
)

func TestThroughput(t *testing.T) {
	// In simulated time the embedded backends cost nothing but their round
	// trips, so what is left is how well one relay overlaps its buckets' round
	// trips (issue 36 §2): over 8 buckets it must relay at least 5 times what it
	// relays over one. Batches of 50 (a 128 MB relay's budget allows about 70
	// of 1 KB) make the produce a large part of a batch's round trips: while
	// the publishes waiting for a Flush joined the next one only as each woke,
	// the buckets' produces went out about one Flush each, and 8 buckets
	// relayed 3.3 times one bucket's rate (5.8 since). What the round trips
	// allow, buckets × batch ÷ (fetch + produce + deletes), is logged beside it.
	t.Run("OneRelayOverlapsItsBucketsRoundTrips", func(t *testing.T) {
		if testing.Short() {
			t.Skip("relays 8,000 messages on the embedded backends (about 30 s)")
		}
		synctest.Test(t, func(t *testing.T) {
			rt := lab.RoundTrips{DynamoDB: 5 * time.Millisecond, Kafka: 10 * time.Millisecond, Jitter: 0.2, Seed: 1}
			const batch, deletesPerRequest = 50, 25
			res, err := RunThroughput(t.Context(), lab.Config{Settle: synctest.Wait, RoundTrips: rt}, ThroughputConfig{
				Messages: 4000, BatchSize: batch,
				Cases: []ThroughputCase{{Relays: 1, Buckets: 1, ValueSize: 1 << 10}, {Relays: 1, Buckets: 8, ValueSize: 1 << 10}},
			})
			if err != nil {
				t.Fatal(err)
			}
			cycle := rt.DynamoDB + rt.Kafka + (batch+deletesPerRequest-1)/deletesPerRequest*rt.DynamoDB
			perBucket := batch / cycle.Seconds()
			one, eight := res.Cases[0], res.Cases[1]
			// Rates once the relay holds its buckets: a run's join is the
			// same few round trips whatever the bucket count.
			t.Logf("round trips allow %.0f msgs/s a bucket; r1-b1 %.0f msgs/s (%.0f settled), r1-b8 %.0f msgs/s (%.0f settled): settled %.0f%% of 8 buckets' bound, %.1f× r1-b1",
				perBucket, one.PerSecond, one.SettledRate, eight.PerSecond, eight.SettledRate,
				100*eight.SettledRate/(8*perBucket), eight.SettledRate/one.SettledRate)
			for _, c := range res.Cases {
				if c.Published != c.Messages || c.SettledRate == 0 {
					t.Fatalf("%s published %d of %d messages, settled rate %.0f", c.Name(), c.Published, c.Messages, c.SettledRate)
				}
			}
			if eight.SettledRate < 5*one.SettledRate {
				t.Errorf("r1-b8 relayed %.0f msgs/s once settled, under 5× r1-b1's %.0f", eight.SettledRate, one.SettledRate)
			}
		})
	})
}

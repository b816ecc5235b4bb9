package outboxlocal

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	// In a bubble a request's time is exactly the waits it made, so each
	// request must take the next delay of the seeded sequence, in order.
	t.Run("EmbeddedDynamoDBHoldsEachRequestForTheNextDraw", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			rt := RoundTrip{Mean: 5 * time.Millisecond, Jitter: 0.2, Seed: 7}
			d := newDynamoDB(t, InMemory(), WithoutEnvironment(), WithRoundTrip(rt))
			want := rt.draws()
			distinct := map[time.Duration]bool{}
			for i := range 6 {
				start := time.Now()
				if _, err := d.Client.ListTables(t.Context(), &dynamodb.ListTablesInput{}); err != nil {
					t.Fatal(err)
				}
				got, next := time.Since(start), want.next()
				if got != next {
					t.Fatalf("request %d took %v, want the seeded draw %v", i, got, next)
				}
				if got < 4*time.Millisecond || got > 6*time.Millisecond {
					t.Fatalf("request %d took %v, outside 5ms ±20%%", i, got)
				}
				distinct[got] = true
			}
			if len(distinct) < 2 {
				t.Fatalf("jitter drew one delay for every request: %v", distinct)
			}
		})
	})

	t.Run("EmbeddedKafkaHoldsEachProduce", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			k := newKafkaWith(t, KafkaConfig{Topics: []string{"t"}, InMemory: true, RoundTrip: RoundTrip{Mean: 10 * time.Millisecond}})
			cl, err := kgo.NewClient(append(k.ClientOpts(), kgo.ProducerLinger(0))...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			// Only produce and fetch requests wait: the first produce's
			// metadata and producer id requests take no time.
			start := time.Now()
			if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: k.Topic("t"), Value: []byte("first")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if first := time.Since(start); first != 10*time.Millisecond {
				t.Fatalf("first produce took %v, want one round trip of 10ms", first)
			}
			for i := range 3 {
				start := time.Now()
				if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: k.Topic("t"), Value: []byte("next")}).FirstErr(); err != nil {
					t.Fatal(err)
				}
				if got := time.Since(start); got != 10*time.Millisecond {
					t.Fatalf("produce %d took %v, want one round trip of 10ms", i, got)
				}
			}
		})
	})

	t.Run("RefusedOnExternalEndpoints", func(t *testing.T) {
		t.Parallel()
		rt := RoundTrip{Mean: time.Millisecond}
		if d, err := StartDynamoDB(t.Context(), WithEndpoint("http://127.0.0.1:1"), WithRoundTrip(rt)); err == nil {
			_ = d.Close()
			t.Fatal("a round trip on an external DynamoDB endpoint was accepted")
		}
		if k, err := StartKafka(t.Context(), KafkaConfig{Endpoint: "127.0.0.1:1", RoundTrip: rt}); err == nil {
			_ = k.Close()
			t.Fatal("a round trip on external brokers was accepted")
		}
		if _, err := StartDynamoDB(t.Context(), WithoutEnvironment(), WithRoundTrip(RoundTrip{Mean: time.Millisecond, Jitter: 1.5})); err == nil {
			t.Fatal("a jitter over 100% was accepted")
		}
	})
}

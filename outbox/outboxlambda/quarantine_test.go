package outboxlambda

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestQuarantine(t *testing.T) {
	t.Parallel()
	// ParksAKeyBehindAnUnknownTopicAndReplayDeliversItInOrder
	// runs the relay handler under SPILLWAY_POISON_POLICY=quarantine against
	// the embedded Kafka: a message for a topic the brokers do not have is
	// parked with its key's later messages while the bucket's other keys are
	// delivered; a replay (topic repaired) delivers the key in its original
	// order with the original message ids.
	t.Run("ParksAKeyBehindAnUnknownTopicAndReplayDeliversItInOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, bundleOptions{vars: map[string]string{outboxconf.EnvPoisonPolicy: "quarantine"}})
		w, err := outboxddb.NewWriter(b.ddb.Client, b.cfg.WriterOptions())
		if err != nil {
			t.Fatal(err)
		}
		orders := b.topic("orders")
		bucketOf := func(key string) int {
			n, err := outbox.ComputeBucket([]byte(key), outbox.MessageID{}, b.cfg.BucketCount, nil)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		// Two other keys that share the poison key's bucket.
		bucket := bucketOf("poison")
		var others []string
		for i := 0; len(others) < 2; i++ {
			if k := fmt.Sprintf("other-%d", i); bucketOf(k) == bucket {
				others = append(others, k)
			}
		}
		put := func(topic, key string) outbox.Message {
			m, err := outbox.NewMessage(topic, []byte(key), []byte(key), outbox.MessageOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if m, err = w.Enqueue(t.Context(), m); err != nil {
				t.Fatal(err)
			}
			return m
		}
		p1 := put(orders, "poison")
		put(orders, others[0])
		p2 := put("no-such-topic", "poison")
		put(orders, others[1])
		p3 := put(orders, "poison")
		put(orders, others[0])
		p4 := put(orders, "poison")

		wake := json.RawMessage(fmt.Sprintf(`{"trigger":"wake","buckets":[%d]}`, bucket))
		handleRelay(t, b, t.Context(), wake)
		got := outboxtest.Consume(t, b.kafka, orders, 4)
		for _, r := range got {
			id, _ := header(r, outbox.DefaultMessageIDHeaderName)
			if string(r.Key) == "poison" && id != p1.ID.String() {
				t.Fatalf("key poison delivered %s before replay; only its first message may go", id)
			}
		}
		s := b.newStore(t)
		parked, err := s.ListParked(t.Context(), bucket)
		if err != nil {
			t.Fatal(err)
		}
		var parkedIDs []string
		for _, p := range parked {
			parkedIDs = append(parkedIDs, p.MessageID)
		}
		if want := []string{p2.ID.String(), p3.ID.String(), p4.ID.String()}; !slices.Equal(parkedIDs, want) {
			t.Fatalf("parked %v, want %v", parkedIDs, want)
		}
		if parked[0].Reason != outbox.ParkUnknownTopic || parked[1].Reason != outbox.ParkKeyQuarantined {
			t.Fatalf("reasons %q, %q; want unknown-topic, key-quarantined", parked[0].Reason, parked[1].Reason)
		}
		if pending, err := s.PendingBuckets(t.Context(), []int{bucket}); err != nil || len(pending) != 0 {
			t.Fatalf("bucket still pending %v (%v): the other keys must be delivered", pending, err)
		}

		// Replay with the topic repaired: the key's three messages, in order,
		// with their ids, behind everything delivered so far.
		if _, err := s.RequestReplay(t.Context(), parked, orders); err != nil {
			t.Fatal(err)
		}
		handleRelay(t, b, t.Context(), wake)
		all := outboxtest.Consume(t, b.kafka, orders, 7)
		var poison []string
		for _, r := range all {
			if string(r.Key) == "poison" {
				id, _ := header(r, outbox.DefaultMessageIDHeaderName)
				poison = append(poison, id)
			}
		}
		if want := []string{p1.ID.String(), p2.ID.String(), p3.ID.String(), p4.ID.String()}; !slices.Equal(poison, want) {
			t.Fatalf("key poison delivered %v, want %v", poison, want)
		}
		if rest, err := s.ListParked(t.Context()); err != nil || len(rest) != 0 {
			t.Fatalf("still parked after the replay: %d (%v)", len(rest), err)
		}
	})
}

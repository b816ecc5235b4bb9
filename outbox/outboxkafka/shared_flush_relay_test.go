package outboxkafka

import (
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxmem"
)

// awaitPartner is a kgo hook that keeps the hand-over of a head row to a
// shared Flush open until a second hand-over has joined its round, so the
// two buckets' publishes share one Flush whatever the scheduler does: the
// hand-overs of key good's first row and of key big's rows. A partner
// has joined when the round counts a second hand-over or holds the other
// key's records (a partner that finished handing over). It spins
// rather than sleeps: in a testing/synctest bubble the partner, once
// joined, waits on the flusher's produceMu, which is no durable wait, so
// the bubble's clock could not move a sleeping hook on. A hand-over that
// no partner joins goes on after a bounded spin, and the test then finds
// that the head rows never shared a Flush.
type awaitPartner struct{ f *flusher }

func (w *awaitPartner) OnProduceRecordBuffered(r *kgo.Record) {
	if string(r.Key) != "big" && (string(r.Key) != "good" || string(r.Value) != "v") {
		return
	}
	for range 1_000_000 {
		w.f.mu.Lock()
		round := w.f.next
		joined := round == nil || round.alone || round.handing > 1 ||
			slices.ContainsFunc(round.records, func(o *kgo.Record) bool { return string(o.Key) != string(r.Key) })
		w.f.mu.Unlock()
		if joined {
			return
		}
		runtime.Gosched()
	}
}

func TestSharedFlushRelay(t *testing.T) {
	t.Parallel()
	// Defect 4 of issue 39, end to end: a relay under PoisonQuarantine drains
	// two buckets whose messages share one partition of a broker that takes no
	// batch over 2048 bytes. Bucket A's head row is small and good; bucket B's
	// is 4000 bytes. Their batches share a Flush and are refused; the two head
	// rows, retried together in the next sweep, share a Flush again and are
	// refused again (MESSAGE_TOO_LARGE, B's fault). The good row must be
	// published, in order with its key's next message, and never parked; only
	// B's key is parked. It fails when a refusal is judged by the caller's
	// batch alone (a single-message publish in a shared Flush condemned), as
	// before the shared-flush fix.
	t.Run("RelaySharedFlushHeadRowsParkOnlyTheOversizedNeighbour", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			c, dial := newVirtualCluster(t, kfake.SeedTopics(1, "small"),
				kfake.BrokerConfigs(map[string]string{"message.max.bytes": "2048"}))
			produced := countProduced(c)
			partner := &awaitPartner{}
			p := newPublisher(t, c, func(cfg *Config) {
				cfg.ExtraOpts = append(cfg.ExtraOpts, dial, kgo.WithHooks(partner))
			})
			partner.f = p.flusher
			// The publisher learns the topic first, so neither bucket's
			// publish asks the brokers anything before it hands over.
			if res := p.PublishDetailed(t.Context(), []outbox.Message{message(t, 1, "small", []byte("warm"), []byte("v"), nil, nil)}); res.Err != nil {
				t.Fatal(res.Err)
			}

			const buckets = 4
			store, err := outboxmem.New(outboxmem.Options{BucketCount: buckets})
			if err != nil {
				t.Fatal(err)
			}
			var good, big []outbox.Message
			for i, v := range [][]byte{[]byte("v"), []byte("v2")} {
				g, err := outbox.NewMessage("small", []byte("good"), v, outbox.MessageOptions{})
				if err != nil {
					t.Fatal(err)
				}
				b, err := outbox.NewMessage("small", []byte("big"), fmt.Appendf(randomBytes(4000), "#%d", i), outbox.MessageOptions{})
				if err != nil {
					t.Fatal(err)
				}
				good, big = append(good, g), append(big, b)
			}
			stored, err := store.Enqueue(t.Context(), append(good, big...)...)
			if err != nil {
				t.Fatal(err)
			}
			goodBucket, bigBucket := stored[0].Bucket(), stored[len(good)].Bucket()
			if goodBucket == bigBucket {
				t.Fatalf("keys good and big share bucket %d: the test needs two buckets", goodBucket)
			}
			produced.take()

			relay, err := outbox.NewRelay(outbox.RelayConfig{
				Options: outbox.RelayOptions{
					RelayID: "relay-1", BucketCount: buckets, Mode: outbox.ModeDrain,
					PoisonPolicy: outbox.PoisonQuarantine,
				},
				Store:     store,
				Publisher: p,
				Logger:    slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			res, err := relay.Run(t.Context(), outbox.RunInput{Deadline: time.Now().Add(5 * time.Minute)})
			if err != nil || res.Reason != outbox.StopDrained {
				t.Fatalf("Run = %+v, %v; want drained", res, err)
			}

			carried := produced.take()
			// Both batches (4 records), then both head rows (2), shared a
			// produce request; without the second the test proves nothing.
			if !slices.Contains(carried, 4) || !slices.Contains(carried, 2) {
				t.Fatalf("produce requests carried %v records; want one with both batches (4) and one with both head rows (2)", carried)
			}
			if parked := store.Parked(goodBucket); len(parked) != 0 {
				t.Fatalf("bucket %d parked %d messages of key good, first %q: a good head row was condemned for its neighbour", goodBucket, len(parked), parked[0].Value)
			}
			if parked := store.Parked(bigBucket); len(parked) != 2 {
				t.Fatalf("bucket %d parked %d messages, want key big's two", bigBucket, len(parked))
			}
			var order []string
			for _, r := range consume(t, c.ListenAddrs(), "small", 3, dial) {
				if string(r.Key) == "good" {
					order = append(order, string(r.Value))
				}
			}
			if !slices.Equal(order, []string{"v", "v2"}) {
				t.Fatalf("key good reads %v, want [v v2]", order)
			}
		})
	})
}

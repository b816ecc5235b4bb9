package outboxkafka

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway-dev/spillway/outbox"
)

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func wantPoison(t *testing.T, err error, want outbox.ParkReason) {
	t.Helper()
	if got, ok := outbox.PoisonReason(err); !ok || got != want {
		t.Fatalf("error %v: reason %q (poison %v), want %q", err, got, ok, want)
	}
}

func TestPoison(t *testing.T) {
	t.Parallel()
	t.Run("PublishUnknownTopicStopsTheBatchBeforeAnythingAfterIt", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, kfake.SeedTopics(1, "orders"))
		asked := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: "missing", Observe: true, Count: -1})
		p := newPublisher(t, c, func(cfg *Config) { cfg.UnknownTopicWait = 20 * time.Millisecond })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		msgs := []outbox.Message{
			message(t, 1, "orders", []byte("a"), []byte("v"), nil, nil),
			message(t, 2, "missing", []byte("a"), []byte("v"), nil, nil),
			message(t, 3, "orders", []byte("a"), []byte("v"), nil, nil),
			message(t, 4, "orders", []byte("b"), []byte("v"), nil, nil),
		}
		res := p.PublishDetailed(ctx, msgs)
		if res.Acked != 1 {
			t.Fatalf("acked %d, want 1 (err %v)", res.Acked, res.Err)
		}
		wantPoison(t, res.Err, outbox.ParkUnknownTopic)
		if msg := res.Err.Error(); !strings.Contains(msg, "create it (kafka-topics.sh --create --topic missing") || !strings.Contains(msg, "--topics missing") {
			t.Fatalf("error %q does not name the fix", msg)
		}
		// Asked once, then once more after the wait; nothing after the row
		// was sent, so no later record of its key reached Kafka first.
		if h := asked.Hits(); h != 2 {
			t.Fatalf("metadata for the missing topic asked %d times, want 2", h)
		}
		if got := endOffsets(t, c.ListenAddrs(), "orders", 1); got[0] != 1 {
			t.Fatalf("orders holds %d records, want only the row before the unknown topic", got[0])
		}
		// A known topic is not asked about again.
		if res := p.PublishDetailed(ctx, msgs[2:]); res.Acked != 2 || res.Err != nil {
			t.Fatalf("second publish = %d, %v", res.Acked, res.Err)
		}
	})

	t.Run("PublishRecordOverTheClientLimitIsTooLargeBeforeProducing", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, kfake.SeedTopics(1, "orders"))
		p := newPublisher(t, c, func(cfg *Config) {
			cfg.ExtraOpts = append(cfg.ExtraOpts, kgo.ProducerBatchMaxBytes(4096))
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// 4,000 bytes of value fit the limit with the record's framing; 4,096
		// do not.
		msgs := []outbox.Message{
			message(t, 1, "orders", []byte("a"), randomBytes(3900), nil, nil),
			message(t, 2, "orders", []byte("a"), randomBytes(4096), nil, nil),
			message(t, 3, "orders", []byte("a"), []byte("v"), nil, nil),
		}
		res := p.PublishDetailed(ctx, msgs)
		if res.Acked != 1 {
			t.Fatalf("acked %d, want 1 (err %v)", res.Acked, res.Err)
		}
		wantPoison(t, res.Err, outbox.ParkTooLarge)
		if !errors.Is(res.Err, kerr.MessageTooLarge) {
			t.Errorf("error %v does not match MESSAGE_TOO_LARGE", res.Err)
		}
		if got := endOffsets(t, c.ListenAddrs(), "orders", 1); got[0] != 1 {
			t.Fatalf("orders holds %d records, want 1", got[0])
		}
	})

	t.Run("PublishBrokerRefusalOverTheTopicLimitCondemnsOnlyARecordSentAlone", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t)
		admin, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "small", 1, 1
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = "max.message.bytes", kmsg.StringPtr("2048")
		rt.Configs = append(rt.Configs, cfg)
		req.Topics = append(req.Topics, rt)
		if _, err := req.RequestWith(ctx, admin); err != nil {
			t.Fatal(err)
		}
		p := newPublisher(t, c)
		// The topic's metadata first: a topic's first records are
		// partitioned, and may be sent, one at a time as it arrives, and
		// the batch below must reach the broker as one request.
		if res := p.PublishDetailed(ctx, []outbox.Message{message(t, 0, "small", []byte("a"), []byte("v"), nil, nil)}); res.Err != nil {
			t.Fatal(res.Err)
		}
		big := message(t, 2, "small", []byte("a"), randomBytes(4000), nil, nil)
		// In a batch, the broker refuses the whole partition batch: the good
		// row before the big one fails with it, so nothing is condemned.
		res := p.PublishDetailed(ctx, []outbox.Message{message(t, 1, "small", []byte("a"), []byte("v"), nil, nil), big})
		if res.Acked != 0 || !errors.Is(res.Err, kerr.MessageTooLarge) {
			t.Fatalf("batch: acked %d, err %v; want 0 and MESSAGE_TOO_LARGE", res.Acked, res.Err)
		}
		if _, poison := outbox.PoisonReason(res.Err); poison {
			t.Fatalf("a record refused with its batch was condemned: %v", res.Err)
		}
		// Alone (the relay's head-row retry), the refusal is the record's own.
		res = p.PublishDetailed(ctx, []outbox.Message{big})
		wantPoison(t, res.Err, outbox.ParkTooLarge)
	})
}

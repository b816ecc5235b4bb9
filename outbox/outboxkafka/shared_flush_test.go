package outboxkafka

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway-dev/spillway/outbox"
)

// sharedFlushCluster is a cluster with the topic "small" (one partition,
// max.message.bytes 2048) and "held" (one partition), whose broker holds
// the next produce request for "held" until release is called, so a
// publish's Flush keeps running while others queue for the next one. It
// counts, per produce request for "small", the records it carried.
type sharedFlushCluster struct {
	c       *kfake.Cluster
	hold    chan chan struct{}
	mu      sync.Mutex
	carried []int
}

func newSharedFlushCluster(t *testing.T) *sharedFlushCluster {
	t.Helper()
	s := &sharedFlushCluster{c: newCluster(t, kfake.SeedTopics(1, "held")), hold: make(chan chan struct{}, 1)}
	admin, err := kgo.NewClient(kgo.SeedBrokers(s.c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "small", 1, 1
	cfg := kmsg.NewCreateTopicsRequestTopicConfig()
	cfg.Name, cfg.Value = "max.message.bytes", kmsg.StringPtr("2048")
	rt.Configs = append(rt.Configs, cfg)
	req.Topics = append(req.Topics, rt)
	if _, err := req.RequestWith(t.Context(), admin); err != nil {
		t.Fatal(err)
	}
	// Produce requests name topics by id (v13 on).
	ids := map[[16]byte]string{}
	meta := kmsg.NewPtrMetadataRequest()
	for _, name := range []string{"small", "held"} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		meta.Topics = append(meta.Topics, mt)
	}
	resp, err := meta.RequestWith(t.Context(), admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, mt := range resp.Topics {
		ids[mt.TopicID] = *mt.Topic
	}
	s.c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		s.c.KeepControl()
		for _, tp := range r.(*kmsg.ProduceRequest).Topics {
			switch cmp.Or(tp.Topic, ids[tp.TopicID]) {
			case "held":
				select {
				case release := <-s.hold:
					s.c.SleepControl(func() { <-release })
				default:
				}
			case "small":
				n := 0
				for _, p := range tp.Partitions {
					var b kmsg.RecordBatch
					if err := b.ReadFrom(p.Records); err == nil {
						n += int(b.NumRecords)
					}
				}
				s.mu.Lock()
				s.carried = append(s.carried, n)
				s.mu.Unlock()
			}
		}
		return nil, nil, false
	})
	return s
}

// whileHeld publishes one record to "held", keeps its Flush running while
// publishes run concurrently (each given time to queue for the next Flush),
// then lets it finish, and returns the publishes' results.
func (s *sharedFlushCluster) whileHeld(t *testing.T, p *Publisher, publishes ...[]outbox.Message) []Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	release := make(chan struct{})
	s.hold <- release
	first := make(chan Result, 1)
	go func() {
		first <- p.PublishDetailed(ctx, []outbox.Message{message(t, 99, "held", []byte("h"), []byte("v"), nil, nil)})
	}()
	for deadline := time.Now().Add(10 * time.Second); len(s.hold) > 0; {
		if time.Now().After(deadline) {
			t.Fatal("the held publish never reached the broker")
		}
		time.Sleep(time.Millisecond)
	}
	out := make([]Result, len(publishes))
	var wg sync.WaitGroup
	for i, msgs := range publishes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = p.PublishDetailed(ctx, msgs)
		}()
	}
	// The publishes check nothing with the brokers (their topics are
	// known): they reach the flusher at once and wait for the held Flush.
	time.Sleep(300 * time.Millisecond)
	close(release)
	wg.Wait()
	if r := <-first; r.Err != nil {
		t.Fatalf("held publish: %v", r.Err)
	}
	return out
}

func TestSharedFlush(t *testing.T) {
	t.Parallel()
	// Defect 4 of issue 39: two buckets retry their failing head rows, each
	// alone, and the two records share one Flush and one partition batch. The
	// broker refuses the batch (MESSAGE_TOO_LARGE, the big record's fault):
	// the small good row must not be condemned as too large. Retried alone
	// again, together again, each goes out in a Flush of its own: the good row
	// is published and only the big one is condemned.
	t.Run("PublishSharedFlushRefusalCondemnsNoNeighbour", func(t *testing.T) {
		t.Parallel()
		s := newSharedFlushCluster(t)
		// A slow hand-over (a descheduled goroutine on a busy host) lets the
		// second publish join the Flush while the first hands over.
		p := newPublisher(t, s.c, func(cfg *Config) {
			cfg.ExtraOpts = append(cfg.ExtraOpts, kgo.WithHooks(slowHandOver(50*time.Millisecond)))
		})
		// Learn both topics first, so the publishes below ask the brokers
		// nothing before they hand over.
		for i, topic := range []string{"small", "held"} {
			if res := p.PublishDetailed(t.Context(), []outbox.Message{message(t, int64(i+1), topic, []byte("w"), []byte("v"), nil, nil)}); res.Err != nil {
				t.Fatal(res.Err)
			}
		}
		s.mu.Lock()
		s.carried = nil
		s.mu.Unlock()
		good := []outbox.Message{message(t, 10, "small", []byte("good"), []byte("v"), nil, nil)}
		big := []outbox.Message{message(t, 20, "small", []byte("big"), randomBytes(4000), nil, nil)}

		res := s.whileHeld(t, p, good, big)
		s.mu.Lock()
		carried := append([]int(nil), s.carried...)
		s.mu.Unlock()
		if len(carried) != 1 || carried[0] != 2 {
			t.Fatalf("produce requests for small carried %v records, want one request with both: the test proves nothing", carried)
		}
		for i, r := range res {
			if r.Acked != 0 || !errors.Is(r.Err, kerr.MessageTooLarge) {
				t.Fatalf("publish %d in the shared Flush: acked %d, err %v; want MESSAGE_TOO_LARGE", i, r.Acked, r.Err)
			}
			if reason, poison := outbox.PoisonReason(r.Err); poison {
				t.Fatalf("publish %d was condemned (%s) for a refusal of a batch it shared", i, reason)
			}
		}

		res = s.whileHeld(t, p, good, big)
		if res[0].Acked != 1 || res[0].Err != nil {
			t.Fatalf("the good row retried: acked %d, err %v; want it published", res[0].Acked, res[0].Err)
		}
		wantPoison(t, res[1].Err, outbox.ParkTooLarge)
		// The good row's key goes on in order: the row, then its successor.
		next := message(t, 11, "small", []byte("good"), []byte("v2"), nil, nil)
		if r := p.PublishDetailed(t.Context(), []outbox.Message{next}); r.Err != nil {
			t.Fatal(r.Err)
		}
		var order []string
		for _, r := range consume(t, s.c.ListenAddrs(), "small", 3) {
			if string(r.Key) == "good" {
				order = append(order, string(r.Value))
			}
		}
		if len(order) != 2 || order[0] != "v" || order[1] != "v2" {
			t.Fatalf("key good reads %v, want [v v2]", order)
		}
	})
}

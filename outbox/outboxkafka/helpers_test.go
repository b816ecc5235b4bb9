package outboxkafka

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway-dev/spillway/outbox"
)

// newCluster starts a one-broker kfake cluster on loopback. One broker keeps
// every produce on one connection, so request counts are exact.
func newCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatalf("start kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// producedRecords counts the records of each produce request a cluster
// received, in order.
type producedRecords struct {
	mu      sync.Mutex
	carried []int
}

// countProduced has c count the records of every produce request.
func countProduced(c *kfake.Cluster) *producedRecords {
	p := &producedRecords{}
	c.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		n := 0
		for _, tp := range r.(*kmsg.ProduceRequest).Topics {
			for _, part := range tp.Partitions {
				var b kmsg.RecordBatch
				if err := b.ReadFrom(part.Records); err == nil {
					n += int(b.NumRecords)
				}
			}
		}
		p.mu.Lock()
		p.carried = append(p.carried, n)
		p.mu.Unlock()
		return nil, nil, false
	})
	return p
}

// take returns the counts so far and starts counting afresh.
func (p *producedRecords) take() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	carried := p.carried
	p.carried = nil
	return carried
}

// newVirtualCluster is newCluster on an in-memory network, for a test in a
// testing/synctest bubble (whose clock cannot move while a goroutine waits
// on a socket); dial is the client option that reaches it.
func newVirtualCluster(t testing.TB, opts ...kfake.Opt) (c *kfake.Cluster, dial kgo.Opt) {
	t.Helper()
	network := new(kfake.VirtualNetwork)
	c = newCluster(t, append([]kfake.Opt{kfake.ListenFn(network.Listen), kfake.Ports(9092)}, opts...)...)
	return c, kgo.Dialer(network.DialContext)
}

// fastRetries keeps an injected retriable error from costing the client's
// default five-second metadata wait.
func fastRetries() []kgo.Opt {
	return []kgo.Opt{
		kgo.MetadataMinAge(10 * time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }),
	}
}

// newPublisher returns a publisher on c with fast retries; edit adjusts the
// config before New.
func newPublisher(t testing.TB, c *kfake.Cluster, edit ...func(*Config)) *Publisher {
	t.Helper()
	cfg := Config{Brokers: c.ListenAddrs(), ExtraOpts: fastRetries()}
	for _, e := range edit {
		e(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// message builds a stored-looking message: an id, a bucket and a sequence.
func message(t testing.TB, seq int64, topic string, key, value []byte, headers []outbox.Header, partition *int32) outbox.Message {
	t.Helper()
	m, err := outbox.NewMessage(topic, key, value, outbox.MessageOptions{Headers: headers, Partition: partition})
	if err != nil {
		t.Fatalf("NewMessage: %v", err)
	}
	b, err := outbox.ComputeBucket(key, m.ID, outbox.DefaultBucketCount, partition)
	if err != nil {
		t.Fatal(err)
	}
	return outbox.Stored(m, b, seq)
}

func ptr[T any](v T) *T { return &v }

// consume reads n records of topic from the start, failing the test if fewer
// arrive within ten seconds; opts are further client options (a dialer).
func consume(t testing.TB, brokers []string, topic string, n int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, opts...)...)
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s: got %d of %d records: %v", topic, len(recs), n, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("consume %s[%d]: %v", topic, p, err)
		})
		recs = append(recs, fs.Records()...)
	}
	return recs
}

// endOffsets returns each partition's high watermark: how many records the
// broker holds, so a test can prove that nothing beyond what it consumed was
// written.
func endOffsets(t testing.TB, brokers []string, topic string, partitions int32) []int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer cl.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.Timestamp = -1 // latest
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		t.Fatalf("list offsets %s: %v", topic, err)
	}
	out := make([]int64, partitions)
	for _, rt := range kresp.(*kmsg.ListOffsetsResponse).Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				t.Fatalf("list offsets %s[%d]: error code %d", topic, rp.Partition, rp.ErrorCode)
			}
			out[rp.Partition] = rp.Offset
		}
	}
	return out
}

// byID indexes consumed records by their message id header.
func byID(t testing.TB, recs []*kgo.Record, header string) map[string]*kgo.Record {
	t.Helper()
	out := make(map[string]*kgo.Record, len(recs))
	for _, r := range recs {
		var id string
		for _, h := range r.Headers {
			if h.Key == header {
				id = string(h.Value)
			}
		}
		if _, dup := out[id]; dup {
			t.Fatalf("message %q consumed twice", id)
		}
		out[id] = r
	}
	return out
}

// fixedClock is an outbox.Clock that always reads the same instant.
type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// connectCounter counts broker connections the client opens.
type connectCounter struct{ n atomic.Int64 }

func (c *connectCounter) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		c.n.Add(1)
	}
}

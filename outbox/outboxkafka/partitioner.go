package outboxkafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox/internal/murmur2"
)

// partitioner places records the way the outbox promises:
//
//   - a record built from a message with an explicit partition goes there
//     (a partition the topic lacks fails the record);
//   - any non-nil key, the empty key included, goes to
//     murmur2.Partition(key, n), the Java client's placement;
//   - a nil key goes to a sticky random partition, changing when a batch
//     fills.
//
// franz-go's hashing partitioners ignore a preset partition and its
// ManualPartitioner cannot hash, so one partitioner handles all three; the
// hash is the same function that computes buckets, so the two cannot drift.
// The explicit partition travels in the record's Context, which the client
// never rewrites (it does rewrite Record.Partition while buffering, and may
// partition a record twice, so that field cannot carry the flag).
type partitioner struct{}

func newPartitioner() kgo.Partitioner { return partitioner{} }

// ForTopic implements kgo.Partitioner.
func (partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	sticky := kgo.StickyPartitioner().ForTopic(topic)
	onNewBatch, _ := sticky.(kgo.TopicPartitionerOnNewBatch)
	return &topicPartitioner{sticky: sticky, onNewBatch: onNewBatch}
}

type topicPartitioner struct {
	sticky     kgo.TopicPartitioner
	onNewBatch kgo.TopicPartitionerOnNewBatch
}

// RequiresConsistency keeps explicit and keyed records on their partition
// even while it is unavailable: moving them would break per-key order.
func (*topicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	_, explicit := explicitPartition(r)
	return explicit || r.Key != nil
}

// Partition implements kgo.TopicPartitioner.
func (p *topicPartitioner) Partition(r *kgo.Record, n int) int {
	if part, ok := explicitPartition(r); ok {
		return int(part)
	}
	if r.Key != nil {
		return murmur2.Partition(r.Key, n)
	}
	return p.sticky.Partition(r, n)
}

// OnNewBatch lets the sticky placement of keyless records move on.
func (p *topicPartitioner) OnNewBatch() {
	if p.onNewBatch != nil {
		p.onNewBatch.OnNewBatch()
	}
}

// partitionKey is the context key of an explicit partition. A named
// non-struct type avoids colliding with other packages' keys.
type partitionKey int

const explicitPartitionKey partitionKey = 0

// withExplicitPartition returns ctx carrying an explicit partition for the
// partitioner.
func withExplicitPartition(ctx context.Context, partition int32) context.Context {
	return context.WithValue(ctx, explicitPartitionKey, partition)
}

func explicitPartition(r *kgo.Record) (int32, bool) {
	if r.Context == nil {
		return 0, false
	}
	p, ok := r.Context.Value(explicitPartitionKey).(int32)
	return p, ok
}

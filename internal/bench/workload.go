package bench

import (
	"fmt"
	"math/rand/v2"

	"github.com/spillway-dev/spillway/outbox"
)

// Workload builds the messages of a scenario deterministically: message i
// has key "customer-%06d" (so its bucket is fixed) and a value of
// incompressible pseudo-random bytes (the Kafka client compresses batches;
// real payloads rarely shrink much). Ids are random, as in production.
type Workload struct {
	topic       string
	valueSize   int
	bucketCount int
	value       []byte
}

// NewWorkload returns the workload of valueSize-byte values over
// bucketCount buckets, on topic.
func NewWorkload(topic string, valueSize, bucketCount int) *Workload {
	rng := rand.New(rand.NewPCG(uint64(valueSize), 0x5be11))
	value := make([]byte, valueSize)
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	return &Workload{topic: topic, valueSize: valueSize, bucketCount: bucketCount, value: value}
}

// Key returns message i's key.
func Key(i int) []byte { return fmt.Appendf(nil, "customer-%06d", i) }

// Message returns message i. The value is shared between messages: neither
// the writer nor the relay changes it.
func (w *Workload) Message(i int) (outbox.Message, error) {
	m, err := outbox.NewMessage(w.topic, Key(i), w.value, outbox.MessageOptions{})
	if err != nil {
		return outbox.Message{}, fmt.Errorf("bench: build message %d: %w", i, err)
	}
	return m, nil
}

// Messages returns messages first .. first+n-1.
func (w *Workload) Messages(first, n int) ([]outbox.Message, error) {
	out := make([]outbox.Message, n)
	for i := range out {
		m, err := w.Message(first + i)
		if err != nil {
			return nil, err
		}
		out[i] = m
	}
	return out, nil
}

// BucketOf returns message i's bucket.
func (w *Workload) BucketOf(i int) int {
	b, _ := outbox.ComputeBucket(Key(i), outbox.MessageID{}, w.bucketCount, nil)
	return b
}

package bench

import (
	"fmt"
	"math/rand/v2"

	"github.com/spillway-dev/spillway/outbox"
)

// workload builds the messages of a scenario deterministically: message i
// has key "customer-%06d" (so its bucket is fixed) and a value of
// incompressible pseudo-random bytes (the Kafka client compresses batches;
// real payloads rarely shrink much). Ids are random, as in production.
type workload struct {
	topic       string
	valueSize   int
	bucketCount int
	value       []byte
}

func newWorkload(topic string, valueSize, bucketCount int) *workload {
	rng := rand.New(rand.NewPCG(uint64(valueSize), 0x5be11))
	value := make([]byte, valueSize)
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	return &workload{topic: topic, valueSize: valueSize, bucketCount: bucketCount, value: value}
}

// key returns message i's key.
func key(i int) []byte { return fmt.Appendf(nil, "customer-%06d", i) }

// message returns message i. The value is shared between messages: neither
// the writer nor the relay changes it.
func (w *workload) message(i int) (outbox.Message, error) {
	m, err := outbox.NewMessage(w.topic, key(i), w.value, outbox.MessageOptions{BucketCount: w.bucketCount})
	if err != nil {
		return outbox.Message{}, fmt.Errorf("bench: build message %d: %w", i, err)
	}
	return m, nil
}

// messages returns messages first .. first+n-1.
func (w *workload) messages(first, n int) ([]outbox.Message, error) {
	out := make([]outbox.Message, n)
	for i := range out {
		m, err := w.message(first + i)
		if err != nil {
			return nil, err
		}
		out[i] = m
	}
	return out, nil
}

// bucketOf returns message i's bucket.
func (w *workload) bucketOf(i int) int {
	b, _ := outbox.ComputeBucket(key(i), outbox.MessageID{}, w.bucketCount, nil)
	return b
}

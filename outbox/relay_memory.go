package outbox

import (
	"context"
	"sync"
)

// messageOverhead is what a held message costs beyond its key, value,
// headers and topic: the Message struct, its slices' headers and the
// bookkeeping around it, rounded up.
const messageOverhead = 512

// DefaultMaxMessageBytes is the largest message a DynamoDB item can hold
// (400 KB), the default of RelayOptions.MaxMessageBytes.
const DefaultMaxMessageBytes = 400 * 1024

// heapPerHeldByte is the Go heap budgeted per byte of message held. A
// batch exists in several copies while it is fetched and published: the
// store's response body and its decoded attributes, the message itself and
// the Kafka client's record buffer; and garbage waits for the collector.
// Four leaves room for those; TestRelayMemory_HeldBytesStayWithinTheBudget
// measures the live heap under the resulting bound.
const heapPerHeldByte = 4

// HeldBytesForMemory returns the RelayOptions.MaxHeldBytes that keeps a
// relay's peak heap within memoryBytes (e.g. the Lambda function's memory):
// a quarter of it, since each held byte costs up to heapPerHeldByte bytes of
// heap. It returns 0 (no bound) for memoryBytes <= 0.
func HeldBytesForMemory(memoryBytes int64) int64 {
	if memoryBytes <= 0 {
		return 0
	}
	return memoryBytes / heapPerHeldByte
}

// HeldSize is what a message counts against RelayOptions.MaxHeldBytes.
func HeldSize(m Message) int64 {
	return int64(len(m.Key)+len(m.Value)+len(m.Headers)+len(m.Topic)) + messageOverhead
}

// byteBudget bounds the bytes of the messages a relay holds across its
// buckets. A bucket reserves room for a whole batch of the largest messages
// before it fetches, gives back what the fetched batch does not use, and
// releases the rest when the batch is deleted or given up. A bucket waits
// for room only while it holds nothing, so waiting never deadlocks.
type byteBudget struct {
	limit, perMessage int64

	mu    sync.Mutex
	held  int64
	freed chan struct{} // closed and replaced on every release
}

// newByteBudget returns nil, no bound, for limit <= 0.
func newByteBudget(limit, maxMessage int64) *byteBudget {
	if limit <= 0 {
		return nil
	}
	return &byteBudget{limit: limit, perMessage: maxMessage + messageOverhead, freed: make(chan struct{})}
}

// grant is one batch's reservation.
type grant struct {
	b     *byteBudget
	count int   // messages the batch may fetch
	bytes int64 // bytes reserved
}

// reserve waits until at least one message fits and reserves room for up to
// want of the largest messages; with nothing held, one always fits. ok is
// false when ctx ended first.
func (b *byteBudget) reserve(ctx context.Context, want int) (g grant, ok bool) {
	if b == nil {
		return grant{count: want}, true
	}
	for {
		b.mu.Lock()
		n := int(min(int64(want), (b.limit-b.held)/b.perMessage))
		if n < 1 && b.held == 0 {
			n = 1
		}
		if n >= 1 {
			g = grant{b: b, count: n, bytes: int64(n) * b.perMessage}
			b.held += g.bytes
			b.mu.Unlock()
			return g, true
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return grant{}, false
		}
	}
}

func (b *byteBudget) release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held -= n
	close(b.freed)
	b.freed = make(chan struct{})
}

// fit gives back the room the fetched msgs do not need.
func (g *grant) fit(msgs []Message) {
	var used int64
	for _, m := range msgs {
		used += HeldSize(m)
	}
	if used < g.bytes {
		g.b.release(g.bytes - used)
		g.bytes = used
	}
}

// done releases the batch's reservation.
func (g *grant) done() {
	g.b.release(g.bytes)
	g.bytes = 0
}

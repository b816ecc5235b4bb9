package outbox

import (
	"context"
	"sync"
)

// messageOverhead is what a held message costs beyond its key, value,
// headers and topic: the Message struct, its slices' headers and the
// bookkeeping around it, rounded up.
const messageOverhead = 512

// defaultMaxMessageBytes is the largest message a DynamoDB item can hold
// (400 KB), the default of RelayOptions.MaxMessageBytes.
const defaultMaxMessageBytes = 400 * 1024

// How a relay of a given memory spends it (MemoryBudgetFor), as measured
// by `spillway bench --scenario memory` on a relay draining 395 KB values:
//
//   - rssTarget: Lambda counts the whole sandbox, so the process keeps
//     15% of the function's memory free.
//   - fileFootprint: the binary's text and data the process touches, RSS
//     that Go's memory limit does not govern (about 30 MB for the relay
//     function and the CLI).
//   - baseHeap: the live heap of an idle relay (runtime, AWS SDK, Kafka
//     client).
//   - Each held byte costs up to about 1.5 bytes of live heap (the message
//     and, for the quarter of it the Kafka client may buffer, the encoded
//     and compressed request), and the collector needs as much again as
//     headroom under the soft limit: two bytes of the limit per held byte.
const (
	rssTarget     = 85
	fileFootprint = 32 << 20
	baseHeap      = 12 << 20
	limitPerHeld  = 2
	// producerShare is the part of the held bytes the Kafka client may
	// buffer for one Flush; its request encodes and compresses them.
	producerShare = 4
)

// fetchPageBytes is what one fetch holds beyond its messages while it
// decodes a Query page: a page carries at most 1 MB of items, sent as up to
// about 1.4 MB of JSON with base64 values that the SDK decodes through
// strings. A bucket reserves it with its batch and gives it back with the
// room its batch does not use.
const fetchPageBytes = 3 << 20

// MemoryBudget is how a relay with a given memory spends it. The zero value
// bounds nothing.
type MemoryBudget struct {
	// SoftLimit is the Go runtime's soft memory limit (GOMEMLIMIT): the
	// memory's 85% less the binary's footprint, which the limit does not
	// govern, so the process's peak RSS stays within 85% of the memory.
	SoftLimit int64
	// MaxHeldBytes is RelayOptions.MaxHeldBytes: the messages fetched and
	// not yet deleted, with the Query page being decoded of each fetch.
	MaxHeldBytes int64
	// ProducerBufferBytes bounds the record bytes the Kafka client holds
	// for one Flush (kgo.MaxBufferedBytes): a quarter of MaxHeldBytes.
	ProducerBufferBytes int64
}

// MemoryBudgetFor returns the budget that keeps a relay's peak RSS within
// 85% of memoryBytes (e.g. the Lambda function's memory). It returns the
// zero budget, no bound, for memoryBytes <= 0. For 128 MB it holds 32 MB
// of messages, for 512 MB 196 MB. Below about 60 MB the memory is too small
// for a relay: the budget holds one message at a time.
func MemoryBudgetFor(memoryBytes int64) MemoryBudget {
	if memoryBytes <= 0 {
		return MemoryBudget{}
	}
	soft := max(memoryBytes*rssTarget/100-fileFootprint, baseHeap+2*fetchPageBytes)
	held := max((soft-baseHeap)/limitPerHeld, 1)
	return MemoryBudget{SoftLimit: soft, MaxHeldBytes: held, ProducerBufferBytes: held / producerShare}
}

// heldSize is what a message counts against RelayOptions.MaxHeldBytes.
func heldSize(m Message) int64 {
	return int64(len(m.Key)+len(m.Value)+len(m.Headers)+len(m.Topic)) + messageOverhead
}

// byteBudget bounds the bytes of the messages a relay holds across its
// buckets. A bucket reserves room for a whole batch of the largest messages
// and the Query page it decodes (fetchPageBytes) before it fetches, gives
// back what the fetched batch does not use (the page with it), and
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
// want of the largest messages and a page; with nothing held, one always
// fits. ok is
// false when ctx ended first.
func (b *byteBudget) reserve(ctx context.Context, want int) (g grant, ok bool) {
	if b == nil {
		return grant{count: want}, true
	}
	for {
		b.mu.Lock()
		n := int(min(int64(want), (b.limit-b.held-fetchPageBytes)/b.perMessage))
		if n < 1 && b.held == 0 {
			n = 1
		}
		if n >= 1 {
			g = grant{b: b, count: n, bytes: int64(n)*b.perMessage + fetchPageBytes}
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

// fit gives back the room the fetched msgs do not need, the decoded page's
// among it.
func (g *grant) fit(msgs []Message) {
	var used int64
	for _, m := range msgs {
		used += heldSize(m)
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

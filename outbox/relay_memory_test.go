package outbox_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// heldCount counts what a relay holds, fetched and not yet deleted, over a
// store observed (outboxtest.ObservedStore) so that its fetches return fresh
// valueSize-byte values, as a real store decodes each fetched item into
// new memory.
type heldCount struct {
	valueSize int

	mu         sync.Mutex
	held, peak int64
}

// observe returns store observed by c.
func (c *heldCount) observe(store outbox.Store) outbox.Store {
	return outboxtest.Observe(outboxtest.ObservedStore{Store: store, FetchBatchFunc: c.fetchBatch, MarkPublishedFunc: c.markPublished})
}

func (c *heldCount) fetchBatch(ctx context.Context, bucket, limit int, next func(context.Context, int, int) ([]outbox.Message, error)) ([]outbox.Message, error) {
	// The last page is decoded while the batch's earlier messages exist:
	// both count until the fetch returns.
	c.count(outbox.FetchPageBytes)
	msgs, err := next(ctx, bucket, limit)
	var held int64
	for i := range msgs {
		v := make([]byte, c.valueSize)
		v[0] = byte(i)
		msgs[i].Value = v
		held += outbox.HeldSize(msgs[i])
	}
	c.count(held)
	c.count(-outbox.FetchPageBytes)
	return msgs, err
}

func (c *heldCount) count(n int64) {
	c.mu.Lock()
	c.held += n
	c.peak = max(c.peak, c.held)
	c.mu.Unlock()
}

func (c *heldCount) markPublished(ctx context.Context, bucket int, msgs []outbox.Message, next func(context.Context, int, []outbox.Message) error) error {
	err := next(ctx, bucket, msgs)
	var held int64
	for _, m := range msgs {
		held += outbox.HeldSize(m)
	}
	c.count(-held)
	return err
}

// heapMeter is a Publisher that discards records and measures the live
// heap on every call. Publish is where a relay holds the most: its
// buckets' batches are fetched by then.
type heapMeter struct {
	mu        sync.Mutex
	base      uint64
	peakHeap  uint64
	published int
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func (h *heapMeter) Init(context.Context) error { return nil }

func (h *heapMeter) Publish(_ context.Context, msgs []outbox.Message) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.peakHeap = max(h.peakHeap, liveHeap()-h.base)
	h.published += len(msgs)
	return len(msgs), nil
}

func TestRelayMemory(t *testing.T) {
	// 400 KB messages, eight buckets drained at once, 200-message batches:
	// unbounded, the relay would hold 640 MB. Under the budget of 128 MB and of
	// 512 MB of memory it never holds more than MaxHeldBytes, counting the
	// messages fetched and not yet deleted and the Query page each fetch is
	// decoding, and its measured heap stays within the memory.
	t.Run("HeldBytesStayWithinTheBudget", func(t *testing.T) {
		for _, memory := range []int64{128 << 20, 512 << 20} {
			t.Run(fmt.Sprintf("%dMB", memory>>20), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { relayWithinBudget(t, memory) })
			})
		}
	})

	// The budget's arithmetic, pinned: 85% of the memory less the binary's
	// 32 MB is the soft limit, half of it less 12 MB of idle heap is held, a
	// quarter of that is the Kafka client's; a small memory keeps a floor.
	t.Run("MemoryBudgetFor", func(t *testing.T) {
		for _, c := range []struct {
			memory int64
			want   outbox.MemoryBudget
		}{
			{0, outbox.MemoryBudget{}},
			{-1, outbox.MemoryBudget{}},
			{128 << 20, outbox.MemoryBudget{SoftLimit: 80_530_636, MaxHeldBytes: 33_973_862, ProducerBufferBytes: 8_493_465}},
			{512 << 20, outbox.MemoryBudget{SoftLimit: 422_785_843, MaxHeldBytes: 205_101_465, ProducerBufferBytes: 51_275_366}},
			{32 << 20, outbox.MemoryBudget{SoftLimit: 18_874_368, MaxHeldBytes: 3_145_728, ProducerBufferBytes: 786_432}},
		} {
			if got := outbox.MemoryBudgetFor(c.memory); got != c.want {
				t.Errorf("MemoryBudgetFor(%d) = %+v, want %+v", c.memory, got, c.want)
			}
		}
	})
}

func relayWithinBudget(t *testing.T, memory int64) {
	const (
		valueSize = 400 * 1024
		buckets   = 8
		perBucket = 200
	)
	limit := outbox.MemoryBudgetFor(memory).MaxHeldBytes
	meter := &heapMeter{}
	store := &heldCount{valueSize: valueSize}
	e := newRelayEnv(t, buckets, func(c *outbox.RelayConfig) {
		c.Options.BatchSize = 200
		c.Options.MaxConcurrency = buckets
		c.Options.MaxHeldBytes = limit
		c.Store = store.observe(c.Store)
		c.Publisher = meter
	})
	for b := range buckets {
		for range perBucket {
			e.store.add(b, "k")
		}
	}
	meter.base = liveHeap()
	res := e.run(t, outbox.RunInput{})
	if res.Deleted != buckets*perBucket || meter.published != buckets*perBucket {
		t.Fatalf("deleted %d, published %d; want %d", res.Deleted, meter.published, buckets*perBucket)
	}
	t.Logf("memory %d MB: held at most %.1f MB (limit %.1f MB), peak live heap above the start %.1f MB",
		memory>>20, float64(store.peak)/(1<<20), float64(limit)/(1<<20), float64(meter.peakHeap)/(1<<20))
	if store.peak > limit {
		t.Errorf("held %d bytes at once, over the limit %d", store.peak, limit)
	}
	if store.peak < limit-limit/4 {
		t.Errorf("held at most %d bytes, under three quarters of the limit %d: the budget is not used", store.peak, limit)
	}
	if meter.peakHeap > uint64(memory) {
		t.Errorf("peak live heap %d bytes, over the %d-byte memory", meter.peakHeap, memory)
	}
}

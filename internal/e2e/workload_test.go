package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// ledger remembers what was enqueued: every message by id, and the ids of
// each key of each topic in enqueue order (order is kept per topic
// partition, and a key has one partition per topic).
type ledger struct {
	mu    sync.Mutex
	byID  map[outbox.MessageID]outbox.Message
	order map[string][]outbox.MessageID
}

func newLedger() *ledger {
	return &ledger{byID: map[outbox.MessageID]outbox.Message{}, order: map[string][]outbox.MessageID{}}
}

func (l *ledger) add(msgs ...outbox.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		l.byID[m.ID] = m
		k := orderKey(m)
		l.order[k] = append(l.order[k], m.ID)
	}
}

func orderKey(m outbox.Message) string { return m.Topic + "/" + string(m.Key) }

func (l *ledger) topics() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, m := range l.byID {
		if !slices.Contains(out, m.Topic) {
			out = append(out, m.Topic)
		}
	}
	slices.Sort(out)
	return out
}

// workload describes a mixed enqueue: messages over keys, written by
// writers goroutines that own disjoint keys (so each key's enqueue order
// is one goroutine's order), cycling through single Enqueue calls,
// EnqueueBatch lists and business transactions.
type workload struct {
	messages, keys, writers, valueSize int
	seed                               uint64
}

// mixCounts says how many calls of each kind a workload made.
type mixCounts struct{ single, batches, transactions int }

func (m mixCounts) String() string {
	return fmt.Sprintf("%d Enqueue, %d EnqueueBatch, %d business transactions", m.single, m.batches, m.transactions)
}

// message builds a message to "orders" of the default 8 buckets for key.
func (b *backend) message(t testing.TB, key string, valueSize int) outbox.Message {
	t.Helper()
	return b.messageTo(t, topic, key, valueSize)
}

// messageTo builds a message to tp of the default 8 buckets for key.
func (b *backend) messageTo(t testing.TB, tp, key string, valueSize int) outbox.Message {
	t.Helper()
	value := []byte(fmt.Sprintf("value for %s ", key))
	if pad := valueSize - len(value); pad > 0 {
		value = append(value, bytes.Repeat([]byte{'.'}, pad)...)
	}
	m, err := outbox.NewMessage(tp, []byte(key), value, outbox.MessageOptions{CreatedAt: b.clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func keyName(k int) string { return fmt.Sprintf("key-%04d", k) }

// enqueueMixed runs the workload and returns what it enqueued.
func (b *backend) enqueueMixed(t testing.TB, w workload) (*ledger, mixCounts) {
	t.Helper()
	l := newLedger()
	counts := make([]mixCounts, w.writers)
	var wg sync.WaitGroup
	errs := make(chan error, w.writers)
	for g := range w.writers {
		share := w.messages / w.writers
		if g == 0 {
			share += w.messages % w.writers
		}
		wg.Go(func() {
			if err := b.writeShare(t, l, w, g, share, &counts[g]); err != nil {
				errs <- fmt.Errorf("writer %d: %w", g, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var total mixCounts
	for _, c := range counts {
		total.single += c.single
		total.batches += c.batches
		total.transactions += c.transactions
	}
	return l, total
}

func (b *backend) writeShare(t testing.TB, l *ledger, w workload, g, share int, counts *mixCounts) error {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(w.seed, uint64(g)))
	var keys []string
	for k := g; k < w.keys; k += w.writers {
		keys = append(keys, keyName(k))
	}
	for call := 0; share > 0; call++ {
		size := 1
		switch call % 3 {
		case 1:
			size = 1 + rng.IntN(100)
		case 2:
			size = 1 + rng.IntN(99) // one action is the business write
		}
		size = min(size, share)
		msgs := make([]outbox.Message, size)
		for i := range msgs {
			msgs[i] = b.message(t, keys[rng.IntN(len(keys))], w.valueSize)
		}
		var stored []outbox.Message
		var err error
		switch call % 3 {
		case 0:
			var m outbox.Message
			m, err = b.writer.Enqueue(ctx, msgs[0])
			stored = []outbox.Message{m}
			counts.single++
		case 1:
			stored, err = b.writer.EnqueueBatch(ctx, msgs)
			counts.batches++
		case 2:
			stored, err = b.businessTransaction(ctx, fmt.Sprintf("ORDER#%d-%d", g, call), msgs)
			counts.transactions++
		}
		if err != nil {
			return err
		}
		l.add(stored...)
		share -= size
	}
	return nil
}

// businessTransaction commits msgs with a business write in the caller's
// own TransactWriteItems.
func (b *backend) businessTransaction(ctx context.Context, order string, msgs []outbox.Message) ([]outbox.Message, error) {
	p, err := b.writer.Prepare(ctx, msgs...)
	if err != nil {
		return nil, err
	}
	business := types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(b.opts.TableName),
		Item: map[string]types.AttributeValue{
			"PK": &types.AttributeValueMemberS{Value: order}, "SK": &types.AttributeValueMemberS{Value: "ORDER"},
			"Lines": &types.AttributeValueMemberN{Value: fmt.Sprint(len(msgs))},
		},
		ConditionExpression: aws.String("attribute_not_exists(PK)"),
	}}
	all := append(p.Items(), business)
	if _, err := b.ddb.Client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: all}); err != nil {
		return nil, p.Explain(err)
	}
	p.Committed(ctx)
	return p.Messages(), nil
}

// enqueueBuckets enqueues perBucket messages into each of the first
// buckets buckets, in lists of up to 100, with one key per bucket.
func (b *backend) enqueueBuckets(t testing.TB, buckets, perBucket, valueSize int) *ledger {
	t.Helper()
	keys := bucketKeys(t, buckets)
	var msgs []outbox.Message
	for range perBucket {
		for bucket := range buckets {
			msgs = append(msgs, b.message(t, keys[bucket], valueSize))
		}
	}
	l := newLedger()
	b.enqueueLists(t, l, msgs)
	return l
}

// enqueueLists enqueues msgs in order, in lists of up to 100.
func (b *backend) enqueueLists(t testing.TB, l *ledger, msgs []outbox.Message) {
	t.Helper()
	for len(msgs) > 0 {
		n := min(len(msgs), 100)
		stored, err := b.writer.EnqueueBatch(t.Context(), msgs[:n])
		if err != nil {
			t.Fatal(err)
		}
		l.add(stored...)
		msgs = msgs[n:]
	}
}

// bucketKeys returns a key for each of the first n buckets (of 8).
func bucketKeys(t testing.TB, n int) []string {
	t.Helper()
	keys := make([]string, n)
	found := 0
	for k := 0; found < n; k++ {
		key := keyName(k)
		bucket, err := outbox.ComputeBucket([]byte(key), outbox.MessageID{}, outbox.DefaultBucketCount, nil)
		if err != nil {
			t.Fatal(err)
		}
		if bucket < n && keys[bucket] == "" {
			keys[bucket] = key
			found++
		}
	}
	return keys
}

// delivery summarises what the consumer read.
type delivery struct {
	records, distinct, duplicates int
}

// verify consumes every topic of l and checks the delivery contract: every
// message delivered at least once, as enqueued, with the dedup header
// equal to its id; each key's first deliveries in enqueue order (keys map
// to one partition, and ConsumeAll reads each partition in offset order).
func (b *backend) verify(t testing.TB, l *ledger) delivery {
	t.Helper()
	var d delivery
	seen := map[outbox.MessageID]int{}
	first := map[string][]outbox.MessageID{}
	for _, tp := range l.topics() {
		for _, r := range outboxtest.ConsumeAll(t, b.kafka, tp) {
			d.records++
			if len(r.Headers) == 0 || r.Headers[len(r.Headers)-1].Key != outbox.DefaultMessageIDHeaderName {
				t.Fatalf("record %s/%d@%d has no dedup header last: %v", r.Topic, r.Partition, r.Offset, r.Headers)
			}
			raw := string(r.Headers[len(r.Headers)-1].Value)
			id, err := outbox.ParseMessageID(raw)
			if err != nil {
				t.Fatalf("record %s/%d@%d: dedup header %q: %v", r.Topic, r.Partition, r.Offset, raw, err)
			}
			m, ok := l.byID[id]
			if !ok || raw != m.ID.String() {
				t.Fatalf("record %s/%d@%d carries id %q, which names no enqueued message", r.Topic, r.Partition, r.Offset, raw)
			}
			if r.Topic != m.Topic || !bytes.Equal(r.Key, m.Key) || !bytes.Equal(r.Value, m.Value) {
				t.Fatalf("record %s/%d@%d does not carry message %s as enqueued", r.Topic, r.Partition, r.Offset, raw)
			}
			if seen[id] == 0 {
				first[orderKey(m)] = append(first[orderKey(m)], id)
			}
			seen[id]++
		}
	}
	d.distinct = len(seen)
	d.duplicates = d.records - d.distinct
	var missing []string
	for id := range l.byID {
		if seen[id] == 0 {
			missing = append(missing, id.String())
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d messages never delivered, e.g. %s", len(missing), len(l.byID), strings.Join(missing[:min(3, len(missing))], ", "))
	}
	for key, want := range l.order {
		if got := first[key]; !slices.Equal(got, want) {
			t.Fatalf("key %s: first deliveries out of enqueue order (%d messages)", key, len(want))
		}
	}
	return d
}

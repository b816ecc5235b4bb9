package outboxinbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxobs/emf"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// syncBuffer is a bytes.Buffer safe for the consumer's goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stream is what a test produced: the records in order, and per key the
// values whose effects a consumer must apply once each, in order.
type stream struct {
	recs []*kgo.Record
	ids  []outbox.MessageID // distinct ids in production order
	want map[string][]string
	dups int
}

// add appends a new message for key.
func (s *stream) add(topic, key string) {
	id := outbox.NewMessageID()
	value := fmt.Sprintf("%s:%d", key, len(s.want[key]))
	if s.want == nil {
		s.want = map[string][]string{}
	}
	s.want[key] = append(s.want[key], value)
	s.ids = append(s.ids, id)
	s.recs = append(s.recs, &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value), Headers: []kgo.RecordHeader{{Key: outbox.DefaultMessageIDHeaderName, Value: []byte(id.String())}}})
}

// again appends a copy of record i, as a relay publishing it twice does.
func (s *stream) again(i int) {
	r := *s.recs[i]
	s.recs = append(s.recs, &r)
	s.dups++
}

func produce(t testing.TB, k *outboxlocal.Kafka, recs []*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(k.ClientOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fresh := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		c := *r
		fresh[i] = &c
	}
	if err := cl.ProduceSync(t.Context(), fresh...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func (e *env) consumer(t testing.TB, k *outboxlocal.Kafka, in *outboxinbox.Inbox, h outboxinbox.Handler, tweak ...func(*outboxinbox.ConsumerConfig)) *outboxinbox.Consumer {
	t.Helper()
	cfg := outboxinbox.ConsumerConfig{
		Inbox: in, Handler: h, Group: "billing", Topics: []string{"orders"}, Brokers: k.Brokers,
		ClientOpts:   append(outboxlocal.TestClientOpts(), kgo.HeartbeatInterval(100*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())),
		ErrorBackoff: 50 * time.Millisecond, Logger: quiet(),
	}
	for _, fn := range tweak {
		fn(&cfg)
	}
	c, err := outboxinbox.NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// running runs c until stop is called; stop returns Run's error.
func running(c *outboxinbox.Consumer) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	return func() error { cancel(); return <-errc }
}

// waitFor polls cond for up to 30 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// verify checks that every message's effect exists once and that each
// key's effects follow the partition order.
func (e *env) verify(t testing.TB, s *stream) {
	t.Helper()
	for _, id := range s.ids {
		if n := e.applied(t, id.String()); n != 1 {
			t.Fatalf("message %s applied %d times, want once", id, n)
		}
	}
	for key, want := range s.want {
		if got := e.log(t, key); !slices.Equal(got, want) {
			t.Fatalf("effects of %s in order %v, want %v", key, got, want)
		}
	}
}

func consumed(ins ...*outboxinbox.Inbox) (n, dups int64) {
	for _, in := range ins {
		c := in.Metrics().Snapshot()
		n += c.Consumed
		dups += c.Duplicates
	}
	return n, dups
}

func TestConsumer(t *testing.T) {
	t.Run("DuplicatesInTheTopic_EachEffectOnceInPartitionOrder", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders", "orders.dlq")
		var s stream
		for i := range 60 {
			s.add("orders", fmt.Sprintf("order-%d", i%6))
			if i%5 == 4 {
				s.again(len(s.recs) - 3) // an earlier message published again
			}
		}
		produce(t, k, s.recs)
		rec := &emf.InboxRecorder{}
		in := e.inbox(t, "billing", nil, func(o *outboxinbox.Options) { o.Hooks = []outbox.Hook{rec} })
		var metrics syncBuffer
		stop := running(e.consumer(t, k, in, e.handler(), func(c *outboxinbox.ConsumerConfig) { c.Metrics, c.MetricsOutput = rec, &metrics }))
		waitFor(t, "every record", func() bool { n, _ := consumed(in); return n == int64(len(s.recs)) })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		e.verify(t, &s)
		if line := metrics.String(); !strings.Contains(line, `"RecordsConsumed":72`) || !strings.Contains(line, `"DuplicatesSkipped":12`) {
			t.Fatalf("EMF at the end of the run: %q, want 72 records consumed and 12 duplicates", line)
		}
		_, dups := consumed(in)
		t.Logf("duplicates in the topic: %d produced, %d skipped", s.dups, dups)
		if dups != int64(s.dups) || s.dups != 12 {
			t.Fatalf("%d duplicates skipped, want the %d produced", dups, s.dups)
		}
	})

	// A consumer dies after its transactions committed and before its offsets
	// did: the next member of the group reads the records again and skips them.
	t.Run("KilledBeforeOffsetCommit_NextOwnerSkipsTheApplied", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders", "orders.dlq")
		var s stream
		for i := range 30 {
			s.add("orders", fmt.Sprintf("order-%d", i%3))
		}
		produce(t, k, s.recs)
		first := e.inbox(t, "billing", nil)
		c := e.consumer(t, k, first, e.handler())
		crash := errors.New("killed before the offset commit")
		outboxinbox.SetBeforeCommit(c, func() error { return crash })
		if err := c.Run(t.Context()); !errors.Is(err, crash) {
			t.Fatalf("Run = %v, want the crash", err)
		}
		c.Close()
		applied := first.Metrics().Snapshot().Applied
		if applied == 0 {
			t.Fatal("the first consumer applied nothing before the crash; the test proves nothing")
		}

		second := e.inbox(t, "billing", nil)
		stop := running(e.consumer(t, k, second, e.handler()))
		waitFor(t, "every record", func() bool { n, _ := consumed(second); return n == int64(len(s.recs)) })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		e.verify(t, &s)
		t.Logf("killed before the offset commit: %d applied by the first consumer, %d skipped by the second", applied, second.Metrics().Snapshot().Duplicates)
		if got := second.Metrics().Snapshot(); got.Duplicates != applied {
			t.Fatalf("second consumer skipped %d duplicates, want the %d the first applied", got.Duplicates, applied)
		}
	})

	// A second member joins while the first is applying: partitions change
	// hands between polls, and every effect exists once, in order.
	t.Run("RebalanceMidRun_LosesNothingDoublesNothing", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders", "orders.dlq")
		var s stream
		for i := range 150 {
			s.add("orders", fmt.Sprintf("order-%d", i%10))
		}
		produce(t, k, s.recs)
		slow := func(ctx context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
			time.Sleep(20 * time.Millisecond)
			e.effect(rec, tx)
			return nil
		}
		// Small polls: a rebalance waits for the poll being applied.
		small := func(c *outboxinbox.ConsumerConfig) { c.MaxPollRecords = 6 }
		a, b := e.inbox(t, "billing", nil), e.inbox(t, "billing", nil)
		stopA := running(e.consumer(t, k, a, slow, small))
		waitFor(t, "the first member to start", func() bool { n, _ := consumed(a); return n >= 10 })
		stopB := running(e.consumer(t, k, b, slow, small))
		waitFor(t, "every record", func() bool { n, _ := consumed(a, b); return n >= int64(len(s.recs)) })
		var wg sync.WaitGroup
		for _, stop := range []func() error{stopA, stopB} {
			wg.Go(func() {
				if err := stop(); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		e.verify(t, &s)
		n, dups := consumed(a, b)
		na, nb := a.Metrics().Snapshot().Consumed, b.Metrics().Snapshot().Consumed
		t.Logf("member a consumed %d, member b %d; %d duplicates skipped", na, nb, dups)
		if na == 0 || nb == 0 {
			t.Fatalf("member a consumed %d, member b %d: no partition changed hands, the test proves nothing", na, nb)
		}
		if n-dups != int64(len(s.recs)) {
			t.Fatalf("%d applied, want %d", n-dups, len(s.recs))
		}
	})

	// A failing record stops its partition until it succeeds; the later
	// records of its keys wait, so order holds.
	t.Run("FailedRecord_ItsPartitionWaitsAndRetries", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders", "orders.dlq")
		var s stream
		for i := range 20 {
			s.add("orders", fmt.Sprintf("order-%d", i%2))
		}
		produce(t, k, s.recs)
		var mu sync.Mutex
		failures := 0
		flaky := func(ctx context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
			mu.Lock()
			defer mu.Unlock()
			if string(rec.Value) == "order-1:3" && failures < 3 {
				failures++
				return errors.New("downstream unavailable")
			}
			e.effect(rec, tx)
			return nil
		}
		in := e.inbox(t, "billing", nil)
		stop := running(e.consumer(t, k, in, flaky))
		waitFor(t, "every record", func() bool { n, _ := consumed(in); return n == int64(len(s.recs)) })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		e.verify(t, &s)
		if got := in.Metrics().Snapshot(); got.Failures != 3 || got.Duplicates != 0 {
			t.Fatalf("counts %+v, want 3 failures and no duplicate", got)
		}
	})
}

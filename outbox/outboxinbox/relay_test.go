package outboxinbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// pipeline is the whole system on the embedded backends: a writer and a
// relay on one outbox table, the consumer's markers and business items in
// the same table, and the Kafka topic between them.
type pipeline struct {
	*env
	k      *outboxlocal.Kafka
	writer *outboxddb.Writer
	store  *outboxddb.Store
	pub    *outboxkafka.Publisher
}

func newPipeline(t *testing.T) *pipeline {
	t.Helper()
	p := &pipeline{env: newEnv(t), k: outboxtest.NewKafka(t, "orders", "orders.dlq")}
	opts := outboxddb.Options{TableName: p.table, Logger: quiet()}
	var err error
	if p.writer, err = outboxddb.NewWriter(p.ddb.Client, outboxddb.WriterOptions{Options: opts}); err != nil {
		t.Fatal(err)
	}
	if p.store, err = outboxddb.NewStore(p.ddb.Client, outboxddb.StoreOptions{Options: opts}); err != nil {
		t.Fatal(err)
	}
	if p.pub, err = outboxkafka.New(outboxkafka.Config{Brokers: p.k.Brokers, ExtraOpts: outboxlocal.TestClientOpts()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.pub.Close)
	return p
}

// enqueue stores n messages over keys through the writer and records them.
func (p *pipeline) enqueue(t *testing.T, s *stream, n int, keys ...string) {
	t.Helper()
	var msgs []outbox.Message
	for i := range n {
		key := keys[i%len(keys)]
		value := fmt.Sprintf("%s:%d", key, len(s.want[key]))
		m, err := outbox.NewMessage("orders", []byte(key), []byte(value), outbox.MessageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.want == nil {
			s.want = map[string][]string{}
		}
		s.want[key] = append(s.want[key], value)
		s.ids = append(s.ids, m.ID)
		msgs = append(msgs, m)
	}
	if _, err := p.writer.EnqueueBatch(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
}

func (p *pipeline) relay(t *testing.T, pub outbox.Publisher, tweak func(*outbox.RelayOptions)) *outbox.Relay {
	t.Helper()
	o := outbox.RelayOptions{
		RelayID: "relay-a", BatchSize: 10, PollInterval: 50 * time.Millisecond, IdleTimeout: 200 * time.Millisecond,
		LeaseDuration: 5 * time.Second, LeaseRenewInterval: time.Second, ErrorBackoff: 50 * time.Millisecond,
	}
	if tweak != nil {
		tweak(&o)
	}
	r, err := outbox.NewRelay(outbox.RelayConfig{Options: o, Store: p.store, Publisher: pub, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func run(ctx context.Context, r *outbox.Relay) (outbox.RunResult, error) {
	return r.Run(ctx, outbox.RunInput{Deadline: time.Now().Add(30 * time.Second)})
}

// consumeAll runs one consumer until it has a verdict for every record in
// the topic, and returns the duplicates the topic held.
func (p *pipeline) consumeAll(t *testing.T, s *stream) (in *outboxinbox.Inbox, produced int) {
	t.Helper()
	records := len(outboxtest.ConsumeAll(t, p.k, "orders"))
	in = p.inbox(t, "billing", nil)
	stop := running(p.consumer(t, p.k, in, p.handler()))
	waitFor(t, "every record", func() bool { n, _ := consumed(in); return n == int64(records) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	p.verify(t, s)
	return in, records - len(s.ids)
}

// killing stops the relay's run right after its first publish reached
// Kafka, and hides that publish's acknowledgements from it: a relay killed
// mid-batch, whose rows stay although their records are in the topic (a
// stopped run deletes only what it saw acknowledged).
type killing struct {
	outbox.Publisher
	once   sync.Once
	cancel context.CancelFunc
}

func (k *killing) Publish(ctx context.Context, msgs []outbox.Message) (int, error) {
	n, err := k.Publisher.Publish(ctx, msgs)
	killed := false
	k.once.Do(func() { k.cancel(); killed = true })
	if killed {
		return 0, context.Canceled
	}
	return n, err
}

func TestRelay(t *testing.T) {
	t.Run("Pipeline_RelayKilledMidBatch_DuplicatesSkipped", func(t *testing.T) {
		p := newPipeline(t)
		var s stream
		p.enqueue(t, &s, 30, "order-0", "order-1", "order-2")
		ctx, cancel := context.WithCancel(t.Context())
		r := p.relay(t, &killing{Publisher: p.pub, cancel: cancel}, nil)
		if res, _ := run(ctx, r); res.Deleted >= len(s.ids) {
			t.Fatalf("killed run: %+v; want published messages left undeleted", res)
		}
		// The restarted relay (same id: a warm environment) resumes its leases
		// and publishes the undeleted batch again.
		if res, err := run(t.Context(), r); err != nil || res.Published == 0 {
			t.Fatalf("restarted relay: %+v, %v", res, err)
		}
		in, produced := p.consumeAll(t, &s)
		dups := in.Metrics().Snapshot().Duplicates
		t.Logf("relay killed mid-batch: %d duplicates produced, %d skipped", produced, dups)
		if produced == 0 || dups != int64(produced) {
			t.Fatalf("%d duplicates in the topic, %d skipped; want some, all skipped", produced, dups)
		}
	})

	t.Run("Pipeline_ParkedMessageReplayed_DuplicateSkipped", func(t *testing.T) {
		p := newPipeline(t)
		var s stream
		p.enqueue(t, &s, 12, "order-0", "order-1")
		pub := &ambiguous{Publisher: p.pub, victim: s.ids[4]}
		r := p.relay(t, pub, func(o *outbox.RelayOptions) {
			o.PoisonPolicy, o.PoisonMaxAttempts = outbox.PoisonQuarantine, 1
		})
		if _, err := run(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		parked, err := p.store.ListParked(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(parked) == 0 || parked[0].MessageID != s.ids[4].String() {
			t.Fatalf("parked %d messages, want the victim first", len(parked))
		}
		if _, err := p.store.RequestReplay(t.Context(), parked, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := run(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		in, produced := p.consumeAll(t, &s)
		dups := in.Metrics().Snapshot().Duplicates
		t.Logf("parked message replayed: %d parked, %d duplicates produced, %d skipped", len(parked), produced, dups)
		if produced != 1 || dups != 1 {
			t.Fatalf("%d duplicates in the topic, %d skipped; want the replayed victim once", produced, dups)
		}
	})
}

// ambiguous publishes message victim but reports a timeout for it, once:
// a produce whose ack was lost. Under quarantine with one attempt the
// relay parks it, and the replay publishes it again.
type ambiguous struct {
	outbox.Publisher
	mu     sync.Mutex
	victim outbox.MessageID
	done   bool
}

func (a *ambiguous) Publish(ctx context.Context, msgs []outbox.Message) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, m := range msgs {
		if m.ID != a.victim || a.done {
			continue
		}
		a.done = true
		n, err := a.Publisher.Publish(ctx, msgs[:i+1])
		if err != nil {
			return n, err
		}
		return i, errors.New("produce request timed out (the broker stored the record)")
	}
	return a.Publisher.Publish(ctx, msgs)
}

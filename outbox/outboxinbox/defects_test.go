package outboxinbox_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestDefects(t *testing.T) {
	// Two services given the same key prefix (the natural single-table
	// choice) each keep their own marker: the second applies the message
	// instead of finding the first's marker.
	t.Run("Process_TwoConsumersSharingAKeyPrefix_EachAppliesOnce", func(t *testing.T) {
		e := newEnv(t)
		id := outbox.NewMessageID()
		rec := record("orders", 0, 1, "order-1", "created", id)
		shared := func(o *outboxinbox.Options) { o.KeyPrefix = "SHOP" }
		billing, shipping := e.inbox(t, "billing", nil, shared), e.inbox(t, "shipping", nil, shared)
		for i, in := range []*outboxinbox.Inbox{billing, shipping, billing, shipping} {
			out, err := in.Process(t.Context(), rec, e.handler())
			want := outboxinbox.Applied
			if i >= 2 {
				want = outboxinbox.Duplicate
			}
			if err != nil || out != want {
				t.Fatalf("delivery %d: %v, %v; want %v", i, out, err, want)
			}
		}
		if n := e.applied(t, id.String()); n != 2 {
			t.Fatalf("effect applied %d times, want 2 (once per consumer)", n)
		}
		if n := e.count(t, "SHOP#INBOX#"); n != 2 {
			t.Fatalf("%d markers under the shared prefix, want 2", n)
		}
	})

	// A message id reused with another payload or topic is not a duplicate:
	// its effect was never applied, so the inbox refuses it loudly.
	t.Run("Process_ReusedIDWithAnotherPayload_IsRefusedNotSkipped", func(t *testing.T) {
		e := newEnv(t)
		in := e.inbox(t, "billing", nil)
		id := outbox.NewMessageID()
		if _, err := in.Process(t.Context(), record("orders", 0, 1, "order-1", "created", id), e.handler()); err != nil {
			t.Fatal(err)
		}
		for _, rec := range []outboxinbox.Record{
			record("orders", 0, 2, "order-1", "cancelled", id),
			record("orders", 0, 3, "order-2", "created", id),
			record("refunds", 0, 1, "order-1", "created", id),
		} {
			ran := false
			out, err := in.Process(t.Context(), rec, func(context.Context, outboxinbox.Record, *outboxinbox.Tx) error { ran = true; return nil })
			if err == nil || out == outboxinbox.Duplicate || ran {
				t.Fatalf("%s/%s=%s under a used id: %v, %v, handler ran %v; want a refusal without running the handler", rec.Topic, rec.Key, rec.Value, out, err, ran)
			}
			assertMismatch(t, err, id)
		}
		if n := e.applied(t, id.String()); n != 1 {
			t.Fatalf("effect applied %d times, want 1", n)
		}
		// The same payload under another offset stays a plain duplicate.
		if out, err := in.Process(t.Context(), record("orders", 0, 9, "order-1", "created", id), e.handler()); err != nil || out != outboxinbox.Duplicate {
			t.Fatalf("true duplicate: %v, %v", out, err)
		}
		c := in.Metrics().Snapshot()
		t.Logf("reused ids: %+v", c)
		assertMismatchCount(t, c, 3)
	})

	// A record whose handler fails for good (a closed account) stops its
	// partition only MaxAttempts times: then it is dead-lettered with its
	// headers and the error, its marker says so, and the partition's later
	// records are applied in order.
	t.Run("Consumer_RecordRefusedForGood_DeadLetteredAndThePartitionMovesOn", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders", "orders.dlq")
		var s stream
		for i := range 12 {
			s.add("orders", fmt.Sprintf("order-%d", i%2))
		}
		produce(t, k, s.recs)
		poison := "order-1:2"
		refuses := func(ctx context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
			if string(rec.Value) == poison {
				tx.Add(types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
					TableName: aws.String(e.table), Key: key("ACCOUNT#closed", "ACCOUNT"),
					ConditionExpression: aws.String("attribute_exists(PK)"),
				}})
			}
			e.effect(rec, tx)
			return nil
		}
		in := e.inbox(t, "billing", nil)
		stop := running(e.consumer(t, k, in, refuses, deadLetterAfter(3)))
		waitFor(t, "every healthy record", func() bool { return in.Metrics().Snapshot().Applied == int64(len(s.recs)-1) })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		dlq := outboxtest.Consume(t, k, "orders.dlq", 1)
		assertDeadLettered(t, dlq[0], s.ids[5], 3)
		want := []string{}
		for _, v := range s.want["order-1"] {
			if v != poison {
				want = append(want, v)
			}
		}
		if got := e.log(t, "order-1"); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("order-1 effects %v, want %v", got, want)
		}
		c := in.Metrics().Snapshot()
		t.Logf("refused for good: %+v", c)
		if c.Failures != 3 {
			t.Fatalf("counts %+v, want 3 failures before the verdict", c)
		}
		assertDeadLetteredCount(t, c, 1)
		// Read again at its own offset (a crash before the offset commit),
		// the dead-lettered record is a duplicate: not dead-lettered twice.
		rec := outboxinbox.Record{Topic: "orders", Partition: dlq[0].Partition, Key: dlq[0].Key, Value: dlq[0].Value}
		for _, h := range dlq[0].Headers {
			rec.Headers = append(rec.Headers, outbox.Header{Key: h.Key, Value: h.Value})
			if h.Key == outboxinbox.HeaderSource {
				if _, err := fmt.Sscanf(string(h.Value), "orders/%d@%d", &rec.Partition, &rec.Offset); err != nil {
					t.Fatalf("source header %q: %v", h.Value, err)
				}
			}
		}
		if out, err := in.Process(t.Context(), rec, refuses); err != nil || out != outboxinbox.Duplicate {
			t.Fatalf("dead-lettered record read again: %v, %v; want duplicate", out, err)
		}
		// Re-driven (another offset) while the account is still closed, it
		// runs and fails again; nothing is applied.
		rec.Offset += 100
		if _, err := in.Process(t.Context(), rec, refuses); err == nil || e.applied(t, s.ids[5].String()) != 0 {
			t.Fatalf("re-driven with the cause still there: %v, applied %d; want a failure and no effect", err, e.applied(t, s.ids[5].String()))
		}
	})

	// A failed record backs off its own partition only: the other partitions
	// keep flowing while it waits, however long its backoff.
	t.Run("Consumer_FailedRecord_OtherPartitionsKeepFlowing", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders", "orders.dlq")
		cl, err := kgo.NewClient(k.ClientOpts()...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var mu sync.Mutex
		stuck := int32(-1)
		failing := func(ctx context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
			mu.Lock()
			defer mu.Unlock()
			if string(rec.Key) == "poison" {
				stuck = rec.Partition
				return errors.New("downstream refuses this one")
			}
			e.effect(rec, tx)
			return nil
		}
		in := e.inbox(t, "billing", nil)
		stop := running(e.consumer(t, k, in, failing, func(c *outboxinbox.ConsumerConfig) { c.ErrorBackoff = time.Hour }))
		id := outbox.NewMessageID()
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: "orders", Key: []byte("poison"), Value: []byte("p"), Headers: []kgo.RecordHeader{{Key: outbox.DefaultMessageIDHeaderName, Value: []byte(id.String())}}}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the poison record to fail", func() bool { return in.Metrics().Snapshot().Failures > 0 })
		// Produced after the failure: the loop must still be polling.
		applied := 0
		for i := range 20 {
			id := outbox.NewMessageID()
			r := &kgo.Record{Topic: "orders", Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte("v"), Headers: []kgo.RecordHeader{{Key: outbox.DefaultMessageIDHeaderName, Value: []byte(id.String())}}}
			if err := cl.ProduceSync(t.Context(), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			other := r.Partition != stuck
			mu.Unlock()
			if other {
				applied++
			}
		}
		if applied == 0 {
			t.Fatal("every record landed on the stuck partition; the test proves nothing")
		}
		waitFor(t, "the other partitions' records", func() bool { return in.Metrics().Snapshot().Applied == int64(applied) })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if c := in.Metrics().Snapshot(); c.Applied != int64(applied) || c.Failures != 1 {
			t.Fatalf("counts %+v, want %d applied and the one failure (its partition waits an hour)", c, applied)
		}
	})

	// A record the Lambda event carries in a form that cannot be decoded
	// fails the invocation, and the failure is counted.
	t.Run("LambdaHandler_UndecodableRecord_CountedAsAFailure", func(t *testing.T) {
		e := newEnv(t)
		in := e.inbox(t, "billing", nil)
		h, err := outboxinbox.NewLambdaHandler(in, e.handler())
		if err != nil {
			t.Fatal(err)
		}
		h.Metrics = nil
		id := outbox.NewMessageID()
		ev := events.KafkaEvent{EventSource: "aws:kafka", Records: map[string][]events.KafkaRecord{"orders-0": {{
			Topic: "orders", Partition: 0, Offset: 3, Key: "not base64!", Value: base64.StdEncoding.EncodeToString([]byte("v")),
			Headers: []map[string]events.JSONNumberBytes{{outbox.DefaultMessageIDHeaderName: []byte(id.String())}},
		}}}}
		var be *outboxinbox.BatchError
		if err := h.Handle(t.Context(), ev); !errors.As(err, &be) {
			t.Fatalf("Handle = %v, want a *BatchError", err)
		}
		if c := in.Metrics().Snapshot(); c.Failures != 1 {
			t.Fatalf("counts %+v, want the undecodable record counted as a failure", c)
		}
	})
}

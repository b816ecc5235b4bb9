package outboxinbox_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

func TestAttempts(t *testing.T) {
	// A handler that panics on one record does not crash the consumer: the
	// panic is a failed run, its stack logged once per panic, and after
	// MaxAttempts the record is dead-lettered while the rest is applied.
	t.Run("Consumer_HandlerPanics_RecoveredAndDeadLettered", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders", "orders.dlq")
		var s stream
		for range 4 {
			s.add("orders", "k")
		}
		produce(t, k, s.recs)
		var logs syncBuffer
		in := e.inbox(t, "billing", nil, func(o *outboxinbox.Options) { o.Logger = newTextLogger(&logs) })
		h := func(ctx context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
			if string(rec.Value) == "k:1" {
				prices := []int{}
				_ = prices[len(rec.Value)] // index out of range: a runtime panic
			}
			e.effect(rec, tx)
			return nil
		}
		stop := running(e.consumer(t, k, in, h, deadLetterAfter(3)))
		waitFor(t, "the rest applied", func() bool { return in.Metrics().Snapshot().Applied == 3 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		dlq := outboxtest.ConsumeAll(t, k, "orders.dlq")
		if len(dlq) != 1 {
			t.Fatalf("%d dead letters, want the panicking record", len(dlq))
		}
		assertDeadLettered(t, dlq[0], s.ids[1], 3)
		if c := in.Metrics().Snapshot(); c.Failures != 3 || c.DeadLettered != 1 {
			t.Fatalf("counts %+v, want 3 failures and 1 dead-lettered", c)
		}
		if n := strings.Count(logs.String(), "[running]"); n != 3 {
			t.Fatalf("%d stacks logged, want one per panic (3):\n%s", n, logs.String())
		}
		if got := fmt.Sprint(e.log(t, "k")); got != "[k:0 k:2 k:3]" {
			t.Fatalf("effects %s, want [k:0 k:2 k:3]", got)
		}
	})

	// Each consumer of the group fails the record once and stops (a crash,
	// a rebalance): the count goes on across them, so the third
	// dead-letters it under MaxAttempts 3 instead of starting over.
	t.Run("Consumer_RestartedBetweenFailures_CountGoesOn", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders", "orders.dlq")
		var broken atomic.Bool
		broken.Store(true)
		s, h, runs := poisonStream(t, e, k, 3, &broken)
		slow := func(c *outboxinbox.ConsumerConfig) { c.MaxAttempts, c.ErrorBackoff = 3, time.Hour }
		for i := range 2 {
			in := e.inbox(t, "billing", nil)
			c := e.consumer(t, k, in, h, slow)
			stop := running(c)
			waitFor(t, "a failed run", func() bool { return in.Metrics().Snapshot().Failures == 1 })
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			c.Close() // leaves the group
			t.Logf("consumer %d failed the record once and stopped", i+1)
		}
		third := e.inbox(t, "billing", nil)
		stop := running(e.consumer(t, k, third, h, slow))
		waitFor(t, "the record dead-lettered by the third consumer", func() bool {
			c := third.Metrics().Snapshot()
			return c.DeadLettered == 1 && c.Applied == 1
		})
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if runs.Load() != 3 || len(outboxtest.ConsumeAll(t, k, "orders.dlq")) != 1 {
			t.Fatalf("handler ran %d times on the record, want 3 (MaxAttempts across the three consumers)", runs.Load())
		}
		if got := fmt.Sprint(e.log(t, "k")); got != fmt.Sprint([]string{s.want["k"][0], s.want["k"][2]}) {
			t.Fatalf("effects %s", got)
		}
	})

	// A failed run costs one write unit (the marker's count); the success
	// that follows costs what a first success costs, and the dead-lettering
	// one write unit.
	t.Run("Consumer_UnitsPerFailedRunAndSuccess", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders", "orders.dlq")
		var s stream
		s.add("orders", "ok")
		s.add("orders", "flaky")
		s.add("orders", "poison")
		produce(t, k, s.recs)
		var mu sync.Mutex
		flaky := 0
		put := func(_ context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
			mu.Lock()
			defer mu.Unlock()
			switch string(rec.Key) {
			case "flaky":
				if flaky++; flaky <= 2 {
					return errors.New("downstream unavailable")
				}
			case "poison":
				return errors.New("account closed")
			}
			tx.Add(types.TransactWriteItem{Put: &types.Put{TableName: aws.String(e.table), Item: key("ORDER#"+string(rec.Key), "ORDER")}})
			return nil
		}
		in := e.inbox(t, "billing", nil)
		before := e.ddb.Counter.Snapshot()
		stop := running(e.consumer(t, k, in, put, deadLetterAfter(3)))
		waitFor(t, "every record", func() bool { c := in.Metrics().Snapshot(); return c.Applied == 2 && c.DeadLettered == 1 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		got := e.ddb.Counter.Snapshot().Since(before)
		// ok: 1 success; flaky: 2 failed runs, 1 success; poison: 3 failed
		// runs and its dead-lettering.
		t.Logf("units: %v (transactions %v, marker updates %v in %d requests), reads %v", got.WriteUnits,
			got.OpWriteUnits["TransactWriteItems"], got.OpWriteUnits["UpdateItem"], got.Requests["UpdateItem"], got.ReadUnits)
		if got.OpWriteUnits["TransactWriteItems"] != 2*4 || got.Requests["UpdateItem"] != 2+3+1 || got.OpWriteUnits["UpdateItem"] != 2+3+1 {
			t.Fatalf("write units %v, want 4 per success (as without failures: the failed marker is replaced at no extra unit) and 1 per failed run and per dead-lettering", got.OpWriteUnits)
		}
	})

	// A handler panic in a Lambda batch fails its partition's record (the
	// batch fails, Lambda retries it) instead of killing the runtime; the
	// other partition is applied.
	t.Run("LambdaHandler_HandlerPanics_BatchFailsProcessLives", func(t *testing.T) {
		e := newEnv(t)
		var logs syncBuffer
		in := e.inbox(t, "billing", nil, func(o *outboxinbox.Options) { o.Logger = newTextLogger(&logs) })
		h, err := outboxinbox.NewLambdaHandler(in, func(ctx context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
			if string(rec.Key) == "poison" {
				panic(errors.New("index out of range in the pricing table"))
			}
			e.effect(rec, tx)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		h.Metrics = nil
		rec := func(p int64, k string) events.KafkaRecord {
			return events.KafkaRecord{Topic: "orders", Partition: p, Key: base64.StdEncoding.EncodeToString([]byte(k)), Value: base64.StdEncoding.EncodeToString([]byte("v")),
				Headers: []map[string]events.JSONNumberBytes{{outbox.DefaultMessageIDHeaderName: []byte(outbox.NewMessageID().String())}}}
		}
		ev := events.KafkaEvent{EventSource: "aws:kafka", Records: map[string][]events.KafkaRecord{"orders-0": {rec(0, "poison")}, "orders-1": {rec(1, "fine")}}}
		err = h.Handle(t.Context(), ev)
		var be *outboxinbox.BatchError
		if !errors.As(err, &be) || len(be.Failures) != 1 || be.Failures[0].Partition != 0 || !strings.Contains(err.Error(), "panicked") {
			t.Fatalf("Handle = %v, want a *BatchError for the panicking record of partition 0", err)
		}
		if c := in.Metrics().Snapshot(); c.Applied != 1 || c.Failures != 1 || strings.Count(logs.String(), "[running]") != 1 {
			t.Fatalf("counts %+v, %d stacks logged; want 1 applied, 1 failure, the stack once", c, strings.Count(logs.String(), "[running]"))
		}
	})
}

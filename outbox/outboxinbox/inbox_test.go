package outboxinbox_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
)

func TestInbox(t *testing.T) {
	t.Run("Process_SameMessageTwice_AppliedOnceThenDuplicate", func(t *testing.T) {
		e := newEnv(t)
		in := e.inbox(t, "billing", nil)
		id := outbox.NewMessageID()
		rec := record("orders", 0, 7, "order-1", "created", id)
		before := e.ddb.Counter.Snapshot()
		first, err := in.Process(t.Context(), rec, e.handler())
		if err != nil || first != outboxinbox.Applied {
			t.Fatalf("first delivery: %v, %v; want applied", first, err)
		}
		applied := e.ddb.Counter.Snapshot().Since(before)
		rec.Offset = 9 // a duplicate arrives under another offset
		second, err := in.Process(t.Context(), rec, e.handler())
		if err != nil || second != outboxinbox.Duplicate {
			t.Fatalf("second delivery: %v, %v; want duplicate without error", second, err)
		}
		dup := e.ddb.Counter.Snapshot().Since(before).Since(applied)
		if n := e.applied(t, id.String()); n != 1 {
			t.Fatalf("effect applied %d times, want 1", n)
		}
		if got := e.log(t, "order-1"); strings.Join(got, ",") != "created" {
			t.Fatalf("log of order-1 = %v, want [created]", got)
		}
		if n := e.count(t, "OUTBOX#INBOX#billing#"); n != 1 {
			t.Fatalf("%d markers, want 1", n)
		}
		// The first delivery reads the marker and commits; the duplicate only
		// reads it.
		if applied.Requests["GetItem"] != 1 || applied.Requests["TransactWriteItems"] != 1 || dup.Requests["GetItem"] != 1 || dup.TotalRequests() != 1 || applied.Refused != 0 {
			t.Fatalf("requests %v/%v, refused %d; want a read and a transaction, then a read alone", applied.Requests, dup.Requests, applied.Refused)
		}
		c := in.Metrics().Snapshot()
		if c.Consumed != 2 || c.Applied != 1 || c.Duplicates != 1 || c.Failures != 0 {
			t.Fatalf("counts %+v, want 2 consumed, 1 applied, 1 duplicate", c)
		}
	})

	// A marker is one consistent read (1 read unit) and, on the first
	// delivery, one transactional write of a small item (2 write units) on top
	// of the handler's writes; a duplicate costs the read alone.
	t.Run("Process_UnitsPerConsumedMessage", func(t *testing.T) {
		e := newEnv(t)
		in := e.inbox(t, "billing", nil)
		put := func(_ context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
			tx.Add(types.TransactWriteItem{Put: &types.Put{TableName: aws.String(e.table), Item: key("ORDER#"+string(rec.Key), "ORDER")}})
			return nil
		}
		rec := record("orders", 0, 1, "order-1", "created", outbox.NewMessageID())
		before := e.ddb.Counter.Snapshot()
		if _, err := in.Process(t.Context(), rec, put); err != nil {
			t.Fatal(err)
		}
		applied := e.ddb.Counter.Snapshot().Since(before)
		if _, err := in.Process(t.Context(), rec, put); err != nil {
			t.Fatal(err)
		}
		dup := e.ddb.Counter.Snapshot().Since(before).Since(applied)
		t.Logf("first apply: %v write units, %v read units; duplicate: %v write units, %v read units", applied.WriteUnits, applied.ReadUnits, dup.WriteUnits, dup.ReadUnits)
		if applied.WriteUnits != 4 || applied.ReadUnits != 1 || dup.WriteUnits != 0 || dup.ReadUnits != 1 {
			t.Fatalf("units: applied %v W + %v R, duplicate %v W + %v R; want 4 W (2 business put, 2 marker) + 1 R (the marker read), then 1 R alone",
				applied.WriteUnits, applied.ReadUnits, dup.WriteUnits, dup.ReadUnits)
		}

		// Consume-transform-produce: one outbox message adds its sequence
		// reservation (1 unit) and its transactional put (2).
		w, err := outboxddb.NewWriter(e.ddb.Client, outboxddb.WriterOptions{Options: outboxddb.Options{TableName: e.table, Logger: quiet()}})
		if err != nil {
			t.Fatal(err)
		}
		forwarding := e.inbox(t, "billing", nil, func(o *outboxinbox.Options) { o.Writer = w })
		forward := func(ctx context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
			if err := put(ctx, rec, tx); err != nil {
				return err
			}
			m, err := outbox.NewMessage("invoices", rec.Key, rec.Value, outbox.MessageOptions{})
			if err != nil {
				return err
			}
			return tx.Enqueue(m)
		}
		rec = record("orders", 0, 2, "order-2", "created", outbox.NewMessageID())
		before = e.ddb.Counter.Snapshot()
		if _, err := forwarding.Process(t.Context(), rec, forward); err != nil {
			t.Fatal(err)
		}
		if got := e.ddb.Counter.Snapshot().Since(before).WriteUnits; got != 7 {
			t.Fatalf("consume-transform-produce: %v write units, want 7 (counter 1, message 2, business 2, marker 2)", got)
		}
	})

	t.Run("Process_ConsumeTransformProduce_DuplicateEnqueuesNothing", func(t *testing.T) {
		e := newEnv(t)
		w, err := outboxddb.NewWriter(e.ddb.Client, outboxddb.WriterOptions{Options: outboxddb.Options{TableName: e.table, Logger: quiet()}})
		if err != nil {
			t.Fatal(err)
		}
		in := e.inbox(t, "billing", nil, func(o *outboxinbox.Options) { o.Writer = w })
		forward := func(ctx context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
			m, err := outbox.NewMessage("invoices", rec.Key, rec.Value, outbox.MessageOptions{})
			if err != nil {
				return err
			}
			return tx.Enqueue(m)
		}
		rec := record("orders", 0, 1, "order-1", "created", outbox.NewMessageID())
		for range 3 {
			if _, err := in.Process(t.Context(), rec, forward); err != nil {
				t.Fatal(err)
			}
		}
		msgs := e.count(t, outboxddb.DefaultKeyPrefix+"#MESSAGES#")
		if msgs != 1 {
			t.Fatalf("%d outbox messages after three deliveries, want 1", msgs)
		}
	})

	t.Run("Process_RecordWithoutHeader_RefusedOrSkipped", func(t *testing.T) {
		e := newEnv(t)
		in := e.inbox(t, "billing", nil)
		rec := outboxinbox.Record{Topic: "orders", Partition: 2, Offset: 5, Key: []byte("k"), Value: []byte("v")}
		ran := 0
		h := func(context.Context, outboxinbox.Record, *outboxinbox.Tx) error { ran++; return nil }
		before := e.ddb.Counter.Snapshot()
		_, err := in.Process(t.Context(), rec, h)
		var missing *outboxinbox.MissingIDError
		if !errors.As(err, &missing) || !errors.Is(err, outboxinbox.ErrMissingMessageID) || missing.Offset != 5 {
			t.Fatalf("err = %v, want a *MissingIDError for offset 5", err)
		}
		rec.Headers = []outbox.Header{{Key: outbox.DefaultMessageIDHeaderName, Value: []byte("not-a-guid")}}
		if _, err := in.Process(t.Context(), rec, h); !errors.Is(err, outboxinbox.ErrMissingMessageID) || !strings.Contains(err.Error(), "not-a-guid") {
			t.Fatalf("err = %v, want a refusal naming the bad value", err)
		}
		// SkipMissingID skips a missing header only: a damaged one is an error.
		skip := e.inbox(t, "billing", nil, func(o *outboxinbox.Options) { o.MissingID = outboxinbox.SkipMissingID })
		if _, err := skip.Process(t.Context(), rec, h); !errors.Is(err, outboxinbox.ErrMissingMessageID) {
			t.Fatalf("skip policy, damaged header: err = %v, want a refusal", err)
		}
		rec.Headers = nil
		if out, err := skip.Process(t.Context(), rec, h); err != nil || out != outboxinbox.Skipped {
			t.Fatalf("skip policy, no header: %v, %v; want skipped", out, err)
		}
		if ran != 0 || e.ddb.Counter.Snapshot().Since(before).TotalRequests() != 0 {
			t.Fatalf("handler ran %d times, requests made: a record without an id must do nothing", ran)
		}
	})

	t.Run("Process_OverTransactionLimits_RefusedBeforeAnyWrite", func(t *testing.T) {
		e := newEnv(t)
		in := e.inbox(t, "billing", nil)
		items := func(n, valueSize int) outboxinbox.Handler {
			return func(_ context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
				for i := range n {
					item := key("ORDER#"+string(rec.Key)+"#"+string(rune('a'+i%26))+strings.Repeat("x", i/26), "ORDER")
					item["Blob"] = &types.AttributeValueMemberB{Value: make([]byte, valueSize)}
					tx.Add(types.TransactWriteItem{Put: &types.Put{TableName: aws.String(e.table), Item: item}})
				}
				return nil
			}
		}
		before := e.ddb.Counter.Snapshot()
		rec := record("orders", 0, 1, "order-1", "created", outbox.NewMessageID())
		_, err := in.Process(t.Context(), rec, items(outboxddb.MaxTransactionItems, 10))
		var limit *outboxinbox.LimitError
		if !errors.As(err, &limit) || limit.Items != 101 || !strings.Contains(err.Error(), "at most 99") {
			t.Fatalf("100 business items: err = %v, want a *LimitError counting 101 actions", err)
		}
		_, err = in.Process(t.Context(), rec, items(11, 390*1024))
		if !errors.As(err, &limit) || limit.Size <= outboxddb.MaxTransactionSize {
			t.Fatalf("11 items of 390 KB: err = %v, want a *LimitError over 4 MB", err)
		}
		if got := e.ddb.Counter.Snapshot().Since(before); got.Requests["TransactWriteItems"] != 0 || got.WriteUnits != 0 {
			t.Fatalf("requests %v, want no write", got.Requests)
		}
		// 99 business items and the marker fit.
		if out, err := in.Process(t.Context(), rec, items(outboxddb.MaxTransactionItems-1, 10)); err != nil || out != outboxinbox.Applied {
			t.Fatalf("99 business items: %v, %v; want applied", out, err)
		}
	})

	t.Run("Process_HandlerConditionRefused_IsAnErrorNotADuplicate", func(t *testing.T) {
		e := newEnv(t)
		in := e.inbox(t, "billing", nil)
		refused := func(_ context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
			tx.Add(types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
				TableName: aws.String(e.table), Key: key("ACCOUNT#missing", "ACCOUNT"),
				ConditionExpression: aws.String("attribute_exists(PK)"),
			}})
			return nil
		}
		rec := record("orders", 0, 1, "order-1", "created", outbox.NewMessageID())
		out, err := in.Process(t.Context(), rec, refused)
		var tce *types.TransactionCanceledException
		if err == nil || out == outboxinbox.Duplicate || !errors.As(err, &tce) {
			t.Fatalf("%v, %v; want the cancellation as an error", out, err)
		}
		if n := e.count(t, "OUTBOX#INBOX#billing#"); n != 0 {
			t.Fatalf("%d markers after a refused transaction, want 0", n)
		}
		if out, err := in.Process(t.Context(), rec, e.handler()); err != nil || out != outboxinbox.Applied {
			t.Fatalf("redelivery with a passing handler: %v, %v; want applied", out, err)
		}
	})

	t.Run("Process_HandlerError_NothingWritten", func(t *testing.T) {
		e := newEnv(t)
		in := e.inbox(t, "billing", nil)
		boom := errors.New("pricing service down")
		before := e.ddb.Counter.Snapshot()
		_, err := in.Process(t.Context(), record("orders", 0, 1, "k", "v", outbox.NewMessageID()), func(context.Context, outboxinbox.Record, *outboxinbox.Tx) error { return boom })
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want the handler's error", err)
		}
		if got := e.ddb.Counter.Snapshot().Since(before); got.Requests["TransactWriteItems"] != 0 || in.Metrics().Snapshot().Failures != 1 {
			t.Fatalf("requests %v, counts %+v; want no write and one failure", got.Requests, in.Metrics().Snapshot())
		}
	})

	t.Run("Process_Conflict_RerunsTheHandler", func(t *testing.T) {
		e := newEnv(t)
		client := &conflicting{Client: e.ddb.Client, n: 2}
		in := e.inbox(t, "billing", client, func(o *outboxinbox.Options) { o.ConflictBackoff = 1 })
		runs := 0
		h := func(ctx context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
			runs++
			e.effect(rec, tx)
			return nil
		}
		id := outbox.NewMessageID()
		out, err := in.Process(t.Context(), record("orders", 0, 1, "k", "v", id), h)
		if err != nil || out != outboxinbox.Applied || runs != 3 {
			t.Fatalf("%v, %v after %d runs; want applied on the third run", out, err, runs)
		}
		if n := e.applied(t, id.String()); n != 1 || in.Metrics().Snapshot().Conflicts != 2 {
			t.Fatalf("applied %d times, %d conflicts counted; want 1 and 2", n, in.Metrics().Snapshot().Conflicts)
		}

		client.n = 10
		_, err = in.Process(t.Context(), record("orders", 0, 2, "k", "w", outbox.NewMessageID()), h)
		var ce *outboxinbox.ConflictError
		if !errors.As(err, &ce) || ce.Attempts != outboxinbox.DefaultMaxAttempts || !errors.Is(err, outboxinbox.ErrConflicts) {
			t.Fatalf("err = %v, want a *ConflictError after %d attempts", err, outboxinbox.DefaultMaxAttempts)
		}
	})

	// Two consumers of one group (a rebalance, a lost partition) process one
	// message at the same time: one commits, the others see its marker.
	t.Run("Process_ConsumersRacingOnOneMessage_OneEffect", func(t *testing.T) {
		e := newEnv(t)
		id := outbox.NewMessageID()
		rec := record("orders", 0, 1, "order-1", "created", id)
		const racers = 8
		outcomes := make(chan outboxinbox.Outcome, racers)
		var wg sync.WaitGroup
		for range racers {
			in := e.inbox(t, "billing", nil)
			wg.Go(func() {
				out, err := in.Process(context.Background(), rec, e.handler())
				if err != nil {
					t.Error(err)
				}
				outcomes <- out
			})
		}
		wg.Wait()
		close(outcomes)
		got := map[outboxinbox.Outcome]int{}
		for o := range outcomes {
			got[o]++
		}
		if got[outboxinbox.Applied] != 1 || got[outboxinbox.Duplicate] != racers-1 {
			t.Fatalf("outcomes %v, want 1 applied and %d duplicates", got, racers-1)
		}
		if n := e.applied(t, id.String()); n != 1 {
			t.Fatalf("effect applied %d times, want 1", n)
		}
	})

	// Each consumer keeps its own markers: two services reading one message
	// each apply it once.
	t.Run("Process_TwoConsumers_EachAppliesOnce", func(t *testing.T) {
		e := newEnv(t)
		id := outbox.NewMessageID()
		rec := record("orders", 0, 1, "order-1", "created", id)
		for _, consumer := range []string{"billing", "shipping", "billing", "shipping"} {
			if _, err := e.inbox(t, consumer, nil).Process(t.Context(), rec, e.handler()); err != nil {
				t.Fatal(err)
			}
		}
		if n := e.applied(t, id.String()); n != 2 {
			t.Fatalf("effect applied %d times, want 2 (once per consumer)", n)
		}
	})

	// A message the writer would refuse is reported where the handler adds
	// it, before any request; messages added in several calls for one writer
	// share its reservation of a bucket.
	t.Run("TxEnqueue_WithoutAWriterIsAMisconfiguration", func(t *testing.T) {
		e := newEnv(t)
		in := e.inbox(t, "billing", nil)
		var enqueueErr error
		h := func(_ context.Context, _ outboxinbox.Record, tx *outboxinbox.Tx) error {
			m, err := outbox.NewMessage("invoices", []byte("k"), nil, outbox.MessageOptions{})
			if err != nil {
				return err
			}
			enqueueErr = tx.Enqueue(m)
			return enqueueErr
		}
		before := e.ddb.Counter.Snapshot()
		if _, err := in.Process(t.Context(), record("orders", 0, 1, "order-1", "created", outbox.NewMessageID()), h); !errors.Is(err, outbox.ErrMisconfigured) || !errors.Is(enqueueErr, outbox.ErrMisconfigured) {
			t.Fatalf("Process = %v after Enqueue = %v; want a misconfiguration from Enqueue", err, enqueueErr)
		}
		if c := e.ddb.Counter.Snapshot().Since(before); c.Requests["TransactWriteItems"] != 0 {
			t.Fatalf("requests %v without a writer, want no transaction", c.Requests)
		}
	})

	t.Run("TxEnqueue_RefusesABadMessageAtOnce_AndMergesItsCalls", func(t *testing.T) {
		e := newEnv(t)
		w, err := outboxddb.NewWriter(e.ddb.Client, outboxddb.WriterOptions{Options: outboxddb.Options{TableName: e.table, Logger: quiet()}, Topics: []string{"invoices"}})
		if err != nil {
			t.Fatal(err)
		}
		in := e.inbox(t, "billing", nil, func(o *outboxinbox.Options) { o.Writer = w })
		bad, err := outbox.NewMessage("invoicse", []byte("k"), nil, outbox.MessageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var enqueueErr error
		refused := func(_ context.Context, _ outboxinbox.Record, tx *outboxinbox.Tx) error {
			enqueueErr = tx.Enqueue(bad)
			if tx.Len() != 0 {
				t.Errorf("the refused message was added: %d actions", tx.Len())
			}
			return enqueueErr
		}
		before := e.ddb.Counter.Snapshot()
		if _, err := in.Process(t.Context(), record("orders", 0, 1, "order-1", "created", outbox.NewMessageID()), refused); !errors.Is(err, outbox.ErrInvalidMessage) || !errors.Is(enqueueErr, outbox.ErrInvalidMessage) {
			t.Fatalf("Process = %v after Enqueue = %v; want the invalid message from Enqueue", err, enqueueErr)
		}
		if c := e.ddb.Counter.Snapshot().Since(before); c.Requests["UpdateItem"] != 0 || c.Requests["TransactWriteItems"] != 0 {
			t.Fatalf("requests %v for a refused message, want no reservation and no transaction", c.Requests)
		}

		key := []byte("customer-1")
		twice := func(_ context.Context, _ outboxinbox.Record, tx *outboxinbox.Tx) error {
			for range 2 {
				m, err := outbox.NewMessage("invoices", key, nil, outbox.MessageOptions{})
				if err != nil {
					return err
				}
				if err := tx.Enqueue(m); err != nil {
					return err
				}
			}
			return nil
		}
		before = e.ddb.Counter.Snapshot()
		if _, err := in.Process(t.Context(), record("orders", 0, 2, "order-2", "created", outbox.NewMessageID()), twice); err != nil {
			t.Fatal(err)
		}
		if n := e.ddb.Counter.Snapshot().Since(before).Requests["UpdateItem"]; n != 1 {
			t.Fatalf("%d reservations for two messages of one key in two calls, want 1", n)
		}
		if n := e.count(t, outboxddb.DefaultKeyPrefix+"#MESSAGES#"); n != 2 {
			t.Fatalf("%d outbox messages, want 2", n)
		}
	})
}

// conflicting cancels the first n transactions with a TransactionConflict
// reason on every action, as DynamoDB does when another request changes an
// item under the transaction; the embedded server never conflicts.
type conflicting struct {
	outboxinbox.Client
	mu sync.Mutex
	n  int
}

func (c *conflicting) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.mu.Lock()
	conflict := c.n > 0
	c.n--
	c.mu.Unlock()
	if !conflict {
		return c.Client.TransactWriteItems(ctx, in, optFns...)
	}
	reasons := make([]types.CancellationReason, len(in.TransactItems))
	for i := range reasons {
		reasons[i].Code = aws.String("None")
	}
	reasons[0].Code = aws.String("TransactionConflict")
	return nil, &types.TransactionCanceledException{Message: aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons [TransactionConflict, None]"), CancellationReasons: reasons}
}

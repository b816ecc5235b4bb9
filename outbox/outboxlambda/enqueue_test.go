package outboxlambda

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

func TestEnqueue(t *testing.T) {
	t.Parallel()
	t.Run("SingleMessageIsOnePutItem", func(t *testing.T) {
		t.Parallel()
		b := setup(t, bundleOptions{})
		before := b.ddb.Counter.Snapshot()
		resp := handleEnqueue(t, b, b.sample(t, "enqueue.single.json"))
		used := b.ddb.Counter.Snapshot().Since(before)
		// The sequence reservation, then the message.
		if want := map[string]int{"UpdateItem": 1, "PutItem": 1}; !reflect.DeepEqual(used.Requests, want) {
			t.Fatalf("requests %v, want %v", used.Requests, want)
		}
		want := []EnqueuedMessage{{MessageID: "5c3e9f10-7b2a-4d6e-8f41-a2b3c4d5e6f7", Topic: b.topic("orders"), Bucket: 5, Sequence: 1}}
		if !reflect.DeepEqual(resp.Messages, want) {
			t.Fatalf("response %+v, want %+v", resp.Messages, want)
		}
		calls := b.inv.invocations()
		if len(calls) != 1 || calls[0].payload != `{"trigger":"wake","buckets":[5],"hop":0,"join":false}` || calls[0].function != "outbox-relay" {
			t.Fatalf("wake-ups %+v", calls)
		}
	})

	t.Run("BatchIsOneTransaction", func(t *testing.T) {
		t.Parallel()
		b := setup(t, bundleOptions{})
		before := b.ddb.Counter.Snapshot()
		resp := handleEnqueue(t, b, b.sample(t, "enqueue.batch.json"))
		used := b.ddb.Counter.Snapshot().Since(before)
		buckets := map[int]bool{}
		for _, m := range resp.Messages {
			buckets[m.Bucket] = true
		}
		// One reservation per distinct bucket, one transaction.
		if want := map[string]int{"UpdateItem": len(buckets), "TransactWriteItems": 1}; !reflect.DeepEqual(used.Requests, want) {
			t.Fatalf("requests %v, want %v", used.Requests, want)
		}
		if len(resp.Messages) != 5 || resp.Messages[0].MessageID != "0b9a4d8e-2f5c-4c1e-9a77-3d1f6e2b8c01" ||
			resp.Messages[4].MessageID != "8d9f3c2a-1b4e-4f6a-9c8d-7e6f5a4b3c2d" || resp.Messages[2].Bucket != 2 {
			t.Fatalf("response %+v", resp.Messages)
		}
		// Messages of one bucket are numbered in request order.
		if a, c := resp.Messages[0], resp.Messages[1]; a.Bucket != c.Bucket || c.Sequence != a.Sequence+1 {
			t.Fatalf("same-key messages %+v and %+v are not consecutive", a, c)
		}
	})

	// RefusalWritesNothing sends every invalid sample: each comes
	// back as a response naming the field, with no DynamoDB request and no
	// wake-up.
	t.Run("RefusalWritesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, bundleOptions{})
		cases := map[string]string{
			"enqueue.invalid-base64.json":   "messages[1].key",
			"enqueue.missing-topic.json":    "messages[0].topic",
			"enqueue.too-many.json":         "messages",
			"enqueue.unknown-encoding.json": "valueEncoding",
			"enqueue.bad-partition.json":    "messages[1].partition",
			"enqueue.bad-message-id.json":   "messages[0].messageId",
			"enqueue.duplicate-ids.json":    "messages[1].messageId",
			"enqueue.unknown-field.json":    "vaule",
		}
		for sample, field := range cases {
			before := b.ddb.Counter.Snapshot()
			resp, err := b.enqueue.Handle(t.Context(), b.sample(t, sample))
			if err != nil {
				t.Fatalf("%s: a refusal is a function error: %v", sample, err)
			}
			if resp.Field != field || resp.Error == "" || resp.Messages != nil {
				t.Errorf("%s: response %+v, want an error for field %s", sample, resp, field)
			}
			if n := b.ddb.Counter.Snapshot().Since(before).TotalRequests(); n != 0 {
				t.Errorf("%s: %d DynamoDB requests for a refused request", sample, n)
			}
		}
		if calls := b.inv.invocations(); len(calls) != 0 {
			t.Fatalf("wake-ups after refusals: %+v", calls)
		}
	})

	t.Run("RefusesItemsOverDynamoDBLimits", func(t *testing.T) {
		t.Parallel()
		b := setup(t, bundleOptions{})
		big := base64.StdEncoding.EncodeToString(make([]byte, 400*1024))
		near := base64.StdEncoding.EncodeToString(make([]byte, 390*1024))
		cases := []struct {
			name, payload, field, says string
		}{
			{"single over 400 KB", fmt.Sprintf(`{"topic":"orders","value":%q,"valueEncoding":"base64"}`, big), "", "over the 409600-byte item limit"},
			{"third of a batch over 400 KB", fmt.Sprintf(`{"messages":[{"topic":"orders"},{"topic":"orders"},{"topic":"orders","value":%q,"valueEncoding":"base64"}]}`, big),
				"messages[2]", "over the 409600-byte item limit"},
			{"batch over 4 MB", `{"messages":[` + strings.TrimSuffix(strings.Repeat(fmt.Sprintf(`{"topic":"orders","value":%q,"valueEncoding":"base64"},`, near), 11), ",") + `]}`,
				"messages", "transaction limit"},
		}
		for _, c := range cases {
			before := b.ddb.Counter.Snapshot()
			resp, err := b.enqueue.Handle(t.Context(), json.RawMessage(c.payload))
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if resp.Field != c.field || !strings.Contains(resp.Error, c.says) {
				t.Errorf("%s: response field %q error %q, want field %q saying %q", c.name, resp.Field, resp.Error, c.field, c.says)
			}
			if n := b.ddb.Counter.Snapshot().Since(before).TotalRequests(); n != 0 {
				t.Errorf("%s: %d DynamoDB requests", c.name, n)
			}
		}
		// Positive control: just under the limit is stored.
		ok := fmt.Sprintf(`{"topic":"orders","value":%q,"valueEncoding":"base64"}`, near)
		if resp := handleEnqueue(t, b, json.RawMessage(ok)); len(resp.Messages) != 1 {
			t.Fatalf("a 390 KB message: %+v", resp)
		}
	})

	// RetryStoresACopyUnderTheSameID: a request Lambda runs twice
	// (a retry after an ambiguous failure) stores the message twice under one
	// id, which consumers deduplicate on the dedup header.
	t.Run("RetryStoresACopyUnderTheSameID", func(t *testing.T) {
		t.Parallel()
		b := setup(t, bundleOptions{})
		first := handleEnqueue(t, b, b.sample(t, "enqueue.single.json"))
		again := handleEnqueue(t, b, b.sample(t, "enqueue.single.json"))
		if first.Messages[0].MessageID != again.Messages[0].MessageID || again.Messages[0].Sequence != first.Messages[0].Sequence+1 {
			t.Fatalf("retry stored %+v after %+v, want the same id under the next sequence", again.Messages, first.Messages)
		}
	})

	t.Run("InfrastructureFailureIsAFunctionError", func(t *testing.T) {
		t.Parallel()
		b := setup(t, bundleOptions{vars: map[string]string{outboxconf.EnvTable: "spillway-test-missing-table"}})
		resp, err := b.enqueue.Handle(t.Context(), b.sample(t, "enqueue.single.json"))
		if err == nil || resp.Error != "" {
			t.Fatalf("enqueue into a missing table: response %+v, error %v; want a function error", resp, err)
		}
		if calls := b.inv.invocations(); len(calls) != 0 {
			t.Fatalf("wake-up for messages never stored: %+v", calls)
		}
	})

	t.Run("RecordsTheInvocationsTrace", func(t *testing.T) {
		t.Parallel()
		const (
			fromCtx = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
			fromEnv = "Root=1-67891233-abcdef012345678912345678;Parent=463ac35c9f6413ad;Sampled=0"
		)
		cfg, err := LoadConfig(env(withVars(nil)))
		if err != nil {
			t.Fatal(err)
		}
		for name, c := range map[string]struct {
			ctx  context.Context
			want string
		}{
			// aws-lambda-go stores the invocation's header under this key.
			//lint:ignore SA1029 the key is aws-lambda-go's, a plain string
			"lambda context":       {context.WithValue(t.Context(), "x-amzn-trace-id", fromCtx), fromCtx},
			"runtime env variable": {t.Context(), fromEnv},
		} {
			w := &recordingWriter{}
			h, err := NewEnqueueHandler(EnqueueHandlerConfig{Config: cfg, Writer: w, Logger: discardLogger(),
				Getenv: env(map[string]string{EnvTraceID: fromEnv})})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := h.Handle(c.ctx, json.RawMessage(`{"topic":"orders","value":"v","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`))
			if err != nil || resp.Error != "" {
				t.Fatalf("%s: %+v %v", name, resp, err)
			}
			headers, err := outbox.DecodeHeaders(w.got[0].Headers)
			if err != nil {
				t.Fatal(err)
			}
			want := []outbox.Header{
				{Key: outbox.HeaderTraceParent, Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
				{Key: outbox.HeaderAmznTraceID, Value: []byte(c.want)},
			}
			if !reflect.DeepEqual(headers, want) {
				t.Errorf("%s: headers %q, want %q", name, headers, want)
			}
		}
	})

	t.Run("NewEnqueueHandlerNeedsAWriter", func(t *testing.T) {
		t.Parallel()
		cfg, err := LoadConfig(env(withVars(nil)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewEnqueueHandler(EnqueueHandlerConfig{Config: cfg}); !errors.Is(err, outbox.ErrMisconfigured) {
			t.Fatalf("error %v", err)
		}
		var _ MessageWriter = (*outboxddb.Writer)(nil)
	})
}

// recordingWriter stores nothing and keeps what it was given.
type recordingWriter struct{ got []outbox.Message }

func (w *recordingWriter) Enqueue(_ context.Context, m outbox.Message) (outbox.Message, error) {
	w.got = append(w.got, m)
	return outbox.Stored(m, m.Bucket(), 1), nil
}

func (w *recordingWriter) EnqueueBatch(_ context.Context, msgs []outbox.Message) ([]outbox.Message, error) {
	w.got = append(w.got, msgs...)
	return msgs, nil
}

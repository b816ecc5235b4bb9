package outboxinbox_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
	"github.com/spillway-dev/spillway/outbox/outboxobs/emf"
)

// The EMF line, written by hand from the specification: namespace
// Spillway, dimension Consumer, the six counts since the last flush.
const wantEMF = `{
  "_aws": {
    "Timestamp": 1790000000000,
    "CloudWatchMetrics": [{
      "Namespace": "Spillway",
      "Dimensions": [["Consumer"]],
      "Metrics": [
        {"Name": "RecordsConsumed", "Unit": "Count"},
        {"Name": "DuplicatesSkipped", "Unit": "Count"},
        {"Name": "ConsumeFailures", "Unit": "Count"},
        {"Name": "TransactionConflicts", "Unit": "Count"},
        {"Name": "PayloadMismatches", "Unit": "Count"},
        {"Name": "RecordsDeadLettered", "Unit": "Count"}
      ]
    }]
  },
  "Consumer": "billing",
  "RecordsConsumed": 2,
  "DuplicatesSkipped": 1,
  "ConsumeFailures": 1,
  "TransactionConflicts": 0,
  "PayloadMismatches": 0,
  "RecordsDeadLettered": 0
}`

func TestMetrics(t *testing.T) {
	// TheEMFRecorderWritesTheCountsSinceTheLastFlush hooks the
	// EMF recorder to an inbox and reads the line it writes.
	t.Run("TheEMFRecorderWritesTheCountsSinceTheLastFlush", func(t *testing.T) {
		e := newEnv(t)
		metrics := &emf.InboxRecorder{}
		in := e.inbox(t, "billing", nil, func(o *outboxinbox.Options) { o.Hooks = []outbox.Hook{metrics} })
		rec := record("orders", 0, 1, "k", "v", outbox.NewMessageID())
		for range 2 {
			if _, err := in.Process(t.Context(), rec, e.handler()); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := in.Process(t.Context(), outboxinbox.Record{Topic: "orders"}, e.handler()); err == nil {
			t.Fatal("a record without an id was accepted")
		}
		now := time.UnixMilli(1790000000000)
		var buf bytes.Buffer
		if err := metrics.Flush(&buf, now); err != nil {
			t.Fatal(err)
		}
		var got, want any
		if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
			t.Fatalf("%q: %v", buf.String(), err)
		}
		if err := json.Unmarshal([]byte(wantEMF), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("EMF line\n%s\nwant\n%s", buf.String(), wantEMF)
		}
		buf.Reset()
		if err := metrics.Flush(&buf, now); err != nil || buf.Len() != 0 {
			t.Fatalf("second flush wrote %q (%v), want nothing", buf.String(), err)
		}
	})

	t.Run("New_AHookThatIsNoHookConsumeIsAMisconfiguration", func(t *testing.T) {
		_, err := outboxinbox.New(newEnv(t).ddb.Client, outboxinbox.Options{TableName: "t", Consumer: "billing", Hooks: []outbox.Hook{&bytes.Buffer{}}})
		if !errors.Is(err, outbox.ErrMisconfigured) {
			t.Fatalf("New with a hook implementing nothing: %v, want a misconfiguration", err)
		}
	})
}

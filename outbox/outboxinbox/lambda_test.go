package outboxinbox_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
	"github.com/spillway-dev/spillway/outbox/outboxobs/emf"
)

// kafkaEvent packs s's records as a Lambda event source mapping does,
// assigning partitions by key and offsets in order.
func kafkaEvent(s *stream, partitions int) events.KafkaEvent {
	ev := events.KafkaEvent{EventSource: "aws:kafka", Records: map[string][]events.KafkaRecord{}}
	for _, r := range s.recs {
		p := int(r.Key[len(r.Key)-1]) % partitions
		group := fmt.Sprintf("%s-%d", r.Topic, p)
		kr := events.KafkaRecord{
			Topic: r.Topic, Partition: int64(p), Offset: int64(len(ev.Records[group])),
			Key: base64.StdEncoding.EncodeToString(r.Key), Value: base64.StdEncoding.EncodeToString(r.Value),
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, map[string]events.JSONNumberBytes{h.Key: h.Value})
		}
		ev.Records[group] = append(ev.Records[group], kr)
	}
	return ev
}

func TestLambda(t *testing.T) {
	t.Run("Handler_BatchWithDuplicates_EachEffectOnceInOrder", func(t *testing.T) {
		e := newEnv(t)
		var s stream
		for i := range 40 {
			s.add("orders", fmt.Sprintf("order-%d", i%4))
			if i%8 == 7 {
				s.again(len(s.recs) - 2)
			}
		}
		rec := &emf.InboxRecorder{}
		in := e.inbox(t, "billing", nil, func(o *outboxinbox.Options) { o.Hooks = []outbox.Hook{rec} })
		h, err := outboxinbox.NewLambdaHandler(in, e.handler())
		if err != nil {
			t.Fatal(err)
		}
		var metrics bytes.Buffer
		h.Metrics, h.MetricsOutput = rec, &metrics
		if err := h.Handle(t.Context(), kafkaEvent(&s, 3)); err != nil {
			t.Fatal(err)
		}
		e.verify(t, &s)
		if c := in.Metrics().Snapshot(); c.Duplicates != int64(s.dups) || c.Consumed != int64(len(s.recs)) || s.dups != 5 {
			t.Fatalf("counts %+v, want %d consumed and the %d duplicates skipped", c, len(s.recs), s.dups)
		}
		var line map[string]any
		if err := json.Unmarshal(metrics.Bytes(), &line); err != nil {
			t.Fatalf("metrics line %q: %v", metrics.String(), err)
		}
		if line["Consumer"] != "billing" || line["RecordsConsumed"] != float64(45) || line["DuplicatesSkipped"] != float64(5) {
			t.Fatalf("metrics line %s, want 45 consumed and 5 duplicates for consumer billing", metrics.String())
		}
	})

	// A failed record stops its partition; Lambda retries the whole batch, and
	// the records applied the first time are duplicates on the retry.
	t.Run("Handler_FailedRecord_RetryOfTheBatchAppliesTheRestOnce", func(t *testing.T) {
		e := newEnv(t)
		var s stream
		for i := range 30 {
			s.add("orders", fmt.Sprintf("order-%d", i%3))
		}
		var mu sync.Mutex
		down := true
		flaky := func(ctx context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
			mu.Lock()
			defer mu.Unlock()
			if down && string(rec.Value) == "order-1:4" {
				return errors.New("downstream unavailable")
			}
			e.effect(rec, tx)
			return nil
		}
		in := e.inbox(t, "billing", nil)
		h, err := outboxinbox.NewLambdaHandler(in, flaky)
		if err != nil {
			t.Fatal(err)
		}
		h.Metrics = nil
		ev := kafkaEvent(&s, 3)
		err = h.Handle(t.Context(), ev)
		var be *outboxinbox.BatchError
		if !errors.As(err, &be) || len(be.Failures) != 1 || be.Failures[0].Offset != 4 {
			t.Fatalf("err = %v, want one partition stopped at offset 4", err)
		}
		// The stopped partition's later records wait; the others are applied.
		if got := e.log(t, "order-1"); !slices.Equal(got, s.want["order-1"][:4]) {
			t.Fatalf("order-1 effects %v, want the first four only", got)
		}
		first := in.Metrics().Snapshot().Applied
		mu.Lock()
		down = false
		mu.Unlock()
		if err := h.Handle(t.Context(), ev); err != nil {
			t.Fatalf("retry: %v", err)
		}
		e.verify(t, &s)
		t.Logf("batch retry: %d applied by the failed invocation, %d skipped on the retry", first, in.Metrics().Snapshot().Duplicates)
		if c := in.Metrics().Snapshot(); c.Duplicates != first || c.Applied != int64(len(s.recs)) {
			t.Fatalf("counts %+v, want %d duplicates on the retry and %d applied in all", c, first, len(s.recs))
		}
	})

	// The sample event in events/ (what `make invoke` sends the consumer)
	// decodes and applies: three messages, one of them delivered twice.
	t.Run("Handler_SampleEvent", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join("..", "..", "events", "consumer.kafka.json"))
		if err != nil {
			t.Fatal(err)
		}
		var ev events.KafkaEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		e := newEnv(t)
		in := e.inbox(t, "billing", nil)
		h, err := outboxinbox.NewLambdaHandler(in, e.handler())
		if err != nil {
			t.Fatal(err)
		}
		h.Metrics = nil
		if err := h.Handle(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
		if c := in.Metrics().Snapshot(); c.Applied != 3 || c.Duplicates != 1 {
			t.Fatalf("counts %+v, want 3 applied and 1 duplicate", c)
		}
		if got := strings.Join(e.log(t, "order-7"), " "); got != `{"order":7,"status":"created"} {"order":7,"status":"paid"}` {
			t.Fatalf("order-7 effects %s", got)
		}
	})
}

package emf_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxmem"
	"github.com/spillway-dev/spillway/outbox/outboxobs/emf"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// refusingBroker refuses every record, as a broker without the topic does.
type refusingBroker struct{}

func (*refusingBroker) Init(context.Context) error { return nil }
func (*refusingBroker) Publish(context.Context, []outbox.Message) (int, error) {
	return 0, errors.New("UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition")
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func TestRelayInterval(t *testing.T) {
	// WritesMetricsEveryMinuteOfARun drives a relay invocation for
	// five and a half simulated minutes against a broker that refuses every
	// record: it writes one valid document per minute, each counting the
	// failures of its own minute, and a last one at the end.
	t.Run("WritesMetricsEveryMinuteOfARun", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cfg, err := outboxlambda.LoadConfig(func(k string) string {
				return map[string]string{outboxconf.EnvTable: "outbox", outboxconf.EnvBucketCount: "1", outboxconf.EnvMode: "hold"}[k]
			})
			if err != nil {
				t.Fatal(err)
			}
			rec, err := emf.NewRecorder(emf.Config{FunctionName: "relay"})
			if err != nil {
				t.Fatal(err)
			}
			var out syncBuffer
			// One bucket whose only row never leaves: the broker refuses it.
			store, err := outboxmem.New(outboxmem.Options{BucketCount: 1})
			if err != nil {
				t.Fatal(err)
			}
			msg, err := outbox.NewMessage("missing", []byte("k"), nil, outbox.MessageOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.Enqueue(t.Context(), msg); err != nil {
				t.Fatal(err)
			}
			h, err := outboxlambda.NewRelayHandler(outboxlambda.RelayHandlerConfig{
				Config: cfg, Store: store, Publisher: &refusingBroker{}, Hooks: []outbox.Hook{rec},
				Metrics: rec, MetricsOutput: &out, Logger: discard(),
			})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			ctx, cancel := context.WithDeadline(t.Context(), start.Add(5*time.Minute+30*time.Second))
			defer cancel()
			if _, err := h.Handle(ctx, json.RawMessage(`{"trigger":"wake","buckets":[0]}`)); err != nil {
				t.Fatal(err)
			}

			lines := bytes.Split(bytes.TrimSuffix(out.b.Bytes(), []byte("\n")), []byte("\n"))
			// Minutes 1-5 and the end (the run stops at its budget, 5 s early).
			if len(lines) != 6 {
				t.Fatalf("%d documents in a 5.5-minute run, want 6:\n%s", len(lines), out.b.Bytes())
			}
			for i, line := range lines {
				if err := emf.ValidateEMF(line); err != nil {
					t.Fatalf("document %d is not valid EMF: %v\n%s", i, err, line)
				}
				var doc struct {
					AWS             struct{ Timestamp int64 } `json:"_aws"`
					PublishFailures float64
					HeadRowRetries  float64
				}
				if err := json.Unmarshal(line, &doc); err != nil {
					t.Fatal(err)
				}
				at := time.UnixMilli(doc.AWS.Timestamp)
				if i < 5 && !at.Equal(start.Add(time.Duration(i+1)*time.Minute)) {
					t.Errorf("document %d stamped %v after the start, want %d min", i, at.Sub(start), i+1)
				}
				if doc.PublishFailures <= 0 {
					t.Errorf("document %d: PublishFailures = %v, want > 0\n%s", i, doc.PublishFailures, line)
				}
				t.Logf("document %d at +%v: PublishFailures %v, HeadRowRetries %v", i, at.Sub(start), doc.PublishFailures, doc.HeadRowRetries)
			}
		})
	})
}

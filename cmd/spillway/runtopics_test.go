package main

import (
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestRunTopics(t *testing.T) {
	// --topics creates the named topics and their dead-letter topics on the
	// embedded Kafka, next to the demo's, and lets the functions accept
	// them.
	t.Run("NamedTopicsAndTheirDeadLetterTopicsAreCreated", func(t *testing.T) {
		f, err := parseRunFlags([]string{"--topics", "shipments, refunds.dlq", "--topics", "orders"}, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.relayTopics(); !slices.Equal(got, []string{"orders", "payments", "shipments", "refunds.dlq"}) {
			t.Fatalf("relay topics %v", got)
		}
		d := &demo{flags: f, stdout: io.Discard, log: slog.New(slog.DiscardHandler)}
		closeAll, err := d.startBackends(t.Context(), io.Discard)
		defer closeAll()
		if err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(d.kafka.Brokers...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(t.Context(), cl)
		if err != nil {
			t.Fatal(err)
		}
		var have []string
		for _, tp := range resp.Topics {
			have = append(have, *tp.Topic)
		}
		slices.Sort(have)
		want := []string{"orders", "orders.dlq", "payments", "payments.dlq", "refunds.dlq", "shipments", "shipments.dlq", inboxDemoDeadLetters}
		slices.Sort(want)
		if !slices.Equal(have, want) {
			t.Fatalf("embedded Kafka has topics %v, want %v", have, want)
		}
		if !strings.Contains(strings.Join(d.cfg.Topics, ","), "shipments") {
			t.Fatalf("the functions accept %v, want shipments among them", d.cfg.Topics)
		}
	})

	t.Run("NameKafkaRefuses_UsageError", func(t *testing.T) {
		code, _, errs := cli(t, "run", "--topics", "orders/2")
		if code != 2 || !strings.Contains(errs, `topic "orders/2"`) {
			t.Fatalf("exit %d: %s", code, errs)
		}
	})
}

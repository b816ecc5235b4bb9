package relayproc

import (
	"log/slog"
	"testing"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// TestProcRelaysThroughItsOwnParts wires a process on the embedded
// backends, relays one message with it, and checks that a process sharing
// a publisher leaves it open when closed.
func TestProcRelaysThroughItsOwnParts(t *testing.T) {
	ctx := t.Context()
	ddb, err := outboxlocal.StartDynamoDB(ctx, outboxlocal.WithoutEnvironment())
	if err != nil {
		t.Fatal(err)
	}
	defer ddb.Close()
	kafka, err := outboxlocal.StartKafka(ctx, outboxlocal.KafkaConfig{Topics: []string{"orders"}, IgnoreEnvironment: true})
	if err != nil {
		t.Fatal(err)
	}
	defer kafka.Close()
	sopts := outboxddb.Options{TableName: ddb.NewTableName(), BucketCount: 4}
	if err := ddb.CreateTable(ctx, sopts.TableName); err != nil {
		t.Fatal(err)
	}
	writer, err := outboxddb.NewWriter(ddb.Client, sopts)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := outbox.NewMessage(kafka.Topic("orders"), []byte("k"), []byte("v"), outbox.MessageOptions{BucketCount: 4})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writer.Enqueue(ctx, msg); err != nil {
		t.Fatal(err)
	}

	cfg := Config{
		DynamoDB: ddb.Client, Store: sopts, InitPublisher: true,
		Kafka:  outboxkafka.Config{Brokers: kafka.Brokers, ExtraOpts: outboxlocal.TestClientOpts()},
		Relay:  outbox.RelayOptions{RelayID: "relay-a", BucketCount: 4},
		Logger: slog.New(slog.DiscardHandler),
	}
	p, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Relay.Run(ctx, outbox.RunInput{Trigger: outbox.TriggerDirect})
	if err != nil || res.Published != 1 {
		t.Fatalf("run: published %d, %v; want 1", res.Published, err)
	}
	if bl, err := p.Store.Backlog(ctx); err != nil || bl.Pending != 0 {
		t.Fatalf("backlog after the run: %+v, %v", bl, err)
	}

	// A second process shares the first one's publisher.
	shared, err := NewPublisher(ctx, cfg.Kafka, true)
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	cfg.Publisher, cfg.Relay.RelayID = shared, "relay-b"
	q, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
	if err := shared.Init(ctx); err != nil {
		t.Fatalf("shared publisher after the process closed: %v", err)
	}
	p.Close()
}

func TestNewRefusesMissingParts(t *testing.T) {
	if _, err := New(t.Context(), Config{Relay: outbox.RelayOptions{RelayID: "r", BucketCount: 1}}); err == nil {
		t.Error("New accepted a config without a DynamoDB client")
	}
}

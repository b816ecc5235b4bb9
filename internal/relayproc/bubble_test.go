package relayproc

import (
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// TestProcRelaysInASynctestBubble runs a process on the in-memory forms of
// the embedded backends inside a synctest bubble: the relay, the Kafka
// client's background loops and both servers must all block durably, or
// the bubble would deadlock instead of moving its clock by an hour.
func TestProcRelaysInASynctestBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		ddb, err := outboxlocal.StartDynamoDB(ctx, outboxlocal.InMemory())
		if err != nil {
			t.Fatal(err)
		}
		defer ddb.Close()
		kafka, err := outboxlocal.StartKafka(ctx, outboxlocal.KafkaConfig{Topics: []string{"orders"}, InMemory: true})
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
		for i := 0; i < 50; i++ {
			msg, err := outbox.NewMessage("orders", []byte("k"), []byte("v"), outbox.MessageOptions{BucketCount: 4})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := writer.Enqueue(ctx, msg); err != nil {
				t.Fatal(err)
			}
		}
		cfg := Config{
			DynamoDB: ddb.Client, Store: sopts, InitPublisher: true,
			Kafka:  outboxkafka.Config{Brokers: kafka.Brokers, ExtraOpts: kafka.ClientOpts()},
			Relay:  outbox.RelayOptions{RelayID: "relay-a", BucketCount: 4},
			Logger: slog.New(slog.DiscardHandler),
		}
		p, err := New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		res, err := p.Relay.Run(ctx, outbox.RunInput{Trigger: outbox.TriggerDirect})
		if err != nil || res.Published != 50 {
			t.Fatalf("run: published %d, %v; want 50", res.Published, err)
		}
		// An hour of the client's metadata refreshes and the brokers'
		// timers, then a reader sees every record.
		time.Sleep(time.Hour)
		recs, err := kafka.ConsumeAll(ctx, "orders")
		if err != nil || len(recs) != 50 {
			t.Fatalf("consumed %d records, %v; want 50", len(recs), err)
		}
	})
}

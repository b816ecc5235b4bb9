package relayproc

import (
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/generation"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

func TestProc(t *testing.T) {
	// RelaysThroughItsOwnParts wires a process on the in-memory forms
	// of the embedded backends inside a synctest bubble, relays 50 messages
	// with it, and checks that a process sharing a publisher leaves it open
	// when closed. The relay, the Kafka client's background loops and both
	// servers must all block durably, or the bubble would deadlock instead of
	// moving its clock by an hour.
	t.Run("RelaysThroughItsOwnParts", func(t *testing.T) {
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
			writer, err := outboxddb.NewWriter(ddb.Client, outboxddb.WriterOptions{Options: sopts})
			if err != nil {
				t.Fatal(err)
			}
			for range 50 {
				msg, err := outbox.NewMessage("orders", []byte("k"), []byte("v"), outbox.MessageOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := writer.Enqueue(ctx, msg); err != nil {
					t.Fatal(err)
				}
			}
			cfg := Config{
				DynamoDB: ddb.Client, Store: outboxddb.StoreOptions{Options: sopts}, InitPublisher: true,
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
			if bl, err := p.Store.Backlog(ctx); err != nil || bl.Pending != 0 {
				t.Fatalf("backlog after the run: %+v, %v", bl, err)
			}
			// An hour of the client's metadata refreshes and the brokers'
			// timers, then a reader sees every record.
			time.Sleep(time.Hour)
			if recs, err := kafka.ConsumeAll(ctx, "orders"); err != nil || len(recs) != 50 {
				t.Fatalf("consumed %d records, %v; want 50", len(recs), err)
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
		})
	})

	t.Run("NewRefusesMissingParts", func(t *testing.T) {
		if _, err := New(t.Context(), Config{Relay: outbox.RelayOptions{RelayID: "r", BucketCount: 1}}); err == nil {
			t.Error("New accepted a config without a DynamoDB client")
		}
	})

	// A process of a generation that replaces another is gated like the relay
	// function: while the predecessor is not drained it claims nothing and
	// publishes nothing; once the predecessor is drained it relays.
	t.Run("WaitsForItsPredecessorGeneration", func(t *testing.T) {
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
			table := ddb.NewTableName()
			if err := ddb.CreateTable(ctx, table); err != nil {
				t.Fatal(err)
			}
			old := outboxddb.Options{TableName: table, BucketCount: 2}
			next := outboxddb.Options{TableName: table, BucketCount: 4, KeyPrefix: "OUTBOX2"}
			oldStore, err := outboxddb.NewStore(ddb.Client, outboxddb.StoreOptions{Options: old})
			if err != nil {
				t.Fatal(err)
			}
			succ := generation.Generation{KeyPrefix: next.KeyPrefix, BucketCount: next.BucketCount}
			if _, err := oldStore.OpenGeneration(ctx, succ); err != nil {
				t.Fatal(err)
			}
			writer, err := outboxddb.NewWriter(ddb.Client, outboxddb.WriterOptions{Options: next})
			if err != nil {
				t.Fatal(err)
			}
			msg, err := outbox.NewMessage("orders", []byte("k"), []byte("v"), outbox.MessageOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := writer.Enqueue(ctx, msg); err != nil {
				t.Fatal(err)
			}
			p, err := New(ctx, Config{
				DynamoDB: ddb.Client, Store: outboxddb.StoreOptions{Options: next}, InitPublisher: true,
				Kafka:  outboxkafka.Config{Brokers: kafka.Brokers, ExtraOpts: kafka.ClientOpts()},
				Relay:  outbox.RelayOptions{RelayID: "relay-next", BucketCount: 4},
				Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			res, err := p.Relay.Run(ctx, outbox.RunInput{Trigger: outbox.TriggerDirect})
			if err == nil || res.Reason != outbox.StopFatal || res.Published != 0 || res.Joined {
				t.Fatalf("run before the predecessor drained: %+v, %v; want a fatal refusal, nothing published", res, err)
			}
			if _, err := oldStore.SealGeneration(ctx, succ); err != nil {
				t.Fatal(err)
			}
			if _, err := oldStore.FinishGeneration(ctx, succ); err != nil {
				t.Fatal(err)
			}
			if res, err := p.Relay.Run(ctx, outbox.RunInput{Trigger: outbox.TriggerDirect}); err != nil || res.Published != 1 {
				t.Fatalf("run after the predecessor drained: %+v, %v; want the message published", res, err)
			}
		})
	})
}

package main

import (
	"context"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/internal/relayproc"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestReadmeProgram(t *testing.T) {
	// The README's program runs as the README says: on the variables of
	// `spillway run --serve` and dummy credentials, its order is committed,
	// relayed (here in-process, as `spillway drain` does) and applied once by
	// the inbox.
	t.Run("TheReadmeProgramCommitsAndConsumesItsOrder", func(t *testing.T) {
		ddb := outboxtest.NewDynamoDB(t)
		if ddb.External {
			t.Skip("the program creates a table named orders; run it against the embedded server only")
		}
		kafka := outboxtest.NewKafka(t, "orders", "orders.dlq")
		env := map[string]string{
			"SPILLWAY_DYNAMODB_ENDPOINT": ddb.Endpoint,
			"SPILLWAY_KAFKA_BROKERS":     kafka.Brokers[0],
			"SPILLWAY_TABLE":             ddb.NewTableName(),
		}
		ddb.DeleteOnClose(env["SPILLWAY_TABLE"])
		ddb.DeleteOnClose("orders")
		t.Setenv("AWS_ACCESS_KEY_ID", "local")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
		t.Setenv("AWS_REGION", "us-east-1")
		t.Setenv("AWS_PROFILE", "")
		getenv := func(k string) string { return env[k] }
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()

		cfg, err := outboxlambda.LoadConfig(getenv)
		if err != nil {
			t.Fatal(err)
		}
		if err := outboxddb.CreateIfNotExists(ctx, ddb.Client, cfg.TableOptions()); err != nil {
			t.Fatal(err)
		}
		kcfg, err := cfg.KafkaConfig(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		relay, err := relayproc.New(ctx, relayproc.Config{DynamoDB: ddb.Client, Store: cfg.StoreOptions(), Kafka: kcfg,
			Relay: cfg.RelayOptions("readme-test-relay")})
		if err != nil {
			t.Fatal(err)
		}
		defer relay.Close()

		done := make(chan error, 1)
		go func() { done <- run(ctx, getenv) }()
		published := 0
		for {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				if published != 1 {
					t.Errorf("the relay published %d messages, want the program's one", published)
				}
				return
			case <-time.After(100 * time.Millisecond):
			}
			res, err := relay.Relay.Run(ctx, outbox.RunInput{Trigger: outbox.TriggerDirect, Deadline: time.Now().Add(10 * time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			published += res.Published
		}
	})
}

// Command inprocess runs Spillway's relay inside a Go service's process (a
// container, a VM) instead of the Lambda function: one relay in hold mode
// that publishes the outbox of SPILLWAY_TABLE to the Kafka cluster of
// SPILLWAY_KAFKA_BROKERS, sharing the buckets with any other relay of the
// table, until SIGINT or SIGTERM. It then stops cleanly: the publish in
// flight settles, its rows are deleted and the leases are released, so
// the other relays take the buckets over at once. See docs/inprocess.md.
package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
)

// stopTimeout bounds the stop after SIGTERM; keep it within the grace
// period of whatever sends the signal (Kubernetes gives 30 s, ECS 30 s).
const stopTimeout = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv, slog.Default()); err != nil {
		log.Fatal(err)
	}
}

// run relays until ctx ends, then returns once the relay has stopped.
func run(ctx context.Context, getenv func(string) string, logger *slog.Logger) error {
	// Region and credentials come from the AWS SDK's usual sources.
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint := getenv("SPILLWAY_DYNAMODB_ENDPOINT"); endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	// The table's options (bucket count, key prefix) must be the writers'.
	store, err := outboxddb.NewStore(db, outboxddb.StoreOptions{Options: outboxddb.Options{TableName: getenv("SPILLWAY_TABLE"), Logger: logger}})
	if err != nil {
		return err
	}
	pub, err := outboxkafka.New(outboxkafka.Config{Brokers: strings.Split(getenv("SPILLWAY_KAFKA_BROKERS"), ",")})
	if err != nil {
		return err
	}
	// Run returns only once nothing of the relay is in flight any more.
	defer pub.Close()

	host, _ := os.Hostname()
	relay, err := outbox.NewRelay(outbox.RelayConfig{
		// Every relay of the table needs an id of its own.
		Options: outbox.RelayOptions{RelayID: fmt.Sprintf("svc-%s-%d", host, os.Getpid()), Mode: outbox.ModeHold},
		Store:   store, Publisher: pub, Gate: store, Logger: logger,
	})
	if err != nil {
		return err
	}
	// Hold mode keeps the relay's share of the buckets for as long as ctx
	// lasts; its end starts the stop.
	res, err := relay.Run(ctx, outbox.RunInput{Trigger: outbox.TriggerDirect, StopTimeout: stopTimeout})
	logger.Info("relay stopped", "reason", res.Reason, "published", res.Published, "released", res.Released,
		"releaseSkipped", res.ReleaseSkipped, "workLeft", res.WorkLeft)
	return err
}

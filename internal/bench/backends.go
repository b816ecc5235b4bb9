package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/pprof"
	"strings"

	"github.com/spillway-dev/spillway/internal/lab"

	"github.com/spillway-dev/spillway/internal/relayproc"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// Profile labels: every goroutine of the embedded servers carries
// component=backend (goroutines inherit the labels of the goroutine that
// starts them), and everything Spillway runs, including the AWS SDK and
// franz-go clients, carries component=spillway.
const (
	labelKey       = "component"
	labelSpillway  = "spillway"
	labelBackend   = "backend"
	benchTopic     = "spillway-bench"
	benchPartition = 8
)

// backends are one DynamoDB endpoint and one Kafka cluster, embedded or
// external, with the Counter attached to every DynamoDB client.
type backends struct {
	ddb   *outboxlocal.DynamoDB
	kafka *outboxlocal.Kafka
	topic string
}

// startBackends starts (or connects to) DynamoDB and Kafka with the bench
// topic. The embedded servers start under the backend profile label so
// their CPU can be told apart from Spillway's. A simulated study (inside
// the lab's bubble: env.Settle set) gets their in-memory forms, whatever
// env names: a socket would stop the bubble's clock.
func startBackends(ctx context.Context, env lab.Config) (*backends, error) {
	b := &backends{}
	var err error
	inMemory := env.Settle != nil
	pprof.Do(ctx, pprof.Labels(labelKey, labelBackend), func(ctx context.Context) {
		opts := []outboxlocal.DynamoOption{outboxlocal.WithoutEnvironment()}
		switch {
		case inMemory:
			opts = append(opts, outboxlocal.InMemory())
		case env.DynamoDBEndpoint != "":
			opts = append(opts, outboxlocal.WithEndpoint(env.DynamoDBEndpoint))
		}
		if b.ddb, err = outboxlocal.StartDynamoDB(ctx, opts...); err != nil {
			return
		}
		kcfg := outboxlocal.KafkaConfig{
			Topics: []string{benchTopic}, Partitions: benchPartition,
			IgnoreEnvironment: true, InMemory: inMemory,
		}
		if !inMemory {
			kcfg.Endpoint = strings.Join(env.Brokers, ",")
		}
		b.kafka, err = outboxlocal.StartKafka(ctx, kcfg)
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("bench: start backends: %w", err), b.Close())
	}
	b.topic = b.kafka.Topic(benchTopic)
	return b, nil
}

// Close stops the embedded servers, or deletes the tables and topics made
// on external ones.
func (b *backends) Close() error {
	var errs []error
	if b.kafka != nil {
		errs = append(errs, b.kafka.Close())
	}
	if b.ddb != nil {
		errs = append(errs, b.ddb.Close())
	}
	return errors.Join(errs...)
}

// newTable creates a fresh outbox table and returns its options with the
// given bucket count and clock.
func (b *backends) newTable(ctx context.Context, bucketCount int, clock outbox.Clock) (outboxddb.Options, error) {
	opts := outboxddb.Options{TableName: b.ddb.NewTableName(), BucketCount: bucketCount, Logger: quietLogger()}
	// Created on the system clock: CreateIfNotExists waits on the options'
	// clock, which a simulation does not move.
	if err := outboxddb.CreateIfNotExists(ctx, b.ddb.Client, opts); err != nil {
		return outboxddb.Options{}, fmt.Errorf("bench: create table %s: %w", opts.TableName, err)
	}
	b.ddb.DeleteOnClose(opts.TableName)
	opts = opts.WithDefaults()
	opts.Clock = clock
	return opts, nil
}

// kafkaConfig is a publisher's configuration for the cluster.
func (b *backends) kafkaConfig() outboxkafka.Config {
	return outboxkafka.Config{Brokers: b.kafka.Brokers, ExtraOpts: b.kafka.ClientOpts()}
}

// newPublisher returns a Kafka publisher connected to the cluster.
func (b *backends) newPublisher(ctx context.Context) (*outboxkafka.Publisher, error) {
	p, err := relayproc.NewPublisher(ctx, b.kafkaConfig(), true)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return p, nil
}

// newRelay builds one relay process from cfg: on the bench's DynamoDB
// client unless cfg names one, with a publisher of its own unless cfg
// shares one, and with the bench's quiet logger.
func (b *backends) newRelay(ctx context.Context, cfg relayproc.Config) (*relayproc.Proc, error) {
	if cfg.DynamoDB == nil {
		cfg.DynamoDB = b.ddb.Client
	}
	cfg.Kafka, cfg.InitPublisher, cfg.Logger = b.kafkaConfig(), true, quietLogger()
	p, err := relayproc.New(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: relay %s: %w", cfg.Relay.RelayID, err)
	}
	return p, nil
}

// quietLogger discards logs: the relays' per-run lines would drown the
// tables, and the results carry what matters.
func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

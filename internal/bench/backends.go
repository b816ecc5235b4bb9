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

// Backends are one DynamoDB endpoint and one Kafka cluster, embedded or
// external, with the Counter attached to every DynamoDB client: what the
// real-time scenarios run on, and, in their in-memory form, internal/economy's
// per-message cost and idle studies.
type Backends struct {
	// DynamoDB is the endpoint, its SDK client and its Counter.
	DynamoDB *outboxlocal.DynamoDB
	// Kafka is the cluster the relays publish to.
	Kafka *outboxlocal.Kafka
	// Topic is the bench topic's name on Kafka, which every message of a
	// Workload names.
	Topic string
}

// StartBackends starts (or connects to) DynamoDB and Kafka with the bench
// topic, the embedded servers with env.RoundTrips' delays on every
// request. The embedded servers start under the backend profile label so
// their CPU can be told apart from Spillway's. A simulated study (inside
// the lab's bubble: env.Settle set) gets their in-memory forms, whatever
// env names: a socket would stop the bubble's clock. Close releases them.
func StartBackends(ctx context.Context, env lab.Config) (*Backends, error) {
	b := &Backends{}
	var err error
	inMemory := env.Settle != nil
	pprof.Do(ctx, pprof.Labels(labelKey, labelBackend), func(ctx context.Context) {
		ddbDelay, kafkaDelay := roundTrips(env.RoundTrips)
		opts := []outboxlocal.DynamoOption{outboxlocal.WithoutEnvironment(), outboxlocal.WithRoundTrip(ddbDelay)}
		switch {
		case inMemory:
			opts = append(opts, outboxlocal.InMemory())
		case env.DynamoDBEndpoint != "":
			opts = append(opts, outboxlocal.WithEndpoint(env.DynamoDBEndpoint))
		}
		if b.DynamoDB, err = outboxlocal.StartDynamoDB(ctx, opts...); err != nil {
			return
		}
		kcfg := outboxlocal.KafkaConfig{
			Topics: []string{benchTopic}, Partitions: benchPartition,
			IgnoreEnvironment: true, InMemory: inMemory, RoundTrip: kafkaDelay,
		}
		if !inMemory {
			kcfg.Endpoint = strings.Join(env.Brokers, ",")
		}
		b.Kafka, err = outboxlocal.StartKafka(ctx, kcfg)
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("bench: start backends: %w", err), b.Close())
	}
	b.Topic = b.Kafka.Topic(benchTopic)
	return b, nil
}

// roundTrips are the embedded servers' delays, drawn from seeds of their
// own so that one server's requests do not shift the other's sequence.
func roundTrips(rt lab.RoundTrips) (dynamoDB, kafka outboxlocal.RoundTrip) {
	return outboxlocal.RoundTrip{Mean: rt.DynamoDB, Jitter: rt.Jitter, Seed: rt.Seed},
		outboxlocal.RoundTrip{Mean: rt.Kafka, Jitter: rt.Jitter, Seed: rt.Seed + 1}
}

// Close stops the embedded servers, or deletes the tables and topics made
// on external ones.
func (b *Backends) Close() error {
	var errs []error
	if b.Kafka != nil {
		errs = append(errs, b.Kafka.Close())
	}
	if b.DynamoDB != nil {
		errs = append(errs, b.DynamoDB.Close())
	}
	return errors.Join(errs...)
}

// NewTable creates a fresh outbox table, deleted when the backends close,
// and returns its options with the given bucket count and clock.
func (b *Backends) NewTable(ctx context.Context, bucketCount int, clock outbox.Clock) (outboxddb.Options, error) {
	opts := outboxddb.Options{TableName: b.DynamoDB.NewTableName(), BucketCount: bucketCount, Logger: QuietLogger()}
	// Created on the system clock: CreateIfNotExists waits on the options'
	// clock, which a simulation does not move.
	if err := outboxddb.CreateIfNotExists(ctx, b.DynamoDB.Client, opts); err != nil {
		return outboxddb.Options{}, fmt.Errorf("bench: create table %s: %w", opts.TableName, err)
	}
	b.DynamoDB.DeleteOnClose(opts.TableName)
	opts = opts.WithDefaults()
	opts.Clock = clock
	return opts, nil
}

// kafkaConfig is a publisher's configuration for the cluster.
func (b *Backends) kafkaConfig() outboxkafka.Config {
	return outboxkafka.Config{Brokers: b.Kafka.Brokers, ExtraOpts: b.Kafka.ClientOpts()}
}

// NewPublisher returns a Kafka publisher connected to the cluster; the
// caller closes it.
func (b *Backends) NewPublisher(ctx context.Context) (*outboxkafka.Publisher, error) {
	p, err := relayproc.NewPublisher(ctx, b.kafkaConfig(), true)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return p, nil
}

// NewRelay builds one relay process from cfg: on the bench's DynamoDB
// client unless cfg names one, with a publisher of its own unless cfg
// shares one, and with the bench's quiet logger.
func (b *Backends) NewRelay(ctx context.Context, cfg relayproc.Config) (*relayproc.Proc, error) {
	if cfg.DynamoDB == nil {
		cfg.DynamoDB = b.DynamoDB.Client
	}
	cfg.Kafka, cfg.InitPublisher, cfg.Logger = b.kafkaConfig(), true, QuietLogger()
	p, err := relayproc.New(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: relay %s: %w", cfg.Relay.RelayID, err)
	}
	return p, nil
}

// QuietLogger discards logs: the relays' per-run lines would drown the
// tables, and the results carry what matters.
func QuietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Package outboxtest is the one home of Spillway's test helpers: the test
// forms of the local backends in outboxlocal (each starts a backend for a
// *testing.T or a benchmark, fails the test on error and registers the
// cleanup), a loopback X-Ray daemon (XRayDaemon) and a DynamoDB endpoint
// that records the trace headers it receives (FakeDynamoDB). Everything a
// program may link (the embedded DynamoDB and Kafka, the counting and fault
// middleware) lives in outboxlocal, so that only test binaries link the
// testing package.
package outboxtest

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// NewDynamoDB is outboxlocal.StartDynamoDB for a test: it fails the test on
// error and closes the DynamoDB when the test ends.
func NewDynamoDB(t testing.TB, opts ...outboxlocal.DynamoOption) *outboxlocal.DynamoDB {
	t.Helper()
	d, err := outboxlocal.StartDynamoDB(t.Context(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	return d
}

// CreateTable creates a table with a fresh name on d (see
// outboxlocal.DynamoDB.CreateTable) and returns the name; it fails the test
// on error.
func CreateTable(t testing.TB, d *outboxlocal.DynamoDB) string {
	t.Helper()
	table := d.NewTableName()
	if err := d.CreateTable(t.Context(), table); err != nil {
		t.Fatal(err)
	}
	return table
}

// NewKafka is outboxlocal.StartKafka for a test with the given topics: it
// fails the test on error and closes the cluster when the test ends.
func NewKafka(t testing.TB, topics ...string) *outboxlocal.Kafka {
	t.Helper()
	return NewKafkaWith(t, outboxlocal.KafkaConfig{Topics: topics})
}

// NewKafkaWith is NewKafka with a full configuration.
func NewKafkaWith(t testing.TB, cfg outboxlocal.KafkaConfig) *outboxlocal.Kafka {
	t.Helper()
	k, err := outboxlocal.StartKafka(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := k.Close(); err != nil {
			t.Error(err)
		}
	})
	return k
}

// Consume reads topic from the start until it has n records (see
// outboxlocal.Kafka.Consume); it fails the test after
// outboxlocal.DefaultConsumeTimeout.
func Consume(t testing.TB, k *outboxlocal.Kafka, topic string, n int) []*kgo.Record {
	t.Helper()
	return consume(t, func(ctx context.Context) ([]*kgo.Record, error) { return k.Consume(ctx, topic, n) })
}

// ConsumeAll returns every record of topic up to its current end offsets
// (see outboxlocal.Kafka.ConsumeAll); it fails the test after
// outboxlocal.DefaultConsumeTimeout.
func ConsumeAll(t testing.TB, k *outboxlocal.Kafka, topic string) []*kgo.Record {
	t.Helper()
	return consume(t, func(ctx context.Context) ([]*kgo.Record, error) { return k.ConsumeAll(ctx, topic) })
}

func consume(t testing.TB, read func(context.Context) ([]*kgo.Record, error)) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), outboxlocal.DefaultConsumeTimeout)
	defer cancel()
	recs, err := read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

package outboxddb_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// The store contract on the embedded server, or on the endpoint
// SPILLWAY_DYNAMODB_ENDPOINT names (DynamoDB Local in CI).
func TestStoreContract(t *testing.T) {
	outboxtest.RunStoreTests(t, func(t *testing.T, clock outbox.Clock, bucketCount int) outboxtest.StoreUnderTest {
		d := outboxtest.NewDynamoDB(t)
		opts := outboxddb.Options{TableName: outboxtest.CreateTable(t, d), BucketCount: bucketCount, Clock: clock,
			Logger: slog.New(slog.DiscardHandler)}
		store, err := outboxddb.NewStore(d.Client, opts)
		if err != nil {
			t.Fatal(err)
		}
		w, err := outboxddb.NewWriter(d.Client, opts)
		if err != nil {
			t.Fatal(err)
		}
		return outboxtest.StoreUnderTest{Store: store, Enqueue: func(ctx context.Context, msgs ...outbox.Message) ([]outbox.Message, error) {
			return w.EnqueueBatch(ctx, msgs)
		}, Requests: func() map[string]int { return d.Counter.Snapshot().Requests },
			MarkReplay: func(ctx context.Context, bucket int, seqs []int64) error {
				parked, err := store.ListParked(ctx, bucket)
				if err != nil {
					return err
				}
				parked = slices.DeleteFunc(parked, func(p outboxddb.ParkedMessage) bool { return !slices.Contains(seqs, p.Sequence) })
				_, err = store.RequestReplay(ctx, parked, "")
				return err
			}}
	})
}

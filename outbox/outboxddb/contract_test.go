package outboxddb_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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
		store, err := outboxddb.NewStore(d.Client, outboxddb.StoreOptions{Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		w, err := outboxddb.NewWriter(d.Client, outboxddb.WriterOptions{Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		abandoner, err := outboxddb.NewWriter(d.Client, outboxddb.WriterOptions{Options: opts, MaxCommitAttempts: 1})
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
			},
			Abandon: func(ctx context.Context, m outbox.Message) error {
				// A business item whose condition fails: the transaction
				// is cancelled after the writer reserved m's number.
				_, err := abandoner.Commit(ctx, func(_ context.Context, tx *outboxddb.Tx) error {
					tx.Put(types.Put{TableName: aws.String(opts.TableName), ConditionExpression: aws.String("attribute_exists(PK)"),
						Item: map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "ABANDONED"}, "SK": &types.AttributeValueMemberS{Value: m.ID.String()}}})
					tx.Enqueue(m)
					return nil
				})
				if !errors.Is(err, outboxddb.ErrConflict) {
					return fmt.Errorf("a commit whose business condition fails: %v; want a conflict", err)
				}
				return nil
			}}
	})
}

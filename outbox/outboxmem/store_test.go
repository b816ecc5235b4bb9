package outboxmem_test

import (
	"context"
	"testing"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxmem"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestStoreContract(t *testing.T) {
	outboxtest.RunStoreTests(t, func(t *testing.T, clock outbox.Clock, bucketCount int) outboxtest.StoreUnderTest {
		s, err := outboxmem.New(outboxmem.Options{BucketCount: bucketCount, Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return outboxtest.StoreUnderTest{Store: s, Enqueue: s.Enqueue, MarkReplay: func(ctx context.Context, bucket int, seqs []int64) error {
			_, err := s.MarkReplay(ctx, bucket, seqs, "")
			return err
		}, Abandon: func(_ context.Context, m outbox.Message) error {
			b, err := outbox.ComputeBucket(m.Key, m.ID, bucketCount, m.Partition)
			if err != nil {
				return err
			}
			s.Reserve(b)
			return nil
		}}
	})
}

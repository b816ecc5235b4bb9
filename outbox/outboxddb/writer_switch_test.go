package outboxddb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/generation"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// replacing configures the successor generation (OUTBOX2/32) replacing
// the default one (OUTBOX/8).
func replacing(o *WriterOptions) {
	o.KeyPrefix, o.BucketCount = successor.KeyPrefix, successor.BucketCount
	o.PreviousKeyPrefix, o.PreviousBucketCount = DefaultKeyPrefix, outbox.DefaultBucketCount
}

// successorStore makes a store of the successor generation.
func successorStore(o *StoreOptions) {
	o.KeyPrefix, o.BucketCount = successor.KeyPrefix, successor.BucketCount
}

// holds reports whether s's generation has a message in bucket.
func holds(t *testing.T, s *Store, bucket int) bool {
	t.Helper()
	c, err := s.GenerationContents(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(c.Messages, bucket)
}

func bucketOf(t *testing.T, m outbox.Message, count int) int {
	t.Helper()
	b, err := outbox.ComputeBucket(m.Key, m.ID, count, m.Partition)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWriterSwitch(t *testing.T) {
	// A writer replacing a generation writes the old one, with the check that
	// it is open, until the seal, and the new one after it without a check.
	// A small Enqueue costs 1 + 4 write units during the switch (reserve, then
	// put and check in a transaction), one refused transaction at the seal,
	// then 1 + 1 as before.
	t.Run("WithAPreviousGeneration_SwitchesAtTheSeal", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			old, cur := e.store(t), e.store(t, successorStore)
			w := e.writer(t, replacing)
			enq := func(key string) (outbox.Message, outboxlocal.Counts) {
				t.Helper()
				var m outbox.Message
				var err error
				c := e.counts(func() { m, err = w.Enqueue(t.Context(), newMessage(t, "t", key, 0)) })
				if err != nil {
					t.Fatalf("enqueue %s: %v", key, err)
				}
				return m, c
			}
			for _, phase := range []string{"no marker", "open"} {
				m, c := enq("before-" + phase)
				wantRequests(t, c, map[string]int{"UpdateItem": 1, "TransactWriteItems": 1})
				wantUnits(t, phase, c, 0, 5)
				if m.Bucket() != bucketOf(t, m, 8) || !holds(t, old, m.Bucket()) {
					t.Fatalf("%s: message in bucket %d; want it in the old generation's bucket %d", phase, m.Bucket(), bucketOf(t, m, 8))
				}
				if phase == "no marker" {
					if _, err := old.OpenGeneration(t.Context(), successor); err != nil {
						t.Fatal(err)
					}
				}
			}
			if _, err := old.SealGeneration(t.Context(), successor); err != nil {
				t.Fatal(err)
			}
			// The first write after the seal is refused by its check (its
			// reservation in the old generation leaves a gap) and sent again to
			// the new generation, after the writer's one read of the new
			// generation's layout record (written when it opened).
			m, c := enq("at-the-seal")
			wantRequests(t, c, map[string]int{"UpdateItem": 2, "TransactWriteItems": 1, "PutItem": 1, "Query": 1})
			// 1 + 4 refused, then 1 + 1.
			wantUnits(t, "the write that meets the seal", c, 1, 7)
			if m.Bucket() != bucketOf(t, m, 32) || !holds(t, cur, m.Bucket()) {
				t.Fatalf("after the seal: message in bucket %d; want it in the new generation's bucket %d", m.Bucket(), bucketOf(t, m, 32))
			}
			m, c = enq("after")
			wantRequests(t, c, map[string]int{"UpdateItem": 1, "PutItem": 1})
			wantUnits(t, "after the seal", c, 0, 2)
			if !holds(t, cur, m.Bucket()) {
				t.Fatal("a write after the seal is not in the new generation")
			}
			var batch []outbox.Message
			c = e.counts(func() {
				var err error
				if batch, err = w.EnqueueBatch(t.Context(), []outbox.Message{newMessage(t, "t", "x", 0), newMessage(t, "t", "y", 0)}); err != nil {
					t.Fatal(err)
				}
			})
			if c.Requests["TransactWriteItems"] != 1 || batch[0].Bucket() != bucketOf(t, batch[0], 32) {
				t.Fatalf("a batch after the seal: %v, bucket %d", c.Requests, batch[0].Bucket())
			}
		})
	})

	// A caller's own transaction: Prepare adds the check while the
	// writer writes the old generation; after the seal the transaction is
	// refused with a *GenerationSealedError that says the writer switched, and
	// the items built again are for the new generation, with no check.
	t.Run("WithAPreviousGeneration_CallersTransactionSwitchesAfterOneRefusal", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			old := e.store(t)
			w := e.writer(t, replacing)
			msgs := []outbox.Message{newMessage(t, "t", "a", 0), newMessage(t, "t", "b", 0)}
			commit := func() ([]outbox.Message, int, error) {
				t.Helper()
				p, err := w.Prepare(t.Context(), msgs...)
				if err != nil {
					t.Fatal(err)
				}
				_, err = e.client.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: p.Items()})
				return p.Messages(), len(p.Items()), p.Explain(err)
			}
			if built, n, err := commit(); err != nil || n != 3 || built[0].Bucket() != bucketOf(t, built[0], 8) {
				t.Fatalf("before the seal: %d items, %v; want 2 puts for the old generation and its check", n, err)
			}
			if _, err := old.OpenGeneration(t.Context(), successor); err != nil {
				t.Fatal(err)
			}
			if _, err := old.SealGeneration(t.Context(), successor); err != nil {
				t.Fatal(err)
			}
			_, _, err := commit()
			var sealed *GenerationSealedError
			if !errors.Is(err, generation.ErrSealed) || !errors.As(err, &sealed) || !sealed.Switched || sealed.Marker.Successor != successor {
				t.Fatalf("at the seal: %v; want a GenerationSealedError saying the writer switched to %s", err, successor)
			}
			if built, n, err := commit(); err != nil || n != 2 || built[1].Bucket() != bucketOf(t, built[1], 32) {
				t.Fatalf("after the seal: %d items, %v; want 2 puts for the new generation", n, err)
			}
		})
	})

	// A writer whose previous generation was sealed for another successor
	// writes nowhere.
	t.Run("WithAPreviousGeneration_SealedForAnotherSuccessor_IsAMisconfiguration", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			old := e.store(t)
			other := generation.Generation{KeyPrefix: "OUTBOX3", BucketCount: 16}
			if _, err := old.OpenGeneration(t.Context(), other); err != nil {
				t.Fatal(err)
			}
			if _, err := old.SealGeneration(t.Context(), other); err != nil {
				t.Fatal(err)
			}
			w := e.writer(t, replacing)
			if _, err := w.Enqueue(t.Context(), newMessage(t, "t", "a", 0)); !errors.Is(err, outbox.ErrMisconfigured) {
				t.Fatalf("enqueue: %v; want ErrMisconfigured", err)
			}
			if holds(t, e.store(t, successorStore), bucketOf(t, newMessage(t, "t", "a", 0), 32)) {
				t.Fatal("the message reached the new generation")
			}
		})
	})

	// A store's gate: one read without a predecessor, two while it has one,
	// generation.ErrNotOpen until the predecessor is drained, and nothing once
	// it saw it drained.
	t.Run("Store_CheckServable_WaitsForThePredecessorToDrain", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			old, cur := e.store(t), e.store(t, successorStore)
			var err error
			c := e.counts(func() { err = cur.CheckServable(t.Context()) })
			if err != nil {
				t.Fatalf("no predecessor: %v", err)
			}
			wantRequests(t, c, map[string]int{"Query": 1})
			wantUnits(t, "no predecessor", c, 1, 0)
			if _, err := old.OpenGeneration(t.Context(), successor); err != nil {
				t.Fatal(err)
			}
			for _, move := range []func() (generation.Marker, error){
				func() (generation.Marker, error) { return old.ReadGeneration(t.Context()) },
				func() (generation.Marker, error) { return old.SealGeneration(t.Context(), successor) },
			} {
				m, err := move()
				if err != nil {
					t.Fatal(err)
				}
				c = e.counts(func() { err = cur.CheckServable(t.Context()) })
				if !errors.Is(err, generation.ErrNotOpen) {
					t.Fatalf("predecessor %s: %v; want generation.ErrNotOpen", m.Phase, err)
				}
				wantUnits(t, "predecessor "+string(m.Phase), c, 2, 0)
			}
			if _, err := old.FinishGeneration(t.Context(), successor); err != nil {
				t.Fatal(err)
			}
			for _, s := range []*Store{cur, e.store(t, successorStore)} {
				c = e.counts(func() { err = s.CheckServable(t.Context()) })
				if err != nil {
					t.Fatalf("predecessor drained: %v", err)
				}
				wantUnits(t, "predecessor drained", c, 2, 0)
				c = e.counts(func() { err = s.CheckServable(t.Context()) })
				if err != nil || len(c.Requests) != 0 {
					t.Fatalf("again: %v, %v; want no request", err, c.Requests)
				}
			}
			// Another generation cannot name the same successor.
			if _, err := e.store(t, func(o *StoreOptions) { o.KeyPrefix = "OTHER" }).OpenGeneration(t.Context(), successor); !errors.Is(err, outbox.ErrMisconfigured) {
				t.Fatalf("a second predecessor: %v; want ErrMisconfigured", err)
			}
		})
	})

	// A writer replacing a generation may also check its own generation (for a
	// later change): after the switch its writes carry that check.
	t.Run("WithAPreviousGeneration_AndItsOwnCheck", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			old := e.store(t)
			if _, err := old.OpenGeneration(t.Context(), successor); err != nil {
				t.Fatal(err)
			}
			if _, err := old.SealGeneration(t.Context(), successor); err != nil {
				t.Fatal(err)
			}
			w := e.writer(t, replacing, func(o *WriterOptions) { o.GenerationCheck = true })
			if _, err := w.Enqueue(t.Context(), newMessage(t, "t", "a", 0)); err != nil {
				t.Fatal(err)
			}
			c := e.counts(func() {
				if _, err := w.Enqueue(t.Context(), newMessage(t, "t", "b", 0)); err != nil {
					t.Fatal(err)
				}
			})
			wantRequests(t, c, map[string]int{"UpdateItem": 1, "TransactWriteItems": 1})
		})
	})

	// A writer replacing a generation buckets a message for the generation it
	// writes: the previous one's count while that is open.
	t.Run("WithAPreviousGeneration_BucketsForTheGenerationItWrites", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w := e.writer(t, replacing)
			// A key whose bucket differs between the two counts.
			var m outbox.Message
			for i := 0; m.Key == nil || bucketOf(t, m, outbox.DefaultBucketCount) == bucketOf(t, m, successor.BucketCount); i++ {
				var err error
				if m, err = outbox.NewMessage("t", fmt.Appendf(nil, "k%d", i), []byte("v"), outbox.MessageOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			got, err := w.Enqueue(t.Context(), m)
			if err != nil {
				t.Fatal(err)
			}
			if want := bucketOf(t, m, outbox.DefaultBucketCount); got.Bucket() != want {
				t.Fatalf("stored in bucket %d; want %d, the old generation's", got.Bucket(), want)
			}
		})
	})

	// Commit on a writer replacing a generation writes where Enqueue does: the
	// old generation, with its check, while that is open, so a key's message
	// committed now is published before any message of the key written to the
	// new generation; at the seal it is refused once and built again for the
	// new generation.
	t.Run("WithAPreviousGeneration_CommitWritesTheOldGenerationUntilTheSeal", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			old, cur := e.store(t), e.store(t, successorStore)
			w := e.writer(t, replacing)
			commit := func(key string) outbox.Message {
				t.Helper()
				m, err := outbox.NewMessage("t", []byte(key), []byte("v"), outbox.MessageOptions{})
				if err != nil {
					t.Fatal(err)
				}
				stored, err := w.Commit(t.Context(), func(_ context.Context, tx *Tx) error { return tx.Enqueue(m) })
				if err != nil {
					t.Fatalf("commit %s: %v", key, err)
				}
				return stored[0]
			}
			if _, err := old.OpenGeneration(t.Context(), successor); err != nil {
				t.Fatal(err)
			}
			first := commit("k")
			if first.Bucket() != bucketOf(t, first, 8) || !holds(t, old, first.Bucket()) || holds(t, cur, bucketOf(t, first, 32)) {
				t.Fatalf("committed while the old generation is open: bucket %d; want it in the old generation's bucket %d only",
					first.Bucket(), bucketOf(t, first, 8))
			}
			if _, err := old.SealGeneration(t.Context(), successor); err != nil {
				t.Fatal(err)
			}
			second := commit("k")
			if second.Bucket() != bucketOf(t, second, 32) || !holds(t, cur, second.Bucket()) {
				t.Fatalf("committed after the seal: bucket %d; want it in the new generation's bucket %d", second.Bucket(), bucketOf(t, second, 32))
			}
		})
	})
}

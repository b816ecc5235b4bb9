package outboxddb

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/generation"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

var successor = generation.Generation{KeyPrefix: "OUTBOX2", BucketCount: 32}

func wantUnits(t *testing.T, what string, c outboxlocal.Counts, read, write float64) {
	t.Helper()
	if c.ReadUnits != read || c.WriteUnits != write {
		t.Fatalf("%s: %.1f read and %.1f write units, want %.1f and %.1f", what, c.ReadUnits, c.WriteUnits, read, write)
	}
}

func TestGeneration(t *testing.T) {
	// The marker moves open → sealed → drained, one conditional write per
	// phase (the open also writes the successor's predecessor marker); repeating a phase change (a second relay or operator) is answered
	// from the stored marker, and a marker opened first by another relay wins.
	t.Run("Marker_MovesOpenSealedDrained_OneConditionalWriteEach", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			s := e.store(t)
			var m generation.Marker
			var err error
			c := e.counts(func() { m, err = s.ReadGeneration(t.Context()) })
			if err != nil || m.Exists || m.Generation != s.Generation() {
				t.Fatalf("a fresh table reads %+v, %v; want no marker for %s", m, err, s.Generation())
			}
			wantRequests(t, c, map[string]int{"Query": 1})
			wantUnits(t, "read", c, 1, 0)

			c = e.counts(func() { m, err = s.OpenGeneration(t.Context(), successor) })
			if err != nil || m.Phase != generation.PhaseOpen || m.Successor != successor || !m.OpenedAt.Equal(t0) {
				t.Fatalf("open: %+v, %v", m, err)
			}
			// The marker, the successor's predecessor marker and its layout
			// record, in one transaction.
			wantRequests(t, c, map[string]int{"TransactWriteItems": 1})
			wantUnits(t, "open", c, 0, 6)
			if l, found, err := ReadLayout(t.Context(), e.client, func() Options {
				o := e.opts
				o.KeyPrefix, o.BucketCount = successor.KeyPrefix, successor.BucketCount
				return o
			}()); err != nil || !found || l.BucketCount != successor.BucketCount {
				t.Fatalf("the successor's layout record: %+v, %v, %v; want %d buckets", l, found, err, successor.BucketCount)
			}
			// A second relay opening with another successor gets the stored one.
			other := generation.Generation{KeyPrefix: "OTHER", BucketCount: 4}
			c = e.counts(func() { m, err = s.OpenGeneration(t.Context(), other) })
			if err != nil || m.Successor != successor {
				t.Fatalf("second open: %+v, %v; want the stored successor %s", m, err, successor)
			}
			wantRequests(t, c, map[string]int{"TransactWriteItems": 1, "Query": 1})

			c = e.counts(func() { m, err = s.SealGeneration(t.Context(), successor) })
			if err != nil || m.Phase != generation.PhaseSealed || m.SealedAt.IsZero() {
				t.Fatalf("seal: %+v, %v", m, err)
			}
			wantRequests(t, c, map[string]int{"UpdateItem": 1, "Query": 1})
			wantUnits(t, "seal", c, 1, 1)
			if m, err = s.SealGeneration(t.Context(), successor); err != nil || m.Phase != generation.PhaseSealed {
				t.Fatalf("sealing again: %+v, %v; want the sealed marker", m, err)
			}
			if m, err = s.FinishGeneration(t.Context(), successor); err != nil || m.Phase != generation.PhaseDrained || m.DrainedAt.IsZero() {
				t.Fatalf("finish: %+v, %v", m, err)
			}
			if m, err = s.FinishGeneration(t.Context(), successor); err != nil || m.Phase != generation.PhaseDrained {
				t.Fatalf("finishing again: %+v, %v; want the drained marker", m, err)
			}
			if _, err = s.SealGeneration(t.Context(), successor); !errors.Is(err, generation.ErrPhase) {
				t.Fatalf("sealing a drained generation: %v; want generation.ErrPhase", err)
			}
		})
	})

	// Phase changes that do not fit the stored marker are refused with a
	// specific error, and change nothing.
	t.Run("Marker_BadTransitions_AreRefused", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			s := e.store(t)
			if _, err := s.SealGeneration(t.Context(), successor); !errors.Is(err, generation.ErrPhase) {
				t.Fatalf("sealing without a marker: %v; want generation.ErrPhase", err)
			}
			if m, _ := s.ReadGeneration(t.Context()); m.Exists {
				t.Fatalf("a refused seal wrote a marker: %+v", m)
			}
			if _, err := s.OpenGeneration(t.Context(), successor); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name string
				call func() (generation.Marker, error)
				want error
			}{
				{"finish an open generation", func() (generation.Marker, error) { return s.FinishGeneration(t.Context(), successor) }, generation.ErrPhase},
				{"seal for another successor", func() (generation.Marker, error) {
					return s.SealGeneration(t.Context(), generation.Generation{KeyPrefix: "OUTBOX2", BucketCount: 16})
				}, generation.ErrPhase},
				{"seal from a store with another bucket count", func() (generation.Marker, error) {
					return e.store(t, func(o *StoreOptions) { o.BucketCount = 16 }).SealGeneration(t.Context(), successor)
				}, generation.ErrPhase},
				{"a successor on the same prefix", func() (generation.Marker, error) {
					return s.SealGeneration(t.Context(), generation.Generation{KeyPrefix: DefaultKeyPrefix, BucketCount: 32})
				}, outbox.ErrMisconfigured},
				{"a successor without buckets", func() (generation.Marker, error) {
					return s.OpenGeneration(t.Context(), generation.Generation{KeyPrefix: "X"})
				}, outbox.ErrMisconfigured},
			} {
				if _, err := c.call(); !errors.Is(err, c.want) {
					t.Errorf("%s: %v; want %v", c.name, err, c.want)
				}
			}
			if m, _ := s.ReadGeneration(t.Context()); m.Phase != generation.PhaseOpen {
				t.Fatalf("after refused changes the marker is %+v; want it still open", m)
			}
		})
	})

	// The look into a generation reads the head of every parked, message and
	// again parked partition, strongly consistent: 3 × 8 one-unit queries when
	// empty, 2 × 8 otherwise.
	t.Run("Contents_FindsMessagesAndParkedMessages", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			s, w := e.store(t), e.writer(t)
			var got generation.Contents
			var err error
			c := e.counts(func() { got, err = s.GenerationContents(t.Context()) })
			if err != nil || !got.Empty() {
				t.Fatalf("an empty generation: %+v, %v", got, err)
			}
			wantRequests(t, c, map[string]int{"Query": 24})
			wantUnits(t, "contents", c, 24, 0)
			enqueue(t, w, 2, 1)
			parked := enqueue(t, w, 5, 1)
			if err := s.Park(t.Context(), outbox.Parking{Bucket: 5, Sequence: parked[0].Sequence(), Reason: outbox.ParkTooLarge}); err != nil {
				t.Fatal(err)
			}
			c = e.counts(func() { got, err = s.GenerationContents(t.Context()) })
			wantRequests(t, c, map[string]int{"Query": 16})
			if err != nil || got.Empty() || len(got.Messages) != 1 || got.Messages[0] != 2 || len(got.Parked) != 1 || got.Parked[0] != 5 {
				t.Fatalf("contents %+v, %v; want messages in bucket 2 and parked in bucket 5", got, err)
			}
		})
	})

	// A Go writer with GenerationCheck writes while there is no marker and
	// while it is open; after the seal it is refused with generation.ErrSealed,
	// naming the successor, and nothing reaches the generation. The check costs
	// a transaction: 1 + 1 write units for a small Enqueue without it, 1 + 4
	// with it.
	t.Run("Writer_GenerationCheck_RefusesAStaleWriterAfterTheSeal", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			s := e.store(t)
			plain, checked := e.writer(t), e.writer(t, func(o *WriterOptions) { o.GenerationCheck = true })
			c := e.counts(func() { enqueue(t, plain, 1, 1) })
			wantRequests(t, c, map[string]int{"UpdateItem": 1, "PutItem": 1})
			wantUnits(t, "plain enqueue", c, 0, 2)
			c = e.counts(func() { enqueue(t, checked, 1, 1) })
			wantRequests(t, c, map[string]int{"UpdateItem": 1, "TransactWriteItems": 1})
			wantUnits(t, "checked enqueue", c, 0, 5)
			if _, err := s.OpenGeneration(t.Context(), successor); err != nil {
				t.Fatal(err)
			}
			if _, err := checked.EnqueueBatch(t.Context(), []outbox.Message{newMessage(t, "t", "a", 1), newMessage(t, "t", "b", 3)}); err != nil {
				t.Fatalf("an open generation refused a checked batch: %v", err)
			}
			if _, err := s.SealGeneration(t.Context(), successor); err != nil {
				t.Fatal(err)
			}
			before, _ := s.GenerationContents(t.Context())
			_, err := checked.Enqueue(t.Context(), newMessage(t, "t", "late", 6))
			if !errors.Is(err, generation.ErrSealed) {
				t.Fatalf("a stale writer after the seal: %v; want generation.ErrSealed", err)
			}
			for _, want := range []string{"OUTBOX/8 is sealed", `"OUTBOX2"`, "32"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error %q does not say %q", err, want)
				}
			}
			_, err = checked.EnqueueBatch(t.Context(), []outbox.Message{newMessage(t, "t", "x", 6), newMessage(t, "t", "y", 7)})
			if !errors.Is(err, generation.ErrSealed) {
				t.Fatalf("a stale batch after the seal: %v; want generation.ErrSealed", err)
			}
			after, _ := s.GenerationContents(t.Context())
			wantInts(t, "buckets with messages after refused writes", after.Messages, before.Messages)
			// A caller's own transaction: the prepared items end with the
			// check, and the explained error says sealed too.
			p, err := checked.Prepare(t.Context(), newMessage(t, "t", "z", 6))
			if err != nil {
				t.Fatal(err)
			}
			if n := len(p.Items()); n != 2 || p.Items()[1].ConditionCheck == nil {
				t.Fatalf("prepared %d items; want the put and the generation check", n)
			}
			_, err = e.client.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: p.Items()})
			if err = p.Explain(err); !errors.Is(err, generation.ErrSealed) {
				t.Fatalf("a caller's transaction after the seal: %v; want generation.ErrSealed", err)
			}
		})
	})

	// A relay parks a message while another looks into the generation,
	// between the looks at its two partitions: one of the looks still finds
	// it. (A replay moves nothing: the relay holding the bucket publishes the
	// parked message and then deletes it.)
	t.Run("Contents_AMessageParkedDuringTheLook_IsFound", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			mover, w := e.store(t), e.writer(t)
			msgs := enqueue(t, w, 2, 1)
			move := func() {
				if err := mover.Park(t.Context(), outbox.Parking{Bucket: 2, Sequence: msgs[0].Sequence(), Reason: outbox.ParkTooLarge}); err != nil {
					t.Error(err)
				}
			}
			// The looks go bucket by bucket: parked, messages, parked. The move
			// lands after the first look passed bucket 2's parked partition and
			// before the look at its messages.
			e.client = &onQuery{Client: e.client, pk: "OUTBOX#MESSAGES#0", hook: move}
			looker := e.store(t, func(o *StoreOptions) { o.MaxConcurrency = 1 })
			got, err := looker.GenerationContents(t.Context())
			if err != nil || got.Empty() {
				t.Fatalf("contents %+v, %v; want the parked message found", got, err)
			}
		})
	})
}

// onQuery runs hook once, before the first query of partition pk.
type onQuery struct {
	Client
	pk   string
	hook func()
}

func (c *onQuery) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if pk, _ := stringAttr(in.ExpressionAttributeValues, ":pk"); pk == c.pk && c.hook != nil {
		hook := c.hook
		c.hook = nil
		hook()
	}
	return c.Client.Query(ctx, in, optFns...)
}

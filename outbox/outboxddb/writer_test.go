package outboxddb

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
)

func TestWriter(t *testing.T) {
	t.Run("EnqueuedMessage_RoundTripsEveryField", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.writer(t), e.store(t)
			p := int32(3)
			in := outbox.Message{
				ID: outbox.NewMessageID(), Topic: "orders", Key: []byte("order-1"), Value: []byte(`{"total":42}`),
				Headers: outbox.EncodeHeaders([]outbox.Header{{Key: "trace", Value: []byte("abc")}}), Partition: &p,
				CreatedAt: t0.Add(123456700 * time.Nanosecond),
			}
			stored, err := w.Enqueue(t.Context(), in)
			if err != nil {
				t.Fatal(err)
			}
			if stored.Sequence() != 1 {
				t.Fatalf("first sequence %d, want 1", stored.Sequence())
			}
			got, err := s.FetchBatch(t.Context(), 3, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("fetched %d messages", len(got))
			}
			m := got[0]
			if m.ID != in.ID || m.Topic != in.Topic || !bytes.Equal(m.Key, in.Key) || !bytes.Equal(m.Value, in.Value) ||
				!bytes.Equal(m.Headers, in.Headers) || *m.Partition != 3 || m.Bucket() != 3 || m.Sequence() != 1 || !m.CreatedAt.Equal(in.CreatedAt) {
				t.Fatalf("fetched %+v, want %+v", m, in)
			}
		})
	})

	t.Run("NullAndEmptyPayloads_StayDistinct", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.writer(t), e.store(t)
			one := int32(1)
			keyless := outbox.Message{ID: outbox.NewMessageID(), Topic: "t", Key: nil, Value: []byte{}, Partition: &one, CreatedAt: t0}
			tombstone := outbox.Message{ID: outbox.NewMessageID(), Topic: "t", Key: []byte{}, Value: nil, Partition: &one, CreatedAt: t0}
			if _, err := w.EnqueueBatch(t.Context(), []outbox.Message{keyless, tombstone}); err != nil {
				t.Fatal(err)
			}
			got, err := s.FetchBatch(t.Context(), 1, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 {
				t.Fatalf("fetched %d", len(got))
			}
			if got[0].Key != nil || got[0].Value == nil || len(got[0].Value) != 0 {
				t.Fatalf("keyless message came back as key %v value %v", got[0].Key, got[0].Value)
			}
			if got[1].Key == nil || len(got[1].Key) != 0 || got[1].Value != nil {
				t.Fatalf("tombstone came back as key %v value %v", got[1].Key, got[1].Value)
			}
		})
	})

	t.Run("Lists_KeepTheirOrderPerBucket_InsideABusinessTransaction", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.writer(t), e.store(t)
			// An earlier single message, so the bucket's numbers do not start at 1.
			if _, err := w.Enqueue(t.Context(), newMessage(t, "orders", "first", 2)); err != nil {
				t.Fatal(err)
			}
			list := []outbox.Message{
				newMessage(t, "orders", "a", 2), newMessage(t, "orders", "b", 6), newMessage(t, "orders", "c", 2),
				newMessage(t, "orders", "d", 2), newMessage(t, "orders", "e", 6),
			}
			var items []types.TransactWriteItem
			var reserved []outbox.Message
			c := e.counts(func() {
				var err error
				items, reserved, err = prepareItems(t.Context(), w, list)
				if err != nil {
					t.Fatal(err)
				}
			})
			wantRequests(t, c, map[string]int{"UpdateItem": 2}) // one reservation per distinct bucket
			wantInts(t, "sequences", sequences(reserved), []int64{2, 1, 3, 4, 2})
			business := types.TransactWriteItem{Put: &types.Put{
				TableName: aws.String(e.opts.TableName),
				Item:      item{"PK": S("ORDER#1"), "SK": S("ORDER")},
			}}
			if _, err := e.d.Client.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{
				TransactItems: append([]types.TransactWriteItem{business}, items...),
			}); err != nil {
				t.Fatal(err)
			}
			for bucket, keys := range map[int][]string{2: {"first", "a", "c", "d"}, 6: {"b", "e"}} {
				got, err := s.FetchBatch(t.Context(), bucket, 100)
				if err != nil {
					t.Fatal(err)
				}
				var gotKeys []string
				for _, m := range got {
					gotKeys = append(gotKeys, string(m.Key))
				}
				if !slices.Equal(gotKeys, keys) {
					t.Fatalf("bucket %d came back as %v, want %v", bucket, gotKeys, keys)
				}
			}
		})
	})

	t.Run("AbandonedReservation_LeavesAGap_ThatHoldsNothingBack", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.writer(t), e.store(t)
			if _, err := w.Enqueue(t.Context(), newMessage(t, "t", "1", 4)); err != nil {
				t.Fatal(err)
			}
			// A transaction that reserved and then never committed.
			if _, abandoned, err := prepareItem(t.Context(), w, newMessage(t, "t", "lost", 4)); err != nil || abandoned.Sequence() != 2 {
				t.Fatalf("reservation = %d, %v", abandoned.Sequence(), err)
			}
			if _, err := w.Enqueue(t.Context(), newMessage(t, "t", "3", 4)); err != nil {
				t.Fatal(err)
			}
			var got []outbox.Message
			c := e.counts(func() {
				var err error
				if got, err = s.FetchBatch(t.Context(), 4, 10); err != nil {
					t.Fatal(err)
				}
			})
			wantInts(t, "sequences", sequences(got), []int64{1, 3})
			// The fetch alone: 3's stamp says its transaction wrote 3 only,
			// and the page that read 3 scanned 2.
			wantRequests(t, c, map[string]int{"Query": 1})
		})
	})

	t.Run("Enqueue_RetryOfAnAppliedPut_IsASuccess", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.writer(t), e.store(t)
			e.d.Faults.LoseResponse("PutItem")
			var stored outbox.Message
			c := e.counts(func() {
				var err error
				if stored, err = w.Enqueue(t.Context(), newMessage(t, "t", "k", 0)); err != nil {
					t.Fatalf("enqueue whose retry was refused by its own item: %v", err)
				}
			})
			if c.Requests["PutItem"] != 2 || c.Refused != 1 {
				t.Fatalf("requests %v, refused %d: want the applied attempt and its refused retry", c.Requests, c.Refused)
			}
			got, err := s.FetchBatch(t.Context(), 0, 10)
			if err != nil || len(got) != 1 || got[0].ID != stored.ID {
				t.Fatalf("fetched %v, %v", got, err)
			}
		})
	})

	t.Run("EnqueueBatch_RetryAfterItsTokenExpired_IsASuccess", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			if e.d.External {
				t.Skip("an external endpoint forgets idempotency tokens after 10 minutes of its own time, which the bubble cannot move")
			}
			w, s := e.writer(t), e.store(t)
			// The first attempt is applied and its answer lost; every attempt is
			// sent 11 minutes after it was made (on the bubble's clock), so the retry
			// arrives after DynamoDB forgot the idempotency token and runs again,
			// refused by every one of the first attempt's items (two buckets, two
			// messages in one of them).
			e.d.Faults.LoseResponse("TransactWriteItems")
			e.d.Faults.Latency("TransactWriteItems", 11*time.Minute)
			msgs := []outbox.Message{newMessage(t, "t", "a", 3), newMessage(t, "t", "b", 5), newMessage(t, "t", "c", 3)}
			type result struct {
				msgs []outbox.Message
				err  error
			}
			done := make(chan result, 1)
			before := e.d.Counter.Snapshot()
			go func() {
				m, err := w.EnqueueBatch(context.Background(), msgs)
				done <- result{m, err}
			}()
			res := <-done
			e.d.Faults.Clear()
			if res.err != nil {
				t.Fatalf("enqueue refused by its own items: %v", res.err)
			}
			c := e.d.Counter.Snapshot().Since(before)
			if c.Requests["TransactWriteItems"] != 2 {
				t.Fatalf("requests %v, want two transaction attempts", c.Requests)
			}
			if c.Refused != len(msgs) {
				t.Fatalf("refused %d, want %d: the re-run transaction refused by each of its own items", c.Refused, len(msgs))
			}
			for bucket, want := range map[int][]outbox.MessageID{3: {msgs[0].ID, msgs[2].ID}, 5: {msgs[1].ID}} {
				got, err := s.FetchBatch(t.Context(), bucket, 10)
				if err != nil {
					t.Fatal(err)
				}
				var ids []outbox.MessageID
				for _, m := range got {
					ids = append(ids, m.ID)
				}
				if !slices.Equal(ids, want) {
					t.Fatalf("bucket %d holds %v, want %v stored once", bucket, ids, want)
				}
			}
			if !slices.Equal(sequences(res.msgs), []int64{1, 1, 2}) {
				t.Fatalf("returned sequences %v, want [1 1 2]", sequences(res.msgs))
			}
		})
	})

	t.Run("ResetCounter_FailsTheWrite_InsteadOfOverwritingAPendingMessage", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.writer(t), e.store(t)
			pending, err := w.Enqueue(t.Context(), newMessage(t, "t", "pending", 1))
			if err != nil {
				t.Fatal(err)
			}
			resetCounter := func() {
				t.Helper()
				if _, err := e.d.Client.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{
					TableName: aws.String(e.opts.TableName),
					Key:       item{"PK": S("OUTBOX#SEQUENCE#1"), "SK": S("SEQUENCE")},
				}); err != nil {
					t.Fatal(err)
				}
			}

			resetCounter()
			business := types.TransactWriteItem{Put: &types.Put{TableName: aws.String(e.opts.TableName), Item: item{"PK": S("ORDER#9"), "SK": S("ORDER")}}}
			p, err := w.Prepare(t.Context(), newMessage(t, "t", "new", 1))
			if err != nil {
				t.Fatal(err)
			}
			msg := p.Messages()[0]
			// The message's Put after the business item: Explain finds it
			// wherever it stands.
			tx := append([]types.TransactWriteItem{business}, p.Items()...)
			_, err = e.d.Client.TransactWriteItems(t.Context(), &dynamodb.TransactWriteItemsInput{TransactItems: tx})
			var taken *SequenceTakenError
			if !errors.As(p.Explain(err), &taken) {
				t.Fatalf("business transaction over a reset counter: %v, want a taken sequence", err)
			}
			if taken.Bucket != 1 || taken.Sequence != 1 || taken.MessageID != msg.ID || taken.HeldBy != pending.ID {
				t.Fatalf("taken %+v", taken)
			}
			if !strings.Contains(taken.Error(), pending.ID.String()) || !strings.Contains(taken.Error(), "bucket 1 sequence 1") {
				t.Fatalf("error %q does not name the bucket, the sequence and the message holding it", taken)
			}

			resetCounter()
			_, err = w.Enqueue(t.Context(), newMessage(t, "t", "again", 1))
			if !errors.As(err, &taken) || taken.HeldBy != pending.ID {
				t.Fatalf("enqueue over a reset counter: %v, want a taken sequence held by %s", err, pending.ID)
			}

			got, err := s.FetchBatch(t.Context(), 1, 10)
			if err != nil || len(got) != 1 || got[0].ID != pending.ID || string(got[0].Key) != "pending" {
				t.Fatalf("pending message overwritten: %v, %v", got, err)
			}
		})
	})

	t.Run("Limits_AreCheckedBeforeAnyRequest", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w := e.writer(t)
			many := make([]outbox.Message, 101)
			for i := range many {
				many[i] = newMessage(t, "t", "k", 0)
			}
			huge := newMessage(t, "t", "k", 0)
			huge.Value = make([]byte, 400*1024)
			bulky := make([]outbox.Message, 100)
			for i := range bulky {
				bulky[i] = newMessage(t, "t", "k", 0)
				bulky[i].Value = make([]byte, 45*1024)
			}
			negative := newMessage(t, "t", "k", 0)
			*negative.Partition = -1
			noTopic := newMessage(t, "t", "k", 0)
			noTopic.Topic = ""

			c := e.counts(func() {
				for name, call := range map[string]func() error{
					"101 messages": func() error { _, err := w.EnqueueBatch(t.Context(), many); return err },
					"400 KB item, enqueue": func() error {
						_, err := w.Enqueue(t.Context(), huge)
						var tooLarge *ItemTooLargeError
						if errors.As(err, &tooLarge) && tooLarge.MessageID == huge.ID && tooLarge.Size > MaxItemSize {
							return err
						}
						return errors.Join(err, errors.New("not an ItemTooLargeError naming the message"))
					},
					"400 KB item, transaction": func() error { _, _, err := prepareItem(t.Context(), w, huge); return err },
					"400 KB item, batch": func() error {
						_, err := w.EnqueueBatch(t.Context(), []outbox.Message{newMessage(t, "t", "k", 0), huge})
						return err
					},
					"4.5 MB transaction": func() error { _, err := w.EnqueueBatch(t.Context(), bulky); return err },
					"negative partition": func() error { _, err := w.Enqueue(t.Context(), negative); return err },
					"negative partition, batch": func() error {
						_, _, err := prepareItems(t.Context(), w, []outbox.Message{newMessage(t, "t", "k", 0), negative})
						return err
					},
					"empty topic": func() error { _, err := w.Enqueue(t.Context(), noTopic); return err },
				} {
					if err := call(); !errors.Is(err, outbox.ErrInvalidMessage) {
						t.Errorf("%s: %v, want an invalid-message error", name, err)
					}
				}
			})
			if n := c.TotalRequests(); n != 0 {
				t.Fatalf("%d requests for rejected messages: %v", n, c.Requests)
			}
		})
	})

	t.Run("ConcurrentWriters_NeverOverwriteEachOther", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.writer(t), e.store(t)
			var wg sync.WaitGroup
			for writer := range 4 {
				wg.Go(func() {
					for i := range 10 {
						m := newMessage(t, "t", "k", 0)
						var err error
						if i%2 == 0 {
							_, err = w.Enqueue(context.Background(), m)
						} else {
							_, err = w.EnqueueBatch(context.Background(), []outbox.Message{m, newMessage(t, "t", "k", 0)})
						}
						if err != nil {
							t.Errorf("writer %d: %v", writer, err)
						}
					}
				})
			}
			wg.Wait()
			got, err := s.FetchBatch(t.Context(), 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]int64, 60)
			for i := range want {
				want[i] = int64(i + 1)
			}
			wantInts(t, "sequences", sequences(got), want)
		})
	})
}

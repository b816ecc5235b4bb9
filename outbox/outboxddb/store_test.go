package outboxddb

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// enqueue stores n messages in bucket with one writer call per message.
func enqueue(t *testing.T, w *Writer, bucket, n int) []outbox.Message {
	t.Helper()
	var out []outbox.Message
	for i := range n {
		m, err := w.Enqueue(t.Context(), newMessage(t, "t", strings.Repeat("k", i+1), bucket))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// enqueueBatch stores n messages of one key in bucket with one EnqueueBatch
// call per chunk of size (the whole batch when size is 0).
func enqueueBatch(t *testing.T, w *Writer, bucket, n, size int) {
	t.Helper()
	batch := make([]outbox.Message, n)
	for i := range batch {
		batch[i] = newMessage(t, "t", "k", bucket)
	}
	for chunk := range slices.Chunk(batch, cmp.Or(size, n)) {
		if _, err := w.EnqueueBatch(t.Context(), chunk); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStore(t *testing.T) {
	// Rows without the reservation stamp (a writer of another language)
	// are settled by probes: the next four tests.
	t.Run("Fetch_ReadsAgain_WhenAMessageCommittedIntoAGapBehindTheQuery", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.unstampedWriter(t), e.store(t)
			msgs := enqueue(t, w, 2, 3)
			// The read-committed anomaly: the query returns 1 and 3 but not 2.
			e.d.Faults.HideFromNextQuery("OUTBOX#MESSAGES#2", "0000000000000000002")
			var got []outbox.Message
			c := e.counts(func() {
				var err error
				if got, err = s.FetchBatch(t.Context(), 2, 10); err != nil {
					t.Fatal(err)
				}
			})
			wantInts(t, "sequences", sequences(got), []int64{1, 2, 3})
			if got[1].ID != msgs[1].ID {
				t.Fatalf("refetched %v, want the hidden message %v", got[1].ID, msgs[1].ID)
			}
			// Fetch, the probe of [2, 2] that finds it, and one refetch.
			wantRequests(t, c, map[string]int{"Query": 3})
		})
	})

	// The fleet simulation found this: the second read of a fetch was returned
	// unprobed, so a transaction committing during it could put its second
	// message on Kafka before its first.
	t.Run("Fetch_ProbesTheSecondReadToo_WhenAnotherTransactionCommitsDuringIt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w := e.unstampedWriter(t)
			enqueue(t, w, 2, 3)
			hook := &commitDuringProbe{Client: e.client}
			e.client = hook
			s := e.store(t)
			// First read: 1 and 3 without 2. While 2 is probed, a transaction
			// stores 4 and 5, and the second read returns 5 without 4.
			e.d.Faults.HideFromNextQuery("OUTBOX#MESSAGES#2", "0000000000000000002")
			hook.commit = func() {
				if _, err := w.EnqueueBatch(t.Context(), []outbox.Message{newMessage(t, "t", "k4", 2), newMessage(t, "t", "k5", 2)}); err != nil {
					t.Error(err)
				}
				e.d.Faults.HideFromNextQuery("OUTBOX#MESSAGES#2", "0000000000000000004")
			}
			var got []outbox.Message
			c := e.counts(func() {
				var err error
				if got, err = s.FetchBatch(t.Context(), 2, 10); err != nil {
					t.Fatal(err)
				}
			})
			wantInts(t, "sequences", sequences(got), []int64{1, 2, 3, 4, 5})
			// Fetch, probe [2, 2], second read, probe [4, 4], third read; the
			// transaction's counter update and transaction write.
			wantRequests(t, c, map[string]int{"Query": 5, "UpdateItem": 1, "TransactWriteItems": 1})
		})
	})

	t.Run("Fetch_BoundsItsProbes_AndEndsTheBatchAtTheFirstGapItCouldNotProbe", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.unstampedWriter(t), e.store(t)
			enqueueBatch(t, w, 1, 80, 0)
			// Keep the 40 odd sequence numbers: 39 gaps.
			for seq := int64(2); seq <= 80; seq += 2 {
				if _, err := e.d.Client.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{
					TableName: aws.String(e.opts.TableName),
					Key:       item{"PK": S("OUTBOX#MESSAGES#1"), "SK": S(sequenceSortKeyOf(seq))},
				}); err != nil {
					t.Fatal(err)
				}
			}
			var got []outbox.Message
			c := e.counts(func() {
				var err error
				if got, err = s.FetchBatch(t.Context(), 1, 100); !errors.Is(err, outbox.ErrBatchCut) {
					t.Fatalf("fetch: %v, want outbox.ErrBatchCut: rows lie past the cut", err)
				}
			})
			// One fetch and exactly 8 probes, of the gaps below 3 to 17: the
			// gap below 19 is not probed, so 19 does not go.
			wantInts(t, "sequences", sequences(got), []int64{1, 3, 5, 7, 9, 11, 13, 15, 17})
			wantRequests(t, c, map[string]int{"Query": 9})
		})
	})

	t.Run("Fetch_ReadsAReservationWithHolesAsOneSnapshot_AndGoesAcrossThem", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.writer(t), e.store(t)
			enqueueBatch(t, w, 1, 80, 0)
			// One transaction's 80 rows, the even ones gone (parked, or
			// published and deleted by an earlier owner).
			for seq := int64(2); seq <= 80; seq += 2 {
				if _, err := e.d.Client.DeleteItem(t.Context(), &dynamodb.DeleteItemInput{
					TableName: aws.String(e.opts.TableName),
					Key:       item{"PK": S("OUTBOX#MESSAGES#1"), "SK": S(sequenceSortKeyOf(seq))},
				}); err != nil {
					t.Fatal(err)
				}
			}
			var got []outbox.Message
			c := e.counts(func() {
				var err error
				if got, err = s.FetchBatch(t.Context(), 1, 100); err != nil {
					t.Fatal(err)
				}
			})
			if len(got) != 40 || got[0].Sequence() != 1 || got[39].Sequence() != 79 {
				t.Fatalf("fetched %d messages %v", len(got), sequences(got))
			}
			// The fetch, and one snapshot of the 39 missing numbers.
			wantRequests(t, c, map[string]int{"Query": 1, "TransactGetItems": 1})
		})
	})

	t.Run("Fetch_ProbesBelowAnUnstampedHead_EveryTime_AndNeverBelowAStampedOne", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			for _, c := range []struct {
				bucket int
				w      *Writer
				probes int
			}{{3, e.writer(t), 0}, {4, e.unstampedWriter(t), 1}} {
				owner := e.store(t)
				msgs := enqueue(t, c.w, c.bucket, 8)
				if err := owner.MarkPublished(t.Context(), c.bucket, msgs[:5]); err != nil {
					t.Fatal(err)
				}
				// The store that deleted 1..5, and one that took the
				// bucket over, fetch alike: a number below the head can
				// still be a slow transaction's. Unstamped rows have it
				// probed ([1, 5]), each time; stamped rows say what
				// their transaction wrote.
				for _, s := range []*Store{owner, e.store(t), owner} {
					counts := e.counts(func() {
						got, err := s.FetchBatch(t.Context(), c.bucket, 10)
						if err != nil {
							t.Fatal(err)
						}
						wantInts(t, "batch", sequences(got), []int64{6, 7, 8})
					})
					wantRequests(t, counts, map[string]int{"Query": 1 + c.probes})
				}
			}
		})
	})

	t.Run("Fetch_ProbesTheRunsAnEarlierPageScanned_ForRowsOfALaterPage", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.writer(t), e.store(t)
			// 300 KB rows: a page ends with the fourth. 2 is abandoned.
			for seq := 1; seq <= 6; seq++ {
				m := newMessage(t, "t", "k", 0)
				m.Value = make([]byte, 300*1024)
				if seq == 2 {
					if _, err := w.Prepare(t.Context(), m); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if _, err := w.Enqueue(t.Context(), m); err != nil {
					t.Fatal(err)
				}
			}
			var got []outbox.Message
			c := e.counts(func() {
				var err error
				if got, err = s.FetchBatch(t.Context(), 0, 10); err != nil {
					t.Fatal(err)
				}
			})
			wantInts(t, "sequences", sequences(got), []int64{1, 3, 4, 5, 6})
			// Two pages, and a probe of [2, 2] for 6: the first page
			// scanned 2, and a transaction writing 2 could complete before
			// the second page read 6.
			wantRequests(t, c, map[string]int{"Query": 3})
		})
	})

	t.Run("Fetch_HonoursMaxCount_AndReadsPastTheOneMegabytePage", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.writer(t), e.store(t)
			for range 6 {
				m := newMessage(t, "t", "k", 0)
				m.Value = make([]byte, 300*1024)
				if _, err := w.Enqueue(t.Context(), m); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.FetchBatch(t.Context(), 0, 5)
			if err != nil {
				t.Fatal(err)
			}
			wantInts(t, "sequences", sequences(got), []int64{1, 2, 3, 4, 5})
			if got, err := s.FetchBatch(t.Context(), 0, 0); err == nil {
				t.Fatalf("max 0 fetched %v", got)
			}
			if got, err := s.FetchBatch(t.Context(), -1, 5); err == nil {
				t.Fatalf("bucket -1 fetched %v", got)
			}
		})
	})

	t.Run("Fetch_MessageFromAWriterWithAnotherBucketCount_IsAMisconfiguration", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Only a table without a layout record lets such a writer write.
			e := newEnv(t)
			e.withoutLayout(t)
			s := e.store(t)
			w := e.writer(t, func(o *WriterOptions) { o.BucketCount = 16 })
			enqueue(t, w, 3, 1)
			_, err := s.FetchBatch(t.Context(), 3, 10)
			if !errors.Is(err, outbox.ErrMisconfigured) || !strings.Contains(err.Error(), "16") || !strings.Contains(err.Error(), "bucket 3") {
				t.Fatalf("fetch = %v, want a misconfiguration naming bucket 3 and both counts", err)
			}
		})
	})

	t.Run("Fetch_MalformedItem_IsAnInvalidItemError", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			s := e.store(t)
			if _, err := e.d.Client.PutItem(t.Context(), &dynamodb.PutItemInput{
				TableName: aws.String(e.opts.TableName),
				Item:      item{"PK": S("OUTBOX#MESSAGES#4"), "SK": S("0000000000000000001"), "Topic": S("t"), "CreatedAtUtc": N("1")},
			}); err != nil {
				t.Fatal(err)
			}
			_, err := s.FetchBatch(t.Context(), 4, 10)
			if !errors.Is(err, outbox.ErrInvalidItem) || !strings.Contains(err.Error(), "OUTBOX#MESSAGES#4") {
				t.Fatalf("fetch = %v, want an invalid item naming its key", err)
			}
		})
	})

	// Rows put by hand or by another writer may hold any GUID syntax .NET's
	// Guid.Parse reads; each is fetched with its id and deleted once published,
	// so the bucket moves on.
	t.Run("Fetch_StopsAtAnUnreadableRow_AndReturnsTheValidPrefix", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.writer(t), e.store(t)
			enqueue(t, w, 2, 3)
			// A row put by hand without a topic, after three good ones, then more.
			if _, err := e.d.Client.PutItem(t.Context(), &dynamodb.PutItemInput{
				TableName: aws.String(e.opts.TableName),
				Item:      item{"PK": S("OUTBOX#MESSAGES#2"), "SK": S("0000000000000000004"), "MessageId": S("5c3e9f10-7b2a-4d6e-8f41-a2b3c4d5e6f7"), "CreatedAtUtc": N("1")},
			}); err != nil {
				t.Fatal(err)
			}
			got, err := s.FetchBatch(t.Context(), 2, 10)
			var row *outbox.UnreadableRowError
			if !errors.As(err, &row) || row.Sequence != 4 || row.Bucket != 2 || !errors.Is(err, outbox.ErrInvalidItem) {
				t.Fatalf("fetch error %v, want an unreadable row 4 of bucket 2", err)
			}
			wantInts(t, "prefix", sequences(got), []int64{1, 2, 3})
		})
	})

	t.Run("Fetch_HandMadeRowsWithOtherGUIDSyntaxes_AreReadAndDeleted", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			s := e.store(t)
			ids := []string{
				" d9b2d63d-a233-4123-847a-76838bf2413a\n",
				"{0xd9b2d63d,0xa233,0x4123,{0x84,0x7a,0x76,0x83,0x8b,0xf2,0x41,0x3a}}",
				"{ 0xd9b2d63d, 0xa233, 0x4123, { 0x84, 0x7a, 0x76, 0x83, 0x8b, 0xf2, 0x41, 0x3a } }",
				"(D9B2D63D-A233-4123-847A-76838BF2413A)",
				"d9b2d63da2334123847a76838bf2413a",
			}
			for i, id := range ids {
				if _, err := e.d.Client.PutItem(t.Context(), &dynamodb.PutItemInput{
					TableName: aws.String(e.opts.TableName),
					Item: item{"PK": S("OUTBOX#MESSAGES#4"), "SK": S(fmt.Sprintf("%019d", i+1)),
						"MessageId": S(id), "Topic": S("t"), "CreatedAtUtc": N("1")},
				}); err != nil {
					t.Fatal(err)
				}
			}
			msgs, err := s.FetchBatch(t.Context(), 4, 10)
			if err != nil || len(msgs) != len(ids) {
				t.Fatalf("fetch = %d messages, %v; want %d", len(msgs), err, len(ids))
			}
			for _, m := range msgs {
				if m.ID.String() != "d9b2d63d-a233-4123-847a-76838bf2413a" {
					t.Errorf("sequence %d read as id %s", m.Sequence(), m.ID)
				}
			}
			if err := s.MarkPublished(t.Context(), 4, msgs); err != nil {
				t.Fatal(err)
			}
			if left, err := s.FetchBatch(t.Context(), 4, 10); err != nil || len(left) != 0 {
				t.Fatalf("after publishing: %d messages left, %v", len(left), err)
			}
		})
	})

	t.Run("PendingBuckets_ReportOnlyBucketsWithMessages_InAscendingOrder", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.writer(t), e.store(t)
			enqueue(t, w, 6, 2)
			enqueue(t, w, 1, 1)
			got, err := s.PendingBuckets(t.Context(), []int{7, 6, 5, 4, 3, 2, 1, 0})
			if err != nil {
				t.Fatal(err)
			}
			wantInts(t, "pending", got, []int{1, 6})
		})
	})

	t.Run("MarkPublished_DeletesThePrefix_AcrossChunks", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.writer(t), e.store(t)
			enqueueBatch(t, w, 5, 70, 35)
			fetched, err := s.FetchBatch(t.Context(), 5, 100)
			if err != nil || len(fetched) != 70 {
				t.Fatalf("fetched %d, %v", len(fetched), err)
			}
			c := e.counts(func() {
				if err := s.MarkPublished(t.Context(), 5, fetched[:60]); err != nil {
					t.Fatal(err)
				}
			})
			wantRequests(t, c, map[string]int{"BatchWriteItem": 3}) // 25 + 25 + 10
			rest, err := s.FetchBatch(t.Context(), 5, 100)
			if err != nil || len(rest) != 10 || rest[0].Sequence() != 61 {
				t.Fatalf("left %v, %v; want 61..70", sequences(rest), err)
			}
		})
	})

	t.Run("MarkPublished_RetriesOnlyWhatDynamoDBLeftUnprocessed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			bw := &batchWrites{Client: e.client}
			w := e.writer(t)
			s, err := NewStore(bw, StoreOptions{Options: e.opts})
			if err != nil {
				t.Fatal(err)
			}
			enqueueBatch(t, w, 0, 30, 0)
			fetched, err := s.FetchBatch(t.Context(), 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			e.d.Faults.UnprocessedDeletes(2)
			c := e.counts(func() {
				if err := s.MarkPublished(t.Context(), 0, fetched); err != nil {
					t.Fatal(err)
				}
			})
			wantRequests(t, c, map[string]int{"BatchWriteItem": 3}) // 25 (2 left), the 2, then 5
			var waits []time.Duration
			for _, g := range bw.waits() {
				if g > 0 {
					waits = append(waits, g)
				}
			}
			if len(waits) != 1 || waits[0] < 25*time.Millisecond || waits[0] > 50*time.Millisecond {
				t.Fatalf("waited %v between the requests %v, want one wait in [25ms, 50ms]", waits, bw.waits())
			}
			if rest, err := s.FetchBatch(t.Context(), 0, 100); err != nil || len(rest) != 0 {
				t.Fatalf("left %v, %v", sequences(rest), err)
			}
		})
	})

	t.Run("MarkPublished_Fails_WhenThrottlingOutlastsItsRetries_AndTheMessagesStay", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			// Every attempt of the retry loop meets the fault.
			bw := &batchWrites{Client: e.client, before: func() { e.d.Faults.UnprocessedDeletes(3) }}
			w := e.writer(t)
			s, err := NewStore(bw, StoreOptions{Options: e.opts})
			if err != nil {
				t.Fatal(err)
			}
			enqueueBatch(t, w, 0, 3, 0)
			fetched, err := s.FetchBatch(t.Context(), 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			c := e.counts(func() { err = s.MarkPublished(t.Context(), 0, fetched) })
			var undeleted *UndeletedError
			if !errors.As(err, &undeleted) || undeleted.Count != 3 || undeleted.Attempts != 8 {
				t.Fatalf("mark = %v, want 3 messages undeleted after 8 attempts", err)
			}
			if err.Error() != "DynamoDB left 3 published outbox message(s) undeleted after 8 attempts. The table is throttling writes." {
				t.Fatalf("error text %q", err)
			}
			wantRequests(t, c, map[string]int{"BatchWriteItem": 8})
			waits := bw.waits()
			bounds := [][2]time.Duration{{25, 50}, {50, 100}, {100, 200}, {200, 400}, {400, 800}, {500, 1000}, {500, 1000}}
			if len(waits) != len(bounds) {
				t.Fatalf("waits %v, want %d", waits, len(bounds))
			}
			for i, b := range bounds {
				if waits[i] < b[0]*time.Millisecond || waits[i] > b[1]*time.Millisecond || waits[i]%time.Millisecond != 0 {
					t.Fatalf("wait %d = %v, want whole milliseconds in [%dms, %dms]", i+1, waits[i], b[0], b[1])
				}
			}
			e.d.Faults.Clear()
			if rest, err := s.FetchBatch(t.Context(), 0, 100); err != nil || len(rest) != 3 {
				t.Fatalf("left %v, %v; the messages must stay", sequences(rest), err)
			}
		})
	})

	t.Run("Backlog_CountsUpToTheLimit_AndReportsTheOldestHead", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.writer(t), e.store(t, func(o *StoreOptions) { o.PendingCountLimit = 10 })
			if got, err := s.Backlog(t.Context()); err != nil || got.Pending != 0 || !got.Oldest.IsZero() {
				t.Fatalf("empty backlog = %+v, %v", got, err)
			}
			old := make([]outbox.Message, 25)
			for i := range old {
				old[i] = newMessage(t, "t", "k", 2)
				old[i].CreatedAt = t0.Add(-time.Hour)
			}
			if _, err := w.EnqueueBatch(t.Context(), old); err != nil {
				t.Fatal(err)
			}
			enqueue(t, w, 7, 4)
			got, err := s.Backlog(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if got.Pending != 14 || !got.Oldest.Equal(t0.Add(-time.Hour)) {
				t.Fatalf("backlog %+v, want 14 pending (10 + 4), oldest %v", got, t0.Add(-time.Hour))
			}
			per, err := s.SampleBuckets(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(per) != 8 || per[2].Pending != 10 || !per[2].Oldest.Equal(t0.Add(-time.Hour)) || per[7].Pending != 4 || per[0].Pending != 0 || !per[0].Oldest.IsZero() {
				t.Fatalf("per-bucket samples %+v", per)
			}
		})
	})

	t.Run("TwoOutboxes_ShareATableWithCustomKeyNames_WithoutSeeingEachOther", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t, func(o *Options) { o.PartitionKey, o.SortKey, o.KeyPrefix = "pk", "sk", "ORDERS" })
			orders, billing := e.store(t), e.store(t, func(o *StoreOptions) { o.KeyPrefix = "BILLING" })
			enqueue(t, e.writer(t), 3, 2)
			enqueue(t, e.writer(t, func(o *WriterOptions) { o.KeyPrefix = "BILLING" }), 3, 1)

			for name, c := range map[string]struct {
				s    *Store
				want int
			}{"orders": {orders, 2}, "billing": {billing, 1}} {
				got, err := c.s.FetchBatch(t.Context(), 3, 10)
				if err != nil || len(got) != c.want {
					t.Fatalf("%s fetched %d, %v; want %d", name, len(got), err, c.want)
				}
				b, err := c.s.Backlog(t.Context())
				if err != nil || b.Pending != int64(c.want) {
					t.Fatalf("%s backlog %+v, %v", name, b, err)
				}
				pending, err := c.s.PendingBuckets(t.Context(), []int{3})
				if err != nil || !slices.Equal(pending, []int{3}) {
					t.Fatalf("%s pending %v, %v", name, pending, err)
				}
			}
			req := lease.Request{RelayID: "relay-a", BucketCount: 8, LeaseDuration: fleetLease}
			for name, s := range map[string]*Store{"orders": orders, "billing": billing} {
				acq, err := s.acquire(t.Context(), req, lease.RoundState{})
				if err != nil || len(acq.Owned) != 8 || acq.Refused != 0 {
					t.Fatalf("%s acquisition %+v, %v: each outbox has its own leases", name, acq, err)
				}
			}
			view, err := orders.ReadCoordination(t.Context())
			if err != nil || len(view.Leases) != 8 || len(view.Relays) != 1 {
				t.Fatalf("orders coordination %+v, %v", view, err)
			}
		})
	})

	t.Run("Acquisition_ARelayOfAnotherBucketCount_IsAMisconfiguration_WithoutARequest", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			s := e.store(t)
			c := e.counts(func() {
				_, err := outbox.NewRelay(outbox.RelayConfig{Store: s, Publisher: &countingPublisher{},
					Options: outbox.RelayOptions{RelayID: "relay-a", BucketCount: 16, LeaseDuration: fleetLease}})
				if !errors.Is(err, outbox.ErrMisconfigured) || !strings.Contains(err.Error(), "16") {
					t.Fatalf("new relay = %v", err)
				}
			})
			if c.TotalRequests() != 0 {
				t.Fatalf("requests %v", c.Requests)
			}
		})
	})

	t.Run("Acquisition_ShrunkBucketCount_IgnoresLeaseItemsBeyondTheRange", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFleet(t, 8)
			f.round("relay-a")
			// A table created before the layout record is drained and its
			// count lowered to 4 in place: a relay of the new count plans over
			// buckets 0-3 only and writes no lease beyond them. (With a record,
			// the relay is refused: TestLayout.)
			f.e.withoutLayout(t)
			small, err := NewStore(f.e.client, StoreOptions{Options: func() Options { o := f.e.opts; o.BucketCount = 4; return o }()})
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(fleetRenew)
			var acq lease.Acquisition
			c := f.e.counts(func() {
				acq, err = small.acquire(t.Context(), lease.Request{RelayID: "relay-a", BucketCount: 4, LeaseDuration: fleetLease}, lease.RoundState{})
				if err != nil {
					t.Fatal(err)
				}
			})
			wantInts(t, "owned", acq.Owned, []int{0, 1, 2, 3})
			wantRequests(t, c, map[string]int{"PutItem": 1, "Query": 1, "UpdateItem": 4})
			if c.Refused != 0 {
				t.Fatalf("%d refusals", c.Refused)
			}
			view, err := small.ReadCoordination(t.Context())
			if err != nil || len(view.Leases) != 4 {
				t.Fatalf("coordination view %+v, %v: leases beyond the count must not appear", view, err)
			}
		})
	})

	t.Run("Renewal_NeverRevivesAnExpiredLease_ButAcquisitionRetakesAnUnclaimedOne", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFleet(t, 2)
			f.round("relay-a")
			time.Sleep(fleetLease) // the leases lapse; nobody takes them
			s := f.relay("relay-a")
			var ok bool
			c := f.e.counts(func() {
				var err error
				if ok, err = s.renew(t.Context(), f.request("relay-a"), []int{0, 1}); err != nil {
					t.Fatal(err)
				}
			})
			if ok || c.Refused != 2 {
				t.Fatalf("renewal of lapsed leases = %v with %d refusals", ok, c.Refused)
			}
			acqs, refused := f.acquire("relay-a")
			f.check("acquisition retakes", acqs, refused, 0, map[string][]int{"relay-a": {0, 1}})
			if acq := acqs["relay-a"]; len(acq.Claimed) != 0 {
				t.Fatalf("retaken by claim %v; the keep (owner condition, no clock check) retakes them", acq.Claimed)
			}
			// Outside the range: refused without a request.
			c = f.e.counts(func() {
				if ok, err := s.renew(t.Context(), f.request("relay-a"), []int{1, 2}); ok || err != nil {
					t.Fatalf("renewal outside the range = %v, %v", ok, err)
				}
				if ok, err := s.renew(t.Context(), f.request("relay-a"), nil); !ok || err != nil {
					t.Fatalf("renewal of nothing = %v, %v", ok, err)
				}
			})
			if c.TotalRequests() != 0 {
				t.Fatalf("requests %v", c.Requests)
			}
		})
	})

	t.Run("Release_IsNotUndoneByTheHeartbeatOfTheRoundTheStopCancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFleet(t, 2)
			f.round("relay-a", "relay-b")
			f.round("relay-a", "relay-b")
			// relay-b's host stops while a heartbeat of its last round is in flight:
			// the heartbeat lands after the stopped stamp, written 20 µs after it was
			// sent (the embedded server compares numbers as float64, exact only to
			// 12.8 µs at these tick values; the 1-tick margin of the stamp is pinned
			// by TestRequestShapes/Release_StampsStoppedThenReadsLeasesByPrefix).
			stale := f.relay("relay-b")
			cancelledRound := f.e.clock.Now()
			time.Sleep(20 * time.Microsecond)
			if _, err := stale.ReleaseLeases(t.Context(), "relay-b"); err != nil {
				t.Fatal(err)
			}
			ok, err := stale.heartbeat(t.Context(), "relay-b", lease.Ticks(cancelledRound), true)
			if err != nil || ok {
				t.Fatalf("late heartbeat accepted = %v, %v; the stopped stamp must refuse it", ok, err)
			}
			acqs, refused := f.round("relay-a")
			f.check("relay-a takes over", acqs, refused, 0, map[string][]int{"relay-a": {0, 1}})
		})
	})

	t.Run("Prune_RemovesStoppedRecordsAfterOneLease_AndDeadOnesAfterTen", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFleet(t, 2)
			f.round("relay-a", "relay-b", "relay-c")
			if _, err := f.relay("relay-c").ReleaseLeases(t.Context(), "relay-c"); err != nil {
				t.Fatal(err)
			}
			relays := func() []string {
				view, err := f.e.store(t).ReadCoordination(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, r := range view.Relays {
					ids = append(ids, r.RelayID)
				}
				return ids
			}
			// relay-b dies. relay-a's rounds 2-9 never prune; its round 10 (at
			// 90 s) removes relay-c's stopped record, stale since 30 s.
			for range 8 {
				f.round("relay-a")
			}
			if got := relays(); !slices.Equal(got, []string{"relay-a", "relay-b", "relay-c"}) {
				t.Fatalf("relays before round 10: %v", got)
			}
			var c = f.e.counts(func() { f.round("relay-a") })
			if c.Requests["DeleteItem"] != 1 || c.Refused != 0 {
				t.Fatalf("round 10: %v, %d refusals", c.Requests, c.Refused)
			}
			if got := relays(); !slices.Equal(got, []string{"relay-a", "relay-b"}) {
				t.Fatalf("relays after round 10: %v", got)
			}
			// The next run of the same (warm) store prunes on its first round:
			// relay-b, dead for more than ten leases, goes too.
			time.Sleep(10 * fleetLease)
			f.newRun("relay-a")
			c = f.e.counts(func() { f.round("relay-a") })
			if c.Requests["DeleteItem"] != 1 || c.Refused != 0 {
				t.Fatalf("first round of a warm store's new run: %v, %d refusals", c.Requests, c.Refused)
			}
			if got := relays(); !slices.Equal(got, []string{"relay-a"}) {
				t.Fatalf("relays after pruning: %v", got)
			}
		})
	})

	// Acquisition_HeartbeatRecordWithAnEmptyRelayID_IsSkipped_AndPrunedOnceStale:
	// a record with the sort key exactly RELAY# names no relay. Rounds go on
	// (it is skipped with a warning and counted) and the prune removes it once
	// it is stale.
	t.Run("Acquisition_HeartbeatRecordWithAnEmptyRelayID_IsSkipped_AndPrunedOnceStale", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFleet(t, 2)
			_, err := f.e.client.PutItem(t.Context(), &dynamodb.PutItemInput{
				TableName: aws.String(f.e.opts.TableName),
				Item: map[string]types.AttributeValue{
					"PK": S("OUTBOX#COORDINATION"), "SK": S("RELAY#"),
					"LastSeenUtc": N(itoa(lease.Ticks(f.e.clock.Now()))),
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			acqs, refused := f.acquire("relay-a")
			f.check("the empty id is no relay", acqs, refused, 0, map[string][]int{"relay-a": {0, 1}})
			if acqs["relay-a"].IgnoredRelays != 1 {
				t.Fatalf("acquisition %+v, want the empty id counted", acqs["relay-a"])
			}
			// Eleven lease durations later it is dead: the next run's first round
			// prunes it.
			time.Sleep(11 * fleetLease)
			f.newRun("relay-a")
			c := f.e.counts(func() { acqs, refused = f.acquire("relay-a") })
			if c.Requests["DeleteItem"] != 1 || refused != 0 {
				t.Fatalf("first round after it went stale: %v, %d refusals", c.Requests, refused)
			}
			view, err := f.relay("relay-a").ReadCoordination(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(view.Relays) != 1 || view.Relays[0].RelayID != "relay-a" {
				t.Fatalf("heartbeat records after the prune: %+v", view.Relays)
			}
		})
	})
}

// commitDuringProbe is a client that runs commit once, when the first gap
// probe (a COUNT query) is sent: a transaction that commits while the store
// is between its first and its second read.
type commitDuringProbe struct {
	Client
	commit func()
}

func (c *commitDuringProbe) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if in.Select == types.SelectCount && c.commit != nil {
		commit := c.commit
		c.commit = nil
		commit()
	}
	return c.Client.Query(ctx, in, optFns...)
}

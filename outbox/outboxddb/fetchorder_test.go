package outboxddb

import (
	"context"
	"errors"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// TestFetchOrder holds the reviewers' scenarios of issue 44: a query that
// overlaps a transaction's commit shows its second message of a key
// without its first, and the fetch must not hand the second out first,
// whatever the gaps before it, wherever the store's last delete was, and
// after a handover.
func TestFetchOrder(t *testing.T) {
	// oldGaps fills bucket 1 with rows 1..17 of their own keys, the even
	// numbers and 18 reserved and abandoned (8 old gaps below 17, one more
	// at 18), then commits key k's messages 19 and 20 in one transaction.
	oldGaps := func(t *testing.T, w *Writer, from int64) {
		t.Helper()
		for seq := int64(1); seq <= 18; seq++ {
			m := newMessage(t, "t", "old", 1)
			if seq%2 == 0 || seq < from || seq == 18 {
				if _, err := w.Prepare(t.Context(), m); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if _, err := w.Enqueue(t.Context(), m); err != nil {
				t.Fatal(err)
			}
		}
		msgs, err := w.EnqueueBatch(t.Context(), []outbox.Message{newMessage(t, "t", "k", 1), newMessage(t, "t", "k", 1)})
		if err != nil || msgs[0].Sequence() != 19 {
			t.Fatalf("k's transaction: %v, %v", msgs, err)
		}
	}
	// noOvertaking fails when batch holds k's second message (20) without
	// its first (19) before it.
	noOvertaking := func(t *testing.T, batch []outbox.Message) {
		t.Helper()
		seqs := sequences(batch)
		for i, seq := range seqs {
			if seq == 20 && (i == 0 || seqs[i-1] != 19) {
				t.Fatalf("batch %v hands out k's second message (20) without its first (19) before it", seqs)
			}
		}
	}

	for _, c := range []struct {
		name     string
		unstamp  bool
		from     int64 // the first row; below it, abandoned reservations
		want     []int64
		requests map[string]int
	}{
		// The transaction's stamp: 20 needs 19, which the query did not
		// show; no probe is sent.
		{"ProbeBound_EightOldGapsThenATransactionsHiddenFirstMessage", false, 1,
			[]int64{1, 3, 5, 7, 9, 11, 13, 15, 17}, map[string]int{"Query": 1}},
		// Rows without the stamp: the 8 probes go to the old gaps, and the
		// ninth gap, [18, 19], is not accepted unprobed.
		{"ProbeBound_UnstampedRows", true, 1,
			[]int64{1, 3, 5, 7, 9, 11, 13, 15, 17}, map[string]int{"Query": 9}},
		// After a start or a handover everything below the head is one
		// more gap ([1, 2]) for the same 8 probes.
		{"ProbeBound_AfterAHandover", false, 3,
			[]int64{3, 5, 7, 9, 11, 13, 15, 17}, map[string]int{"Query": 1}},
		{"ProbeBound_AfterAHandover_UnstampedRows", true, 3,
			[]int64{3, 5, 7, 9, 11, 13, 15, 17}, map[string]int{"Query": 9}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				w := e.writer(t)
				if c.unstamp {
					w = e.unstampedWriter(t)
				}
				oldGaps(t, w, c.from)
				// The query overlaps the commit of 19 and 20 and shows 20
				// alone.
				e.d.Faults.HideFromNextQuery("OUTBOX#MESSAGES#1", sequenceSortKeyOf(19))
				s := e.store(t)
				var got []outbox.Message
				counts := e.counts(func() {
					var err error
					// Cut before 20, which the batch read: the relay
					// fetches again at once.
					if got, err = s.FetchBatch(t.Context(), 1, 100); !errors.Is(err, outbox.ErrBatchCut) {
						t.Fatalf("fetch: %v, want outbox.ErrBatchCut", err)
					}
				})
				noOvertaking(t, got)
				wantInts(t, "batch", sequences(got), c.want)
				wantRequests(t, counts, c.requests)
				if err := s.MarkPublished(t.Context(), 1, got); err != nil {
					t.Fatal(err)
				}
				// Once the commit is read whole, 19 and 20 go, in order.
				got, err := s.FetchBatch(t.Context(), 1, 100)
				if err != nil {
					t.Fatal(err)
				}
				noOvertaking(t, got)
				if seqs := sequences(got); len(seqs) < 2 || seqs[len(seqs)-2] != 19 || seqs[len(seqs)-1] != 20 {
					t.Fatalf("next batch %v, want it to end with 19 and 20", seqs)
				}
			})
		})
	}

	// slow reserves k's messages 1 and 2 and sends them late: a faster
	// writer's 3 is fetched, published and deleted meanwhile.
	slow := func(t *testing.T, e *env, w *Writer, s *Store) *Prepared {
		t.Helper()
		p, err := w.Prepare(t.Context(), newMessage(t, "t", "k", 1), newMessage(t, "t", "k", 1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Enqueue(t.Context(), newMessage(t, "t", "fast", 1)); err != nil {
			t.Fatal(err)
		}
		got, err := s.FetchBatch(t.Context(), 1, 10)
		if err != nil {
			t.Fatal(err)
		}
		wantInts(t, "the fast writer's batch", sequences(got), []int64{3})
		if err := s.MarkPublished(t.Context(), 1, got); err != nil {
			t.Fatal(err)
		}
		return p
	}
	send := func(t *testing.T, w *Writer, p *Prepared) {
		t.Helper()
		if _, err := w.client.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: p.Items()}); err != nil {
			t.Error(err)
		}
	}
	for _, c := range []struct {
		name     string
		unstamp  bool
		requests map[string]int
	}{
		// The stamp says 2's transaction wrote 1: one snapshot finds it,
		// and the fetch reads again.
		{"DeleteBaseline_ASlowTransactionLandingBelowTheLastDeleted", false, map[string]int{"Query": 2, "TransactGetItems": 1}},
		// Without the stamp, numbers below the last delete are probed
		// all the same: [1, 1] finds 1.
		{"DeleteBaseline_UnstampedRows", true, map[string]int{"Query": 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				w := e.writer(t)
				if c.unstamp {
					w = e.unstampedWriter(t)
				}
				s := e.store(t)
				p := slow(t, e, w, s)
				send(t, w, p)
				// The next query overlaps the commit and shows 2 alone.
				e.d.Faults.HideFromNextQuery("OUTBOX#MESSAGES#1", sequenceSortKeyOf(1))
				var got []outbox.Message
				counts := e.counts(func() {
					var err error
					if got, err = s.FetchBatch(t.Context(), 1, 10); err != nil {
						t.Fatal(err)
					}
				})
				wantInts(t, "batch", sequences(got), []int64{1, 2})
				wantRequests(t, counts, c.requests)
			})
		})
	}

	// The commit itself, on the embedded server's read-committed model:
	// 2 becomes visible 10 ms into it, 1 at 20 ms. A store that took the
	// bucket over fetches at 15 ms, when a probe of [1, 1] finds nothing
	// either.
	t.Run("DeleteBaseline_AfterAHandover_WhileTheCommitHidesTheRowFromCountsToo", func(t *testing.T) {
		if os.Getenv(outboxconf.EnvDynamoDBEndpoint) != "" {
			t.Skip("the read-committed model is the embedded server's")
		}
		synctest.Test(t, func(t *testing.T) {
			e := newEnvWith(t, []outboxlocal.DynamoOption{outboxlocal.WithReadCommitted(outboxlocal.ReadCommitted{
				Schedule: func(n int) []time.Duration { return []time.Duration{20 * time.Millisecond, 10 * time.Millisecond}[:n] },
			})})
			w := e.writer(t)
			p := slow(t, e, w, e.store(t))
			done := make(chan struct{})
			go func() { defer close(done); send(t, w, p) }()
			time.Sleep(15 * time.Millisecond)
			successor := e.store(t)
			got, err := successor.FetchBatch(t.Context(), 1, 10)
			if err != nil {
				t.Fatal(err)
			}
			// The snapshot of 1 is refused while the commit runs: nothing
			// goes yet.
			wantInts(t, "batch during the commit", sequences(got), nil)
			if rc := e.d.ReadCommittedCounts(); rc.PartialReads != 1 || rc.Conflicts != 1 {
				t.Fatalf("read-committed counts %+v, want the fetch's partial read and the snapshot's conflict", rc)
			}
			<-done
			got, err = successor.FetchBatch(t.Context(), 1, 10)
			if err != nil {
				t.Fatal(err)
			}
			wantInts(t, "batch after the commit", sequences(got), []int64{1, 2})
		})
	})
}

package outboxddb

import (
	"errors"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

func TestBeyond(t *testing.T) {
	// A table created before the layout record, where a writer with 16
	// buckets wrote beside writers of 8: its messages in buckets 8-15 wait
	// where no relay of 8 looks.
	t.Run("Stranded_CountsTheMessagesBeyondTheCount", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			e.withoutLayout(t)
			w := e.writer(t, func(o *WriterOptions) { o.BucketCount = 16 })
			enqueue(t, w, 3, 1)
			enqueue(t, w, 10, 2)
			enqueue(t, w, 12, 1)
			s := e.store(t)
			c := e.counts(func() {
				got, err := s.Stranded(t.Context())
				if err != nil || got.Messages != 3 {
					t.Fatalf("stranded %+v, %v; want 3 messages in buckets 10 and 12", got, err)
				}
				wantInts(t, "stranded buckets", got.Buckets, []int{10, 12})
			})
			// A head probe of each of buckets 8-15, a count of the two that
			// hold something.
			wantRequests(t, c, map[string]int{"Query": 10})
			got, err := s.StrandedIn(t.Context(), []int{2, 12, 40})
			if err != nil || got.Messages != 1 {
				t.Fatalf("stranded in 2, 12, 40: %+v, %v; want bucket 12's one message (2 is within the count)", got, err)
			}
			wantInts(t, "stranded buckets", got.Buckets, []int{12})
		})
	})

	t.Run("Stranded_OnAHealthyTable_IsNothingForHalfAReadUnitPerBucket", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			enqueue(t, e.writer(t), 3, 2)
			s := e.store(t)
			c := e.counts(func() {
				got, err := s.Stranded(t.Context())
				if err != nil || got.Messages != 0 || len(got.Buckets) != 0 {
					t.Fatalf("stranded %+v, %v; want none", got, err)
				}
			})
			wantRequests(t, c, map[string]int{"Query": 8})
			wantUnits(t, "stranded count", c, 4, 0)
		})
	})

	// The second reproduction, at the store: a drain with 16 buckets
	// on a table of 8 left lease items for buckets 8-15, held by the drain's
	// relay until they lapse. Every check ignores them; once free they are
	// removed.
	t.Run("StaleLeases_AreIgnored_AndRemovedOnceFree", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			e.withoutLayout(t)
			big := e.store(t, func(o *StoreOptions) { o.BucketCount = 16 })
			if _, err := big.acquire(t.Context(), lease.Request{RelayID: "drain-16", BucketCount: 16, LeaseDuration: fleetLease}, lease.RoundState{}); err != nil {
				t.Fatal(err)
			}
			if _, err := RecordLayout(t.Context(), e.client, e.opts, "operator", "test"); err != nil {
				t.Fatal(err)
			}
			s := e.store(t)
			stale, err := s.StaleLeases(t.Context())
			if err != nil || len(stale) != 8 || stale[0].Bucket != 8 || stale[0].Owner != "drain-16" {
				t.Fatalf("stale leases %+v, %v; want buckets 8-15 held by drain-16", stale, err)
			}
			view, err := s.ReadCoordination(t.Context())
			if err != nil || len(view.Leases) != 8 {
				t.Fatalf("coordination view %+v, %v; want the 8 leases below the count", view.Leases, err)
			}
			buckets := []int{3, 8, 9, 10, 11, 12, 13, 14, 15}
			removed, held, err := s.RemoveStaleLeases(t.Context(), buckets)
			if err != nil || len(removed) != 0 || len(held) != 8 {
				t.Fatalf("while held: removed %v, held %v, %v; want all 8 held", removed, held, err)
			}
			time.Sleep(fleetLease)
			c := e.counts(func() { removed, held, err = s.RemoveStaleLeases(t.Context(), buckets) })
			if err != nil || len(removed) != 8 || len(held) != 0 {
				t.Fatalf("once lapsed: removed %v, held %v, %v; want all 8 removed", removed, held, err)
			}
			wantRequests(t, c, map[string]int{"DeleteItem": 8})
			if stale, err := s.StaleLeases(t.Context()); err != nil || len(stale) != 0 {
				t.Fatalf("stale leases after removal %+v, %v", stale, err)
			}
			// Removing again (an interrupted run repeated) refuses nothing.
			c = e.counts(func() { removed, held, err = s.RemoveStaleLeases(t.Context(), buckets) })
			if err != nil || len(held) != 0 || c.Refused != 0 {
				t.Fatalf("again: held %v, %d refused, %v", held, c.Refused, err)
			}
		})
	})

	// Stranded messages move to the buckets the table's count gives them,
	// in their order, with their ids.
	t.Run("Rehome_MovesStrandedMessagesInOrder", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			e.withoutLayout(t)
			big := e.writer(t, func(o *WriterOptions) { o.BucketCount = 16 })
			var ids []outbox.MessageID
			for i := range 30 {
				m, err := big.Enqueue(t.Context(), newMessage(t, "t", "k"+strconv.Itoa(i), 10))
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, m.ID)
			}
			if _, err := RecordLayout(t.Context(), e.client, e.opts, "operator", "test"); err != nil {
				t.Fatal(err)
			}
			s, w := e.store(t), e.writer(t)
			if _, err := s.Rehome(t.Context(), 3, w); !errors.Is(err, outbox.ErrMisconfigured) {
				t.Fatalf("rehome of bucket 3 = %v, want a misconfiguration: it is within the count", err)
			}
			moved, err := s.Rehome(t.Context(), 10, w)
			if err != nil || moved != 30 {
				t.Fatalf("moved %d, %v; want 30", moved, err)
			}
			if st, err := s.Stranded(t.Context()); err != nil || st.Messages != 0 {
				t.Fatalf("stranded after the move: %+v, %v", st, err)
			}
			got, err := s.FetchBatch(t.Context(), 2, 100)
			if err != nil || len(got) != 30 {
				t.Fatalf("bucket 2 holds %d, %v; want the 30 moved there (partition 10 mod 8)", len(got), err)
			}
			for i, m := range got {
				if m.ID != ids[i] || string(m.Key) != "k"+strconv.Itoa(i) || m.Partition == nil || *m.Partition != 10 || !m.CreatedAt.Equal(t0) {
					t.Fatalf("message %d is %s key %q; want %s key k%d, partition 10, created at t0, in the old order", i, m.ID, m.Key, ids[i], i)
				}
			}
		})
	})

	// Messages a writer of 16 buckets stamped in buckets within 8 stop the
	// relay; restamped, they are published where they are, in their
	// order. With 16 of 8 every such message is where 8 buckets put it.
	t.Run("Restamp_LetsTheRelayPublishThemInPlace", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			e.withoutLayout(t)
			eight, sixteen := e.writer(t), e.writer(t, func(o *WriterOptions) { o.BucketCount = 16 })
			enqueue(t, eight, 3, 1)
			enqueue(t, sixteen, 3, 2)
			enqueue(t, eight, 3, 1)
			if _, err := RecordLayout(t.Context(), e.client, e.opts, "operator", "test"); err != nil {
				t.Fatal(err)
			}
			s := e.store(t)
			got, err := s.FetchBatch(t.Context(), 3, 10)
			if !errors.As(err, new(*StampError)) || len(got) != 1 {
				t.Fatalf("fetch = %d messages, %v; want the first and a StampError", len(got), err)
			}
			restamped, misplaced, err := s.Restamp(t.Context(), 3)
			if err != nil || restamped != 2 || misplaced != 0 {
				t.Fatalf("restamp: %d (%d misplaced), %v; want 2, none misplaced", restamped, misplaced, err)
			}
			if got, err = s.FetchBatch(t.Context(), 3, 10); err != nil || len(got) != 4 {
				t.Fatalf("fetch after the restamp: %d messages, %v; want all 4", len(got), err)
			}
			wantInts(t, "sequences", sequences(got), []int64{1, 2, 3, 4})
			if restamped, _, err := s.Restamp(t.Context(), 3); err != nil || restamped != 0 {
				t.Fatalf("restamp again: %d, %v; want nothing left", restamped, err)
			}
			if _, _, err := s.Restamp(t.Context(), 8); !errors.Is(err, outbox.ErrMisconfigured) {
				t.Fatalf("restamp of bucket 8: %v, want a misconfiguration", err)
			}
		})
	})
}

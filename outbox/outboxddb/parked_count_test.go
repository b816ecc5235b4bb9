package outboxddb

import (
	"testing"
	"testing/synctest"

	"github.com/spillway-dev/spillway/outbox"
)

func TestParkedCounts(t *testing.T) {
	// ParkedCounts tells parked, marked and held-back keys apart per bucket,
	// with one query per bucket.
	t.Run("CountsMarksAndHeldBackKeysPerBucket", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w, s := e.writer(t), e.store(t)
			enqueue(t, w, 5, 4) // keys k, kk, kkk, kkkk
			for _, p := range []outbox.Parking{
				{Bucket: 5, Sequence: 1, Reason: outbox.ParkUnknownTopic},
				{Bucket: 5, Sequence: 2, Reason: outbox.ParkUnknownTopic},
				{Bucket: 5, Sequence: 4, Reason: outbox.ParkTooLarge},
			} {
				if err := s.Park(t.Context(), p); err != nil {
					t.Fatal(err)
				}
			}
			parked, err := s.ListParked(t.Context(), 5)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.RequestReplay(t.Context(), parked[1:2], ""); err != nil {
				t.Fatal(err)
			}
			var counts []ParkedCount
			c := e.counts(func() {
				if counts, err = s.ParkedCounts(t.Context()); err != nil {
					t.Fatal(err)
				}
			})
			wantRequests(t, c, map[string]int{"Query": s.Options().BucketCount})
			for _, got := range counts {
				want := ParkedCount{Bucket: got.Bucket}
				if got.Bucket == 5 {
					want = ParkedCount{Bucket: 5, Parked: 3, Marked: 1, HeldBackKeys: 3}
				}
				if got != want {
					t.Errorf("bucket %d: %+v, want %+v", got.Bucket, got, want)
				}
			}
		})
	})
}

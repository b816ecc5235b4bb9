package e2e

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

func TestFetchCut(t *testing.T) {
	// A transaction's block of a bucket goes whole, so a fetch whose limit
	// ends inside the next block hands out less than a full batch
	// (outbox.ErrBatchCut). The relay fetches again at once, as after a
	// full batch, instead of waiting a TargetLatency for its next probe:
	// the bench's one relay over 8 buckets relayed 0.9× one bucket's rate
	// when it waited.
	t.Run("BatchesCutAtATransactionsBlock_DrainAtOnce_InKeyOrder", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newSim(t)
			// Lists of 100 over 8 buckets: blocks of 12 or 13 rows a
			// bucket, one key each, so every batch of 20 ends inside the
			// next block and is cut before it.
			const buckets, perBucket = 8, 60
			l := b.enqueueBuckets(t, buckets, perBucket, 100)
			opts := testOpts("relay-a")
			opts.BatchSize = 20
			r := b.newRig(t, opts, nil)
			res := r.run(t, outbox.RunInput{Deadline: b.clock.Now().Add(time.Minute)})
			if res.Deleted != buckets*perBucket {
				t.Fatalf("deleted %d, want %d", res.Deleted, buckets*perBucket)
			}
			deletes, _ := r.obs.of(evDelete)
			batches := map[int]int{}
			for _, d := range deletes {
				if d.count >= opts.BatchSize {
					t.Fatalf("bucket %d deleted a batch of %d: want every batch cut at a block, under %d", d.bucket, d.count, opts.BatchSize)
				}
				batches[d.bucket]++
			}
			// The backends answer in no simulated time: a relay that
			// fetches again after each cut drains every bucket at the
			// instant it starts, one that waits for its probes takes a
			// TargetLatency a batch.
			if took := deletes[len(deletes)-1].at.Sub(deletes[0].at); took >= outbox.DefaultTargetLatency {
				t.Fatalf("the drain took %v of simulated time over %d batches: it waited between cut batches", took, len(deletes))
			}
			t.Logf("%d batches in %d buckets in %v of simulated time", len(deletes), len(batches), deletes[len(deletes)-1].at.Sub(deletes[0].at))
			b.verify(t, l)
			b.wantEmpty(t)
		})
	})
}

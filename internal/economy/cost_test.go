package economy

import (
	"fmt"
	"maps"
	"math"
	"testing"
	"testing/synctest"

	"github.com/spillway-dev/spillway/internal/bench"
	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/outbox"
)

// TestCost measures the cost scenario and asserts the counted requests and
// units exactly: with the study's defaults for 512-byte values (200
// messages per enqueue path, lists of 10, 8 buckets), so the figures the
// study prints for them are the asserted ones, and with 20 messages for
// 16 KB values, which the race detector makes slow. The expected figures
// are derived from the writer's and relay's request shapes and DynamoDB's
// sizing rules, with k = the message item's size in started KB:
//
//   - Enqueue: a reservation UpdateItem (1 WRU) and a PutItem (k WRU);
//   - Enqueue of a list: one reservation per distinct bucket of the list
//     and one TransactWriteItems (2k WRU per message);
//   - caller transaction: one reservation per message, and 2k WRU per
//     message more in the caller's transaction;
//   - relay drain: 8 probes, one strongly consistent fetch per bucket (one
//     read unit per started 4 KB of the bucket's items) and one
//     BatchWriteItem per 25 deletes (k WRU per message).
func TestCost(t *testing.T) {
	t.Parallel()
	for _, cfg := range []CostConfig{
		{ValueSizes: []int{512}},
		{ValueSizes: []int{16 << 10}, Messages: 20},
	} {
		synctest.Test(t, func(t *testing.T) {
			res, err := RunCost(t.Context(), lab.Config{Settle: synctest.Wait}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			checkCost(t, res)
		})
	}
}

// lingerRounds is how many probe rounds a drain-mode relay whose buckets
// all had work makes in its linger.
const lingerRounds = int(outbox.DefaultIdleTimeout / outbox.DefaultTargetLatency)

func checkCost(t *testing.T, res CostResult) {
	t.Helper()
	n, listSize, buckets := res.Config.Messages, res.Config.ListSize, res.Config.BucketCount
	lists := (n + listSize - 1) / listSize
	// Every message of the three paths (keys customer-000000 onwards) per
	// bucket, and the distinct buckets of each list (messages n … 2n-1).
	perBucket := map[int]int{}
	w := bench.NewWorkload("t", 1, buckets)
	for i := range 3 * n {
		perBucket[w.BucketOf(i)]++
	}
	reservations := 0
	for l := range lists {
		distinct := map[int]bool{}
		for i := l * listSize; i < min(n, (l+1)*listSize); i++ {
			distinct[w.BucketOf(n+i)] = true
		}
		reservations += len(distinct)
	}
	for _, s := range res.Sizes {
		k := math.Ceil(float64(s.ItemSize) / 1024)
		nf := float64(n)
		readUnits := func(bytes int) float64 { return math.Ceil(float64(bytes) / 4096) }
		fetch, deletes := 0.0, 0
		for _, count := range perBucket {
			fetch += readUnits(count * s.ItemSize)
			deletes += (count + 24) / 25
		}
		want := map[string]PathCost{
			PathEnqueue: {Count: n, Requests: map[string]int{"UpdateItem": n, "PutItem": n}, WriteUnits: nf * (1 + k)},
			fmt.Sprintf("%s of %d", PathEnqueueList, listSize): {Count: n, Requests: map[string]int{"UpdateItem": reservations, "TransactWriteItems": lists},
				WriteUnits: float64(reservations) + nf*2*k},
			PathTransaction: {Count: n, Requests: map[string]int{"UpdateItem": n}, WriteUnits: nf * (1 + 2*k)},
			// A probe projects the sort key only; the Counter cannot tell
			// which stored item such a result is and charges it by its
			// projected size, half a unit, where DynamoDB bills the whole
			// item read (an outboxlocal approximation).
			// Every relay, whatever its poison policy, reads each claimed
			// bucket's parked partition before it publishes (one strongly
			// consistent query, 1 RRU when empty) and the replay requests
			// (1 RRU).
			PathRelayDrain: {Count: 3 * n, Requests: map[string]int{"Query": len(perBucket) + buckets + buckets + 1, "BatchWriteItem": deletes},
				WriteUnits: 3 * nf * k, ReadUnits: float64(buckets)*0.5 + fetch + float64(buckets) + 1},
			// The coordination read and the generation gate's read of the
			// predecessor marker (1 RRU each).
			PathRelayJoin: {Count: 1, Requests: map[string]int{"PutItem": 1, "Query": 2, "UpdateItem": buckets},
				WriteUnits: 1 + float64(buckets), ReadUnits: 2},
			// Linger: every bucket had work, so each is probed every
			// TargetLatency through the 2 s linger (8 rounds at 225 ms;
			// the polls at 1 s and 2 s would be 2), then the idle-exit
			// probe and its read of the replay requests (1 RRU); stop:
			// stamp, two lease reads, 8 releases, 8 strongly consistent
			// head reads of the released buckets (1 RRU each).
			PathRelayStop: {Count: 1, Requests: map[string]int{"PutItem": 1, "Query": (lingerRounds+2)*buckets + 2 + 1, "UpdateItem": buckets},
				WriteUnits: 1 + float64(buckets), ReadUnits: float64((lingerRounds+1)*buckets)*0.5 + float64(buckets) + 2 + 1},
		}
		seen := map[string]bool{}
		for _, p := range s.Paths {
			seen[p.Path] = true
			switch p.Path {
			case PathEndToEnd:
				txn, drain := s.Paths[2].Unit, s.Paths[3].Unit
				if p.Unit.WriteUnits != txn.WriteUnits+drain.WriteUnits || p.ModelWriteUnits == nil || *p.ModelWriteUnits != 1+3*k {
					t.Errorf("%d bytes, %s: %+v (model %v), want the sum of the transaction and drain rows", s.ValueSize, p.Path, p.Unit, p.ModelWriteUnits)
				}
				continue
			case PathRelayBacklog:
				// A head query and a count per bucket; the count's units
				// depend on the Counter's average item size, so only the
				// floor (a half unit per query) is asserted.
				if !maps.Equal(p.Requests, map[string]int{"Query": buckets + len(perBucket)}) || p.ReadUnits < float64(buckets)/2 || p.WriteUnits != 0 {
					t.Errorf("%d bytes, %s: %v, %v RRU, %v WRU, want a head query per bucket and a count per non-empty one, >= 4 RRU, no WRU", s.ValueSize, p.Path, p.Requests, p.ReadUnits, p.WriteUnits)
				}
				continue
			}
			want, ok := want[p.Path]
			if !ok {
				t.Errorf("%d bytes: unexpected path %q", s.ValueSize, p.Path)
				continue
			}
			if p.Count != want.Count || !maps.Equal(p.Requests, want.Requests) || p.WriteUnits != want.WriteUnits || p.ReadUnits != want.ReadUnits {
				t.Errorf("%d bytes, %s: %d, %v, %v WRU, %v RRU; want %d, %v, %v WRU, %v RRU", s.ValueSize, p.Path,
					p.Count, p.Requests, p.WriteUnits, p.ReadUnits, want.Count, want.Requests, want.WriteUnits, want.ReadUnits)
			}
			// Where the seed's model has a figure, the measurement matches it.
			if p.ModelWriteUnits != nil && math.Abs(*p.ModelWriteUnits-p.Unit.WriteUnits) > 1e-9 {
				t.Errorf("%d bytes, %s: %v WRU per message, model %v", s.ValueSize, p.Path, p.Unit.WriteUnits, *p.ModelWriteUnits)
			}
		}
		if len(seen) != len(want)+2 {
			t.Errorf("%d bytes: paths %v, want %d", s.ValueSize, seen, len(want)+2)
		}
		// The seed's figures for a message item under 1 KB.
		if s.ValueSize == 512 && (k != 1 || s.Paths[0].Unit.WriteUnits != 2 || s.Paths[2].Unit.WriteUnits != 3 || s.Paths[3].Unit.WriteUnits != 1) {
			t.Errorf("512-byte values: item %d bytes, single %v, transaction %v, delete %v WRU per message; want 1 KB, 2, 3, 1",
				s.ItemSize, s.Paths[0].Unit.WriteUnits, s.Paths[2].Unit.WriteUnits, s.Paths[3].Unit.WriteUnits)
		}
	}
}

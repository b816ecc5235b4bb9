package e2e

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// deleteChunk is how many deletes the store sends per BatchWriteItem.
const deleteChunk = 25

func TestRequests(t *testing.T) {
	// SteadyDrain_DynamoDBRequestsPerMessage counts what one relay asks of
	// DynamoDB to drain 1,000 messages, and bounds it: per bucket, one fetch
	// per batch (plus the empty fetch after a full one) and one BatchWriteItem
	// per 25 deletes of a batch; per run, a fixed cost for the acquisition
	// round, the backlog sample, probes, the idle check and the stop.
	t.Run("SteadyDrain_DynamoDBRequestsPerMessage", func(t *testing.T) {
		const messages = 1000
		for _, buckets := range []int{1, 8} {
			t.Run(fmt.Sprintf("%d buckets", buckets), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					b := newSim(t)
					b.enqueueBuckets(t, buckets, messages/buckets, 100)
					opts := testOpts("relay-a")
					opts.BatchSize = outbox.DefaultBatchSize
					r := b.newRig(t, opts, nil)
					before := b.ddb.Counter.Snapshot()
					res := r.run(t, outbox.RunInput{Deadline: b.clock.Now().Add(time.Minute)})
					c := b.ddb.Counter.Snapshot().Since(before)
					if res.Deleted != messages {
						t.Fatalf("deleted %d, want %d", res.Deleted, messages)
					}

					perBucket := messages / buckets
					fetches, deletes := 0, 0
					for left := perBucket; ; left -= opts.BatchSize {
						batch := min(left, opts.BatchSize)
						fetches++
						deletes += (batch + deleteChunk - 1) / deleteChunk
						if batch < opts.BatchSize {
							break
						}
					}
					fetches *= buckets
					deletes *= buckets
					// The run's fixed cost with 8 leases, whatever the backlog:
					// the acquisition round (heartbeat, coordination read, 8
					// claims, a prune), the backlog sample of every bucket, the
					// probes of 8 buckets after the claim and at the idle check,
					// and the stop (stopped record, coordination reads, 8
					// releases, the post-release probe), and the parked state
					// every relay reads whatever its poison policy: the replay
					// requests (at the first probe and the idle check) and one
					// read of each claimed bucket's parked partition before it
					// publishes. Measured 73 with one bucket and 87 with eight
					// (2026-12, minidyn; 70 and 77 when block relays ignored
					// the parked partitions); the bound leaves a little room
					// and fails if a batch costs one request more. The latency
					// dial adds the busy buckets' probes while the relay
					// lingers: at most one per bucket every TargetLatency of the
					// idle timeout (measured 183 in all with eight buckets).
					busyProbes := buckets * int(opts.IdleTimeout/outbox.DefaultTargetLatency)
					fixed := 80 + buckets + busyProbes
					if got := c.Requests["BatchWriteItem"]; got != deletes {
						t.Fatalf("%d BatchWriteItem requests, want %d", got, deletes)
					}
					bound := fetches + deletes + fixed
					total := c.TotalRequests()
					t.Logf("%d messages in %d bucket(s), batches of %d: %d DynamoDB requests (%v), %.3f per message; bound %d (%d fetches + %d deletes + %d per run)",
						messages, buckets, opts.BatchSize, total, c.Requests, float64(total)/messages, bound, fetches, deletes, fixed)
					if total > bound {
						t.Fatalf("%d requests, more than the bound %d", total, bound)
					}
				})
			})
		}
	})
}

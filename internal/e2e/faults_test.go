package e2e

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// Kafka faults are injected with kfake's Fault API, which answers a
// matching Produce request with the error in every partition it selects
// (the Cluster.ControlKey mechanism, with the response built by kfake).

func TestFaults(t *testing.T) {
	t.Run("KafkaRetriableError_DeliveredOnce_DeletedOnce", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newSim(t)
			l := b.enqueueBuckets(t, 2, 50, 100)
			fault := b.kafka.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Err: kerr.NotLeaderForPartition})
			r := b.newRig(t, func() outbox.RelayOptions { o := testOpts("relay-a"); o.BatchSize = 100; return o }(), nil)
			before := b.ddb.Counter.Snapshot()
			res := r.run(t, outbox.RunInput{Deadline: b.clock.Now().Add(time.Minute)})
			c := b.ddb.Counter.Snapshot().Since(before)
			if fault.Hits() != 1 {
				t.Fatalf("the fault answered %d produce requests, want 1", fault.Hits())
			}
			if res.Published != 100 || res.Deleted != 100 || res.Errors != 0 {
				t.Fatalf("published %d, deleted %d, failed cycles %d; want 100, 100, 0: the producer retries inside the batch", res.Published, res.Deleted, res.Errors)
			}
			// One batch of 50 per bucket, deleted in chunks of 25.
			if got := c.Requests["BatchWriteItem"]; got != 4 {
				t.Fatalf("%d BatchWriteItem requests, want 4: each message deleted once", got)
			}
			if d := b.verify(t, l); d.duplicates != 0 {
				t.Fatalf("%d duplicates: the idempotent producer should have deduplicated the retry", d.duplicates)
			}
			b.wantEmpty(t)
		})
	})

	t.Run("KafkaNonRetriableRow_OnlyItsBucketBacksOff_OthersKeepDraining", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			const poisoned, audit = 3, "audit"
			b := newSim(t, audit)
			keys := bucketKeys(t, 8)
			// 20 messages per bucket; bucket 3's sixth goes to another topic, the
			// only produce to it, which Kafka refuses once as an invalid record.
			var msgs []outbox.Message
			for i := range 20 {
				for bucket := range 8 {
					tp := topic
					if bucket == poisoned && i == 5 {
						tp = audit
					}
					msgs = append(msgs, b.messageTo(t, tp, keys[bucket], 100))
				}
			}
			l := newLedger()
			b.enqueueLists(t, l, msgs)
			fault := b.kafka.Cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: audit, Err: kerr.InvalidRecord})
			r := b.newRig(t, testOpts("relay-a"), nil)
			res := r.run(t, outbox.RunInput{Deadline: b.clock.Now().Add(time.Minute)})
			if res.Reason != outbox.StopDrained || res.Deleted != 160 {
				t.Fatalf("reason %s, deleted %d; want drained after 160", res.Reason, res.Deleted)
			}
			if fault.Hits() != 1 {
				t.Fatalf("the fault answered %d produce requests, want 1", fault.Hits())
			}
			backoffs, _ := r.obs.of(evBackoff)
			if len(backoffs) == 0 {
				t.Fatal("no backoff reported for the refused row")
			}
			for _, e := range backoffs {
				if e.bucket != poisoned {
					t.Fatalf("backoff of bucket %d (%v); want only bucket %d to back off", e.bucket, e.err, poisoned)
				}
			}
			deletes, deleteAt := r.obs.of(evDelete)
			retries, retryAt := r.obs.of(evHeadRowRetry)
			if len(retries) == 0 {
				t.Fatal("the refused row was never retried alone")
			}
			others, prefix := 0, -1
			for i, e := range deletes {
				switch {
				case e.bucket != poisoned && deleteAt[i] < retryAt[0]:
					others += e.count
				case e.bucket == poisoned && prefix < 0:
					prefix = e.count
				}
			}
			if prefix != 5 {
				t.Fatalf("bucket %d first deleted %d messages, want the 5 before the refused row", poisoned, prefix)
			}
			if others != 7*20 {
				t.Fatalf("other buckets deleted %d messages before the refused row's retry, want all %d", others, 7*20)
			}
			d := b.verify(t, l)
			t.Logf("refused row: %d backoffs, %d head-row retries, %d duplicates (rows after it that reached other partitions)", len(backoffs), len(retries), d.duplicates)
			b.wantEmpty(t)
		})
	})

	t.Run("BrokerDownAtStart_RunFailsAndClaimsNothing", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newSim(t)
			b.enqueueBuckets(t, 1, 5, 100)
			// A broker address nothing listens on, on a network of its own.
			down := kgo.Dialer(new(kfake.VirtualNetwork).DialContext)
			p, err := outboxkafka.New(outboxkafka.Config{Brokers: []string{"127.0.0.1:9092"}, ExtraOpts: append(outboxlocal.TestClientOpts(), down)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			r := b.newRig(t, testOpts("relay-a"), func(c *outbox.RelayConfig) {
				c.Publisher = &trackedPublisher{inner: p}
			})
			before := b.ddb.Counter.Snapshot()
			// Init gets the budget (2 s of the 3 s to the deadline).
			res, err := r.relay.Run(t.Context(), outbox.RunInput{Deadline: b.clock.Now().Add(3 * time.Second)})
			if err == nil || res.Reason != outbox.StopFatal || res.Joined {
				t.Fatalf("run: %+v, %v; want a fatal error before joining", res, err)
			}
			if c := b.ddb.Counter.Snapshot().Since(before); c.TotalRequests() != 0 {
				t.Fatalf("the relay sent %v to DynamoDB, want nothing: no heartbeat, no claim", c.Requests)
			}
			if messages, owners := b.tableState(t); messages != 5 || len(owners) != 0 {
				t.Fatalf("table holds %d messages and leases naming %v; want the 5 untouched and no lease", messages, owners)
			}
		})
	})
}

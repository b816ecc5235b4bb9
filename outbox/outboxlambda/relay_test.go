package outboxlambda

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
	"github.com/spillway-dev/spillway/outbox/outboxwake"
)

func handleRelay(t *testing.T, b *bundle, ctx context.Context, payload json.RawMessage) RelayResponse {
	t.Helper()
	resp, err := b.relay.Handle(ctx, payload)
	if err != nil {
		t.Fatalf("relay: %v", err)
	}
	return resp
}

func handleEnqueue(t *testing.T, b *bundle, payload json.RawMessage) EnqueueResponse {
	t.Helper()
	resp, err := b.enqueue.Handle(t.Context(), payload)
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	if resp.Error != "" {
		t.Fatalf("enqueue refused: %s (%s)", resp.Error, resp.Field)
	}
	return resp
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

func byID(recs []*kgo.Record) map[string]*kgo.Record {
	out := map[string]*kgo.Record{}
	for _, r := range recs {
		id, _ := header(r, outbox.DefaultMessageIDHeaderName)
		out[id] = r
	}
	return out
}

func TestRelay(t *testing.T) {
	t.Parallel()
	// EnqueueThenWakeRelaysEveryMessage drives the functions' path: the
	// enqueue handler stores the sample messages and sends wake-ups, which are
	// handed to the relay handler as Lambda would deliver them.
	t.Run("EnqueueThenWakeRelaysEveryMessage", func(t *testing.T) {
		t.Parallel()
		b := setup(t, bundleOptions{})
		single := handleEnqueue(t, b, b.sample(t, "enqueue.single.json"))
		batch := handleEnqueue(t, b, b.sample(t, "enqueue.batch.json"))
		if len(single.Messages) != 1 || len(batch.Messages) != 5 {
			t.Fatalf("stored %d + %d messages, want 1 + 5", len(single.Messages), len(batch.Messages))
		}
		if m := single.Messages[0]; m.MessageID != "5c3e9f10-7b2a-4d6e-8f41-a2b3c4d5e6f7" || m.Bucket != 5 || m.Sequence != 1 {
			t.Fatalf("single message %+v, want the request's id in bucket 5, sequence 1", m)
		}
		var wantBuckets []int
		for _, m := range batch.Messages {
			wantBuckets = append(wantBuckets, m.Bucket)
		}
		slices.Sort(wantBuckets)
		wantBuckets = slices.Compact(wantBuckets)

		// One wake-up per request, naming its distinct buckets.
		calls := b.inv.invocations()
		if len(calls) != 2 {
			t.Fatalf("%d wake-ups, want one per request", len(calls))
		}
		var wake outboxwake.Payload
		if err := json.Unmarshal([]byte(calls[1].payload), &wake); err != nil {
			t.Fatal(err)
		}
		if calls[0].payload != `{"trigger":"wake","buckets":[5],"hop":0,"join":false}` || !reflect.DeepEqual(wake.Buckets, wantBuckets) {
			t.Fatalf("wake-ups %q, want buckets [5] then %v", []string{calls[0].payload, calls[1].payload}, wantBuckets)
		}

		first := handleRelay(t, b, t.Context(), json.RawMessage(calls[0].payload))
		if first.Trigger != SourceWake || !first.Joined || first.Published != 6 || first.Deleted != 6 || first.Reason != string(outbox.StopDrained) {
			t.Fatalf("first wake-up: %+v, want all 6 messages relayed", first)
		}
		if len(first.Released) == 0 || first.ReleaseSkipped {
			t.Fatalf("first wake-up released %v (skipped %v)", first.Released, first.ReleaseSkipped)
		}

		orders := byID(outboxtest.Consume(t, b.kafka, b.topic("orders"), 4))
		payments := outboxtest.Consume(t, b.kafka, b.topic("payments"), 2)
		r := orders["5c3e9f10-7b2a-4d6e-8f41-a2b3c4d5e6f7"]
		if r == nil || string(r.Key) != "order-8" || string(r.Value) != `{"orderId":8,"status":"shipped"}` {
			t.Fatalf("single message record %+v", r)
		}
		wantHeaders := []kgo.RecordHeader{
			{Key: "content-type", Value: []byte("application/json")},
			{Key: "schema-version"},
			{Key: outbox.DefaultMessageIDHeaderName, Value: []byte("5c3e9f10-7b2a-4d6e-8f41-a2b3c4d5e6f7")},
		}
		if !reflect.DeepEqual(r.Headers, wantHeaders) {
			t.Fatalf("single message headers %q, want %q (dedup header last)", r.Headers, wantHeaders)
		}
		keyless := orders["8d9f3c2a-1b4e-4f6a-9c8d-7e6f5a4b3c2d"]
		if keyless == nil || keyless.Key != nil || string(keyless.Value) != "keyless event" {
			t.Fatalf("keyless record %+v", keyless)
		}
		if tp, _ := header(keyless, outbox.HeaderTraceParent); tp != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
			t.Fatalf("keyless record's traceparent %q, want the request's", tp)
		}
		var tombstones int
		for _, c := range payments {
			if c.Value == nil {
				tombstones++
			}
			if c.Partition != 2 && c.Value != nil {
				t.Errorf("the explicit-partition record landed in partition %d", c.Partition)
			}
		}
		if tombstones != 1 {
			t.Fatalf("%d tombstones among the payments records, want 1", tombstones)
		}
		// Relayed and deleted: nothing is pending any more.
		if pending, err := b.relayStore.PendingBuckets(t.Context(), []int{0, 1, 2, 3, 4, 5, 6, 7}); err != nil || len(pending) != 0 {
			t.Fatalf("pending after the relay: %v %v", pending, err)
		}
	})

	t.Run("StreamsBatchRelaysTheHintedBuckets", func(t *testing.T) {
		t.Parallel()
		b := setup(t, bundleOptions{})
		handleEnqueue(t, b, b.sample(t, "enqueue.single.json"))
		handleEnqueue(t, b, b.sample(t, "enqueue.batch.json"))

		resp := handleRelay(t, b, t.Context(), b.sample(t, "relay.streams.json"))
		if resp.Trigger != SourceStreams || !reflect.DeepEqual(resp.Buckets, []int{1, 5}) || resp.Records != 5 || resp.Ignored != 3 || resp.Malformed != 0 {
			t.Fatalf("stream batch decoded as %+v, want hints [1 5] from 5 records, 3 ignored", resp)
		}
		// The only relay owns every bucket, so it drains all of them.
		if !resp.Joined || resp.Published != 6 || resp.Error != "" {
			t.Fatalf("stream batch: %+v", resp)
		}
		if got := len(outboxtest.Consume(t, b.kafka, b.topic("orders"), 4)); got != 4 {
			t.Fatalf("%d order records", got)
		}
	})

	t.Run("StreamsBatchWithoutInsertsStartsNoRun", func(t *testing.T) {
		t.Parallel()
		b := setup(t, bundleOptions{})
		before := b.ddb.Counter.Snapshot()
		resp := handleRelay(t, b, t.Context(), b.sample(t, "relay.streams-removals.json"))
		if resp.Reason != NoHints || resp.Joined || resp.Ignored != 1 {
			t.Fatalf("removals-only batch: %+v", resp)
		}
		if n := b.ddb.Counter.Snapshot().Since(before).TotalRequests(); n != 0 {
			t.Fatalf("%d DynamoDB requests for a batch without message inserts, want 0", n)
		}
	})

	// ScheduleSweepWithNothingPendingOnlyProbes counts the requests of an
	// idle sweep: one Limit-1 probe per bucket, one read of the replay
	// requests (a relay of either poison policy carries out marked replays,
	// which may be all a bucket holds) and nothing else.
	t.Run("ScheduleSweepWithNothingPendingOnlyProbes", func(t *testing.T) {
		t.Parallel()
		b := setup(t, bundleOptions{})
		for _, sample := range []string{"relay.schedule.json", "relay.schedule-eventbridge.json", "relay.schedule-scheduler.json"} {
			before := b.ddb.Counter.Snapshot()
			resp := handleRelay(t, b, t.Context(), b.sample(t, sample))
			used := b.ddb.Counter.Snapshot().Since(before)
			if resp.Trigger != SourceSchedule || resp.Reason != string(outbox.StopNothingPending) || resp.Joined || resp.Rounds != 0 {
				t.Fatalf("%s: %+v", sample, resp)
			}
			if want := map[string]int{"Query": b.cfg.BucketCount + 1}; !reflect.DeepEqual(used.Requests, want) || used.WriteUnits != 0 {
				t.Fatalf("%s: requests %v, %.1f write units; want %v and no write", sample, used.Requests, used.WriteUnits, want)
			}
			t.Logf("%s: %d requests, %.1f read units", sample, used.TotalRequests(), used.ReadUnits)
		}
		// Positive control: with a message pending the same sweep joins.
		handleEnqueue(t, b, b.sample(t, "enqueue.single.json"))
		before := b.ddb.Counter.Snapshot()
		resp := handleRelay(t, b, t.Context(), b.sample(t, "relay.schedule.json"))
		if !resp.Joined || resp.Published != 1 || b.ddb.Counter.Snapshot().Since(before).WriteUnits == 0 {
			t.Fatalf("sweep with a pending message: %+v", resp)
		}
	})

	// WakeUpTrustsALivePeer: a wake-up for a bucket a live peer holds costs
	// one consistent coordination query, the look at the bucket's head sent
	// beside it (on the path of a wake-up that joins), and no write.
	t.Run("WakeUpTrustsALivePeer", func(t *testing.T) {
		t.Parallel()
		b := setup(t, bundleOptions{})
		peer := b.newStore(t)
		req := lease.Request{RelayID: "peer-relay-0001", BucketCount: b.cfg.BucketCount, LeaseDuration: b.cfg.LeaseDuration}
		acq, err := lease.AcquireRound(t.Context(), peer, nil, time.Now(), req, lease.RoundState{})
		if err != nil {
			t.Fatal(err)
		}
		if len(acq.Owned) != b.cfg.BucketCount {
			t.Fatalf("the lone peer owns %v", acq.Owned)
		}
		handleEnqueue(t, b, b.sample(t, "enqueue.single.json"))

		before := b.ddb.Counter.Snapshot()
		resp := handleRelay(t, b, t.Context(), b.sample(t, "relay.notify.json"))
		used := b.ddb.Counter.Snapshot().Since(before)
		if resp.Reason != string(outbox.StopPeerLive) || resp.Joined || resp.Published != 0 {
			t.Fatalf("wake-up under a live peer: %+v", resp)
		}
		if want := map[string]int{"Query": 2}; !reflect.DeepEqual(used.Requests, want) || used.WriteUnits != 0 {
			t.Fatalf("requests %v, %.1f write units; want %v and no write", used.Requests, used.WriteUnits, want)
		}
		t.Logf("trusted wake-up: %d request, %.1f read units", used.TotalRequests(), used.ReadUnits)

		// Positive control: once the peer released its leases, the same
		// wake-up joins and relays the message.
		if _, err := peer.ReleaseLeases(t.Context(), req.RelayID); err != nil {
			t.Fatal(err)
		}
		resp = handleRelay(t, b, t.Context(), b.sample(t, "relay.notify.json"))
		if !resp.Joined || resp.Published != 1 {
			t.Fatalf("wake-up after the peer stopped: %+v", resp)
		}
	})

	// UnderAThreeSecondDeadline is the positive control of the budget:
	// within a 3-second invocation the relay claims a lease, publishes a
	// message and releases its leases before returning. The invocation runs in
	// a synctest bubble (invokeWithin): on the wall clock the claim, the
	// publish and the release had to fit in seconds of a loaded machine's
	// time, and the budget, not the relay, decided whether they did.
	t.Run("UnderAThreeSecondDeadline", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, testRelayUnderAThreeSecondDeadline)
	})

	t.Run("StreamsBatchNeverFailsButOtherTriggersDo", func(t *testing.T) {
		t.Parallel()
		b := setup(t, bundleOptions{publisher: failingPublisher{}})
		handleEnqueue(t, b, b.sample(t, "enqueue.batch.json"))

		resp, err := b.relay.Handle(t.Context(), b.sample(t, "relay.streams.json"))
		if err != nil {
			t.Fatalf("a stream batch failed: %v", err)
		}
		if resp.Error == "" || resp.Reason != string(outbox.StopFatal) || resp.Joined {
			t.Fatalf("stream batch with Kafka down: %+v, want the failure reported in the response", resp)
		}
		if _, err := b.relay.Handle(t.Context(), b.sample(t, "relay.notify-continuation.json")); err == nil {
			t.Fatal("a wake-up with Kafka down returned no function error")
		}
		// A relay that cannot publish claims nothing.
		if leases := b.leases(t); len(leases) != 0 {
			t.Errorf("leases %v written by a relay that cannot publish", leases)
		}
	})

	t.Run("RefusesUnknownPayloads", func(t *testing.T) {
		t.Parallel()
		b := setup(t, bundleOptions{})
		for _, sample := range []string{"relay.invalid.json", "relay.invalid-bucket.json", "relay.invalid-source.json"} {
			if _, err := b.relay.Handle(t.Context(), b.sample(t, sample)); !IsInvalidEvent(err) {
				t.Errorf("%s: error %v, want ErrInvalidEvent", sample, err)
			}
		}
	})

	// Lambda reports a function error's Go type name as its errorType; through
	// aws-lambda-go's handler a refused payload must say what went wrong.
	t.Run("RefusedPayload_IsNamedInLambdasErrorType", func(t *testing.T) {
		t.Parallel()
		b := setup(t, bundleOptions{})
		h := lambda.NewHandler(b.relay.Handle)
		for _, sample := range []string{"relay.invalid.json", "relay.invalid-bucket.json", "relay.invalid-source.json"} {
			_, err := h.Invoke(t.Context(), b.sample(t, sample))
			var iev *InvalidEventError
			if !errors.As(err, &iev) || iev.Reason == "" {
				t.Fatalf("%s: error %T %v, want *InvalidEventError with a reason", sample, err, err)
			}
			typ := reflect.TypeOf(err)
			if typ.Kind() == reflect.Pointer {
				typ = typ.Elem()
			}
			if typ.Name() != "InvalidEventError" {
				t.Errorf("%s: Lambda would report errorType %q, want InvalidEventError", sample, typ.Name())
			}
		}
	})
}

func testRelayUnderAThreeSecondDeadline(t *testing.T) {
	// Lambda's defaults: a 5 s stop margin (cut to a third of the 3 s) and
	// a 2 s linger, which the budget ends.
	b := setup(t, bundleOptions{inMemory: true, vars: map[string]string{outboxconf.EnvIdleTimeout: "2s", outboxconf.EnvPollInterval: "1s"}})
	enq := handleEnqueue(t, b, b.sample(t, "enqueue.single.json"))
	if leases := b.leases(t); len(leases) != 0 {
		t.Fatalf("lease items before the run: %v", leases)
	}

	before := b.ddb.Counter.Snapshot()
	started := time.Now()
	resp, killed := invokeWithin(t, b, b.sample(t, "relay.notify.json"), 3*time.Second)
	returned := time.Now()
	used := b.ddb.Counter.Snapshot().Since(before)
	if killed {
		t.Fatalf("the handler was still running at its deadline (%+v)", resp)
	}
	if !resp.Joined || resp.Rounds < 1 || resp.Published != 1 || resp.Deleted != 1 {
		t.Fatalf("run under a 3 s deadline: %+v; want a claim and the message published", resp)
	}
	// The linger would end at 2 s too; the budget ends it (the 3 s less a
	// third, less the instant the handler's wall-clock conversion takes).
	if resp.Reason != string(outbox.StopBudget) || returned.Sub(started) > 2*time.Second {
		t.Fatalf("the run stopped (%s) after %v, want by its budget, at 2 s", resp.Reason, returned.Sub(started))
	}
	if resp.ReleaseSkipped || !slices.Contains(resp.Released, enq.Messages[0].Bucket) {
		t.Fatalf("released %v (skipped %v), want bucket %d among them", resp.Released, resp.ReleaseSkipped, enq.Messages[0].Bucket)
	}
	if resp.BudgetUsed <= 0 || resp.BudgetUsed >= 100 {
		t.Fatalf("budget used %.1f%%", resp.BudgetUsed)
	}
	leases := b.leases(t)
	if len(leases) == 0 {
		t.Fatal("no lease item: the relay never claimed")
	}
	strict := b.appliesRemove(t)
	if !strict {
		t.Log("the DynamoDB endpoint does not apply REMOVE (embedded minidyn gap): checking that the relay's leases expired at release instead of that Owner is gone")
	}
	for bucket, l := range leases {
		if l.owner != b.relay.RelayID() {
			continue
		}
		if strict || l.expires.After(returned) {
			t.Errorf("bucket %d's lease still names the relay after it returned (expires %v, returned %v)", bucket, l.expires, returned)
		}
	}
	if got := len(outboxtest.Consume(t, b.kafka, b.topic("orders"), 1)); got != 1 {
		t.Fatalf("%d records", got)
	}
	t.Logf("3 s deadline: reason %s, %d rounds, budget used %.0f%%, released %v; requests %v, %.1f write units, %.1f read units",
		resp.Reason, resp.Rounds, resp.BudgetUsed, resp.Released, used.Requests, used.WriteUnits, used.ReadUnits)
}

// failingPublisher cannot reach Kafka.
type failingPublisher struct{}

func (failingPublisher) Init(context.Context) error {
	return errors.New("dial tcp 10.0.0.1:9092: i/o timeout")
}
func (failingPublisher) Publish(context.Context, []outbox.Message) (int, error) {
	return 0, errors.New("not initialised")
}

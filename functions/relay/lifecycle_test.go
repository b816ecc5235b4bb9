//go:build unix

package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// TestRelayLifecycle runs the relay bootstrap under the emulator around
// its deadline and its shutdown, and asserts what the runtime receives and
// what the table holds after.
func TestRelayLifecycle(t *testing.T) {
	// A Lambda API that accepts the continuation wake-up and never answers
	// (a relay in a VPC without a route to it): the invocation still
	// returns its response before the deadline, with its leases released
	// and the work left listed, under every timeout and stop margin. The
	// emulator is the judge of the deadline, as Lambda is: past it, it
	// answers Task timed out, which invoke fails on. The test's own clock
	// would add the emulator's HTTP round trips, which a loaded machine
	// under -race makes long, to the function's time.
	t.Run("TheWakeUpNeverOutlivesTheDeadline", func(t *testing.T) {
		for _, tc := range []struct {
			name, timeout, margin string
		}{{"Timeout4s", "4", ""}, {"Timeout6s", "6", ""}, {"Timeout10sStopMargin1s", "10", "1s"}} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t)
				f.invoke.Stall()
				f.slowKafka(t, -1, 300*time.Millisecond, nil)
				total := f.backlog(t, 600, func(int) string { return "order-1" })
				vars := map[string]string{"AWS_LAMBDA_FUNCTION_TIMEOUT": tc.timeout, outboxconf.EnvBatchSize: "10"}
				if tc.margin != "" {
					vars[outboxconf.EnvStopMargin] = tc.margin
				}
				relay := f.start(t, "relay", vars)
				start := time.Now()
				resp := invoke[outboxlambda.RelayResponse](t, relay, f.sample(t, "relay.schedule.json"))
				took := time.Since(start)
				if resp.Reason != string(outbox.StopBudget) {
					t.Fatalf("answered after %v of %ss: %+v; want the budget to end the run", took, tc.timeout, resp)
				}
				if resp.WakeUpSent || len(resp.WorkLeft) == 0 || resp.ReleaseSkipped || len(resp.Released) == 0 {
					t.Fatalf("response %+v: want the work left listed, the leases released, no wake-up sent", resp)
				}
				if n := len(f.invoke.Invocations()); n != 1 {
					t.Fatalf("%d wake-up invokes, want the one the API never answered", n)
				}
				f.leasesReleased(t)
				if left := f.pending(t); left != total-resp.Deleted || resp.Deleted != resp.Published {
					t.Fatalf("%d of %d messages left after %d published and %d deleted", left, total, resp.Published, resp.Deleted)
				}
				t.Logf("%ss timeout: answered after %v with %d published, work left %v", tc.timeout, took.Round(time.Millisecond), resp.Published, resp.WorkLeft)
			})
		}
	})

	// SIGTERM while a publish is in flight (Lambda shuts the environment
	// down): the publish settles, its rows are deleted, no new batch starts
	// and every lease is released by the function before its kill, so
	// peers take the buckets over at once instead of after the 30 s lease.
	// The emulator drops the invocation (as Lambda reports a shutdown to
	// the caller) and kills the process 600 ms after SIGTERM, so leases
	// seen released within 2 s were released by the function's shutdown:
	// a lease left to lapse stays 30 s. That the release comes within the
	// 500 ms phase is outboxlambda's TestShutdown, in simulated time; here
	// the test's polls (reads of the coordination partition on a loaded
	// machine, under -race) would add their own time to the verdict.
	t.Run("SIGTERMMidPublishReleasesTheLeasesWithinTheShutdownPhase", func(t *testing.T) {
		f := newFixture(t)
		producing := make(chan struct{})
		var once sync.Once
		f.slowKafka(t, 1, 100*time.Millisecond, func() { once.Do(func() { close(producing) }) })
		total := f.backlog(t, 160, func(i int) string { return fmt.Sprintf("order-%d", i%16) })
		relay := f.start(t, "relay", map[string]string{"AWS_LAMBDA_FUNCTION_TIMEOUT": "60", outboxconf.EnvBatchSize: "5"})
		answered := make(chan string, 1)
		go func() {
			resp, err := relay.Invoke(context.Background(), f.sample(t, "relay.schedule.json"))
			answered <- fmt.Sprintf("%s %s %v", resp.ErrorType, resp.Payload, err)
		}()
		<-producing
		sigterm := time.Now()
		exited := make(chan time.Duration, 1)
		go func() {
			took, err := relay.Terminate(t.Context())
			if err != nil {
				t.Error(err)
			}
			exited <- took
		}()
		releasedAfter := f.waitReleased(t, 2*time.Second).Sub(sigterm)
		exitAfter := <-exited
		if logs := relay.Output(); !strings.Contains(logs, "relay function shutting down") {
			t.Fatalf("no shutdown in the function's output:\n%s", logs)
		}
		published := map[string]bool{}
		for _, r := range outboxtest.ConsumeAll(t, f.kafka, f.kafka.Topic("orders")) {
			published[string(r.Headers[len(r.Headers)-1].Value)] = true
		}
		stored := f.storedIDs(t)
		for id := range stored {
			if published[id] {
				t.Fatalf("message %s is in Kafka and still in the table: the publish in flight did not settle", id)
			}
		}
		if len(published)+len(stored) != total || len(published) == 0 || len(stored) == 0 {
			t.Fatalf("%d published + %d stored, want all %d, the batches in flight published and the rest stored", len(published), len(stored), total)
		}
		t.Logf("SIGTERM mid-publish: leases released after %v, emulator exited after %v; %d published, %d left; the runtime received %s",
			releasedAfter.Round(time.Millisecond), exitAfter.Round(time.Millisecond), len(published), len(stored), <-answered)
	})

	// A 1 s timeout, and the head of a bucket on a topic the cluster does
	// not have: the publish's metadata re-check (UnknownTopicWait, 1 s) is
	// cut by the stop, the leases are released and the response reaches
	// the runtime before the deadline, which the emulator enforces (Task
	// timed out, which invoke fails on); the poison head stays in the
	// table.
	t.Run("APoisonHeadOnAnUnknownTopicUnderAOneSecondTimeout", func(t *testing.T) {
		f := newFixture(t)
		w := f.writer(t)
		poison, err := outbox.NewMessage("no-such-topic", []byte("order-3"), []byte("v"), outbox.MessageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Enqueue(t.Context(), poison); err != nil {
			t.Fatal(err)
		}
		total := 1 + f.backlog(t, 20, func(i int) string { return fmt.Sprintf("order-%d", i) })
		relay := f.start(t, "relay", map[string]string{"AWS_LAMBDA_FUNCTION_TIMEOUT": "1"})
		// A first invocation starts the environment (init counts against
		// the emulator's timeout, not Lambda's).
		if resp, err := relay.Invoke(t.Context(), []byte(`{}`)); err != nil || resp.ErrorType != "InvalidEventError" {
			t.Fatalf("warm-up: %+v, %v", resp, err)
		}
		start := time.Now()
		resp := invoke[outboxlambda.RelayResponse](t, relay, f.sample(t, "relay.schedule.json"))
		took := time.Since(start)
		if resp.ReleaseSkipped || len(resp.Released) == 0 {
			t.Fatalf("answered after %v: %+v; want the leases released before the 1 s deadline", took, resp)
		}
		f.leasesReleased(t)
		if left := f.pending(t); left != total-resp.Deleted || left == 0 {
			t.Fatalf("%d of %d messages left after %d deleted; the poison head must stay", left, total, resp.Deleted)
		}
		t.Logf("1 s timeout, poison head: answered after %v, %d published, work left %v", took.Round(time.Millisecond), resp.Published, resp.WorkLeft)
	})

	// Bodies that are not relay events at all get the documented
	// InvalidEventError, and the relay writes nothing for them.
	t.Run("BadBodiesAreInvalidEvents", func(t *testing.T) {
		f := newFixture(t)
		relay := f.start(t, "relay", nil)
		for name, body := range map[string][]byte{
			"garbage":            []byte("this is not JSON {"),
			"empty":              {},
			"7 MB":               []byte(`{"trigger":"schedule","pad":"` + strings.Repeat("x", 7<<20) + `"}`),
			"nested 20,000 deep": []byte(strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000)),
			"null":               []byte("null"),
		} {
			resp, err := relay.Invoke(t.Context(), body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.ErrorType != "InvalidEventError" || !strings.HasPrefix(resp.ErrorMessage, "outboxlambda: invalid relay event: ") {
				t.Errorf("%s: the runtime received %s %q, want InvalidEventError", name, resp.ErrorType, truncate(resp.ErrorMessage))
			}
		}
		view, err := f.store(t).ReadCoordination(t.Context())
		if err != nil || len(view.Leases) != 0 || len(view.Relays) != 0 {
			t.Fatalf("the coordination partition holds %+v (%v) after refused bodies; want nothing written", view, err)
		}
	})
}

// slowKafka delays the first n produce requests (every one when n < 0)
// by d on the embedded cluster, calling onProduce first when set. A
// connection's requests are answered in order, so the requests behind a
// delayed one wait for it.
func (f *fixture) slowKafka(t *testing.T, n int, d time.Duration, onProduce func()) {
	t.Helper()
	if f.kafka.Cluster == nil {
		t.Skip("needs the embedded Kafka's fault injection; unset " + outboxconf.EnvKafkaBrokers)
	}
	cl := f.kafka.Cluster
	cl.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		if n == 0 {
			return nil, nil, false
		}
		n--
		cl.KeepControl()
		if onProduce != nil {
			onProduce()
		}
		cl.SleepControl(func() { time.Sleep(d) })
		return nil, nil, false
	})
}

// writer is a writer on the fixture's table.
func (f *fixture) writer(t *testing.T) *outboxddb.Writer {
	t.Helper()
	w, err := outboxddb.NewWriter(f.ddb.Client, outboxddb.WriterOptions{Options: outboxddb.Options{TableName: f.env[outboxconf.EnvTable]}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// store is a store on the fixture's table, for the test's own reads.
func (f *fixture) store(t *testing.T) *outboxddb.Store {
	t.Helper()
	s, err := outboxddb.NewStore(f.ddb.Client, outboxddb.StoreOptions{Options: outboxddb.Options{TableName: f.env[outboxconf.EnvTable]}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// backlog commits n messages to topic orders, message i with key key(i),
// and returns n.
func (f *fixture) backlog(t *testing.T, n int, key func(i int) string) int {
	t.Helper()
	w := f.writer(t)
	for i := 0; i < n; i += outboxlambda.MaxEnqueueMessages {
		var msgs []outbox.Message
		for j := i; j < min(n, i+outboxlambda.MaxEnqueueMessages); j++ {
			m, err := outbox.NewMessage(f.kafka.Topic("orders"), []byte(key(j)), []byte(strconv.Itoa(j)), outbox.MessageOptions{})
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, m)
		}
		if _, err := w.EnqueueBatch(t.Context(), msgs); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// pending counts the messages still in the table.
func (f *fixture) pending(t *testing.T) int {
	t.Helper()
	bl, err := f.store(t).Backlog(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return int(bl.Pending)
}

// storedIDs returns the ids of the messages still in the table.
func (f *fixture) storedIDs(t *testing.T) map[string]bool {
	t.Helper()
	s := f.store(t)
	ids := map[string]bool{}
	for b := range outbox.DefaultBucketCount {
		msgs, err := s.FetchBatch(t.Context(), b, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			ids[m.ID.String()] = true
		}
	}
	return ids
}

// released reports whether no lease item names a holder any more: each
// is free or expired now. A released lease ends at its release; one left
// to lapse would name its holder for another lease duration.
func (f *fixture) released(t *testing.T) (bool, string) {
	t.Helper()
	view, err := f.store(t).ReadCoordination(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(view.Leases) == 0 {
		return false, "no lease item: the relay never claimed"
	}
	for _, l := range view.Leases {
		if l.Owner != "" && !l.Expired(time.Now()) {
			return false, fmt.Sprintf("bucket %d held by %s until %v", l.Bucket, l.Owner, l.ExpiresAt)
		}
	}
	return true, ""
}

// leasesReleased fails t unless every lease was released.
func (f *fixture) leasesReleased(t *testing.T) {
	t.Helper()
	if ok, why := f.released(t); !ok {
		t.Fatalf("leases not released: %s", why)
	}
}

// waitReleased polls the leases until every one is released and returns
// when it saw that, failing t after within.
func (f *fixture) waitReleased(t *testing.T, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, why := f.released(t)
		if ok {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("leases not released within %v: %s", within, why)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

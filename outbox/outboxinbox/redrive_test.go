package outboxinbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// redrive runs outboxinbox.Redrive on k.
func redrive(t *testing.T, k *outboxlocal.Kafka, apply bool, topics ...string) (outboxinbox.RedriveReport, error) {
	t.Helper()
	return outboxinbox.Redrive(t.Context(), outboxinbox.RedriveConfig{ClientOpts: k.ClientOpts(), Topics: topics, Apply: apply, Logger: quiet()})
}

// routes prints a report's rows as "dlq→topic records/produced".
func routes(rep outboxinbox.RedriveReport) string {
	var rows []string
	for _, r := range rep.Routes {
		rows = append(rows, fmt.Sprintf("%s→%s %d/%d", r.DeadLetterTopic, r.Topic, r.Records, r.Produced))
	}
	return strings.Join(rows, ", ")
}

func TestRedrive(t *testing.T) {
	// An operator re-publishes a dead-lettered record to its topic after
	// fixing the cause (with any tool): its marker says dead-lettered, from
	// another delivery, so the record is applied, once.
	t.Run("Consumer_DeadLetteredThenRepublished_AppliedOnce", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders", "orders.dlq")
		var broken atomic.Bool
		broken.Store(true)
		s, h, _ := poisonStream(t, e, k, 3, &broken)
		in := e.inbox(t, "billing", nil)
		stop := running(e.consumer(t, k, in, h, deadLetterAfter(2)))
		waitFor(t, "the record dead-lettered", func() bool { return in.Metrics().Snapshot().DeadLettered == 1 })
		broken.Store(false)
		dlq := outboxtest.ConsumeAll(t, k, "orders.dlq")
		again := &kgo.Record{Topic: "orders", Key: dlq[0].Key, Value: dlq[0].Value, Headers: dlq[0].Headers}
		produce(t, k, []*kgo.Record{again, again})
		waitFor(t, "the re-published record", func() bool { c := in.Metrics().Snapshot(); return c.Applied == 3 && c.Duplicates == 1 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if n := e.applied(t, s.ids[1].String()); n != 1 {
			t.Fatalf("re-published record applied %d times, want once", n)
		}
	})

	// Fail, dead-letter, fix, re-drive: the dry run counts and produces
	// nothing, the re-drive sends the record back to its partition with its
	// headers, the consumer applies it once, and a second re-drive finds
	// nothing new.
	t.Run("FailDeadLetterFixRedrive_AppliedOnce", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders", "orders.dlq", "payments", "payments.dlq")
		var broken atomic.Bool
		broken.Store(true)
		s, h, runs := poisonStream(t, e, k, 3, &broken)
		in := e.inbox(t, "billing", nil)
		stop := running(e.consumer(t, k, in, h, deadLetterAfter(2)))
		waitFor(t, "the record dead-lettered", func() bool { return in.Metrics().Snapshot().DeadLettered == 1 })

		rep, err := redrive(t, k, false)
		if err != nil || rep.Applied || routes(rep) != "orders.dlq→orders 1/0, payments.dlq→ 0/0" {
			t.Fatalf("dry run: %+v, %v; want 1 dead letter of orders.dlq counted, nothing produced", rep, err)
		}
		if n := len(outboxtest.ConsumeAll(t, k, "orders")); n != 3 {
			t.Fatalf("the dry run produced: orders holds %d records", n)
		}
		broken.Store(false)
		if rep, err = redrive(t, k, true); err != nil || routes(rep) != "orders.dlq→orders 1/1, payments.dlq→ 0/0" {
			t.Fatalf("re-drive: %+v, %v; want 1 produced back to orders", rep, err)
		}
		waitFor(t, "the re-driven record", func() bool { return in.Metrics().Snapshot().Applied == 3 })
		if rep, err = redrive(t, k, true); err != nil || routes(rep) != "orders.dlq→ 0/0, payments.dlq→ 0/0" {
			t.Fatalf("second re-drive: %+v, %v; want nothing new", rep, err)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if n := e.applied(t, s.ids[1].String()); n != 1 || runs.Load() != 3 {
			t.Fatalf("re-driven record applied %d times after %d runs, want once after 2 failed runs", n, runs.Load())
		}
		if got, want := e.log(t, "k"), []string{"k:0", "k:2", "k:1"}; !slices.Equal(got, want) {
			t.Fatalf("effects %v, want %v (the re-driven record last)", got, want)
		}
		all := outboxtest.ConsumeAll(t, k, "orders")
		back, orig := all[len(all)-1], all[1]
		if back.Partition != orig.Partition || headerID(outboxinbox.Record{Headers: headers(back)}) != s.ids[1].String() {
			t.Fatalf("re-driven to partition %d with headers %v, want partition %d and the message id", back.Partition, back.Headers, orig.Partition)
		}
		for _, hd := range back.Headers {
			if strings.HasPrefix(hd.Key, "x-spillway-") {
				t.Fatalf("re-driven record keeps the dead-letter header %s", hd.Key)
			}
		}
	})

	// Several dead letters of one key go back in their order, and a key's
	// re-driven effects follow that order.
	t.Run("SeveralDeadLettersOfAKey_KeepTheirOrder", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders", "orders.dlq")
		var s stream
		for i := range 12 {
			s.add("orders", fmt.Sprintf("key-%d", i%3))
		}
		produce(t, k, s.recs)
		var broken atomic.Bool
		broken.Store(true)
		in := e.inbox(t, "billing", nil)
		stop := running(e.consumer(t, k, in, refusingAllBut(e, "key-0", &broken), deadLetterAfter(1)))
		waitFor(t, "8 dead letters", func() bool { return in.Metrics().Snapshot().DeadLettered == 8 })
		broken.Store(false)
		if rep, err := redrive(t, k, true, "orders.dlq"); err != nil || routes(rep) != "orders.dlq→orders 8/8" {
			t.Fatalf("re-drive: %+v, %v", rep, err)
		}
		waitFor(t, "every record", func() bool { return in.Metrics().Snapshot().Applied == 12 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		e.verify(t, &s)
	})

	// Sent to another topic (To) with fewer partitions, a key's dead
	// letters go to the partition where that topic's producers put the
	// key: behind the key's records already there, in their order. key-4
	// came from orders/0 and belongs to orders-v2/1: sent to the source
	// partition orders-v2 also has, it would pass the key's records there.
	t.Run("ToAnotherTopic_EachKeyBehindItsRecordsThere", func(t *testing.T) {
		e := newEnv(t)
		k := outboxtest.NewKafka(t, "orders", "orders.dlq")
		if err := k.CreateTopic(t.Context(), "orders-v2", 2); err != nil {
			t.Fatal(err)
		}
		keys := []string{"key-0", "key-2", "key-4"}
		var s stream
		for i := range 12 {
			s.add("orders", keys[i%3])
		}
		produce(t, k, s.recs)
		var own []*kgo.Record // orders-v2's own records, one a key
		for _, key := range keys {
			own = append(own, &kgo.Record{Topic: "orders-v2", Key: []byte(key), Value: []byte(key + ":own")})
		}
		produce(t, k, own)
		var broken atomic.Bool
		broken.Store(true)
		in := e.inbox(t, "billing", nil)
		stop := running(e.consumer(t, k, in, refusingAllBut(e, "key-0", &broken), deadLetterAfter(1)))
		waitFor(t, "8 dead letters", func() bool { return in.Metrics().Snapshot().DeadLettered == 8 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		rep, err := outboxinbox.Redrive(t.Context(), outboxinbox.RedriveConfig{ClientOpts: k.ClientOpts(), Topics: []string{"orders.dlq"}, To: "orders-v2", Apply: true, Logger: quiet()})
		if err != nil || routes(rep) != "orders.dlq→orders-v2 8/8" {
			t.Fatalf("re-drive to orders-v2: %+v, %v", rep, err)
		}
		source := map[string]int32{}
		for _, r := range outboxtest.ConsumeAll(t, k, "orders") {
			source[string(r.Key)] = r.Partition
		}
		there := map[string]int32{} // the partition of the key's own record
		got := map[string][]string{}
		for _, r := range outboxtest.ConsumeAll(t, k, "orders-v2") {
			key := string(r.Key)
			if _, ok := there[key]; !ok {
				there[key] = r.Partition
			}
			if r.Partition != there[key] {
				t.Fatalf("%s's records on orders-v2 partitions %d and %d; want one", key, there[key], r.Partition)
			}
			got[key] = append(got[key], string(r.Value))
		}
		for _, key := range keys[1:] {
			if want := append([]string{key + ":own"}, s.want[key]...); !slices.Equal(got[key], want) {
				t.Fatalf("%s on orders-v2/%d: %v, want %v", key, there[key], got[key], want)
			}
		}
		if p := source["key-4"]; p >= 2 || p == there["key-4"] {
			t.Fatalf("key-4 came from orders/%d and belongs to orders-v2/%d: the test needs a source partition orders-v2 has, not the key's", p, there["key-4"])
		}
	})

	// To needs one dead-letter topic, other than itself.
	t.Run("ToWithoutOneOtherTopic_Refused", func(t *testing.T) {
		opts := []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}
		for _, topics := range [][]string{nil, {"a.dlq", "b.dlq"}, {"orders"}} {
			_, err := outboxinbox.Redrive(t.Context(), outboxinbox.RedriveConfig{ClientOpts: opts, Topics: topics, To: "orders", Logger: quiet()})
			if err == nil || !strings.Contains(err.Error(), "To orders") {
				t.Errorf("To orders with Topics %v: %v, want a refusal", topics, err)
			}
		}
	})

	// A dead letter naming no topic stops its partition there with an
	// error naming it; a target topic that does not exist fails before
	// anything is produced.
	t.Run("UnroutableOrMissingTarget_ClearErrorNothingLost", func(t *testing.T) {
		k := outboxtest.NewKafka(t, "errors", "gone.dlq")
		id := []kgo.RecordHeader{{Key: outbox.DefaultMessageIDHeaderName, Value: []byte(outbox.NewMessageID().String())}}
		produce(t, k, []*kgo.Record{{Topic: "errors", Key: []byte("k"), Value: []byte("v"), Headers: id}, {Topic: "gone.dlq", Key: []byte("k"), Value: []byte("v"), Headers: id}})
		rep, err := redrive(t, k, true, "errors")
		if err == nil || !strings.Contains(err.Error(), "@0") || !strings.Contains(err.Error(), "name no topic") || routes(rep) != "errors→ 1/0" {
			t.Fatalf("unroutable: %+v, %v; want an error naming the record", rep, err)
		}
		t.Logf("unroutable: %v", err)
		rep, err = redrive(t, k, true, "gone.dlq")
		if err == nil || !strings.Contains(err.Error(), "topic gone") || routes(rep) != "gone.dlq→gone 1/0" {
			t.Fatalf("missing target: %+v, %v; want an error naming topic gone", rep, err)
		}
		t.Logf("missing target: %v", err)
		if rep, _ = redrive(t, k, false, "gone.dlq"); routes(rep) != "gone.dlq→gone 1/0" {
			t.Fatalf("after a failed re-drive the dead letter is still to re-drive: %s", routes(rep))
		}
	})
}

// refusingAllBut is a handler that applies the records of key and, while
// broken is set, refuses every other.
func refusingAllBut(e *env, key string, broken *atomic.Bool) outboxinbox.Handler {
	return func(ctx context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
		if string(rec.Key) != key && broken.Load() {
			return errors.New("downstream refuses")
		}
		e.effect(rec, tx)
		return nil
	}
}

func headers(r *kgo.Record) []outbox.Header {
	hs := make([]outbox.Header, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = outbox.Header{Key: h.Key, Value: h.Value}
	}
	return hs
}

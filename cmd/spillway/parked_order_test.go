package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestParkedOrder(t *testing.T) {
	// ReplayKeepsEachKeysOrder is the new user's scenario: 400
	// messages over 20 keys, 2 % of them to a topic the brokers lack, drained
	// under the quarantine policy; 200 more of the same keys committed while no
	// relay runs; the topic created, `parked replay --all --yes`, a drain.
	// Every message arrives, and each key's first deliveries, as the consumer
	// reads them, follow commit order: the replayed messages go out before the
	// key's messages committed after them.
	t.Run("ReplayKeepsEachKeysOrder", func(t *testing.T) {
		_, _, flags, kafka, w := quarantinedCLI(t)
		orders, late := kafka.Topic("orders"), kafka.Topic("late")
		commit := map[string][]string{} // key → message ids in commit order
		enqueue := func(from, to int) {
			var msgs []outbox.Message
			for i := from; i < to; i++ {
				key := fmt.Sprintf("key-%02d", i%20)
				tp := orders
				if i < 400 && i%50 == 13 {
					tp = late
				}
				m, err := outbox.NewMessage(tp, []byte(key), []byte(fmt.Sprint(i)), outbox.MessageOptions{})
				if err != nil {
					t.Fatal(err)
				}
				msgs = append(msgs, m)
			}
			for len(msgs) > 0 {
				n := min(len(msgs), 100)
				stored, err := w.EnqueueBatch(t.Context(), msgs[:n])
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range stored {
					commit[string(m.Key)] = append(commit[string(m.Key)], m.ID.String())
				}
				msgs = msgs[n:]
			}
		}
		drain := append([]string{"drain", "--brokers", strings.Join(kafka.Brokers, ","), "--timeout", "120s"}, flags...)
		enqueue(0, 400)
		if code, out, errs := cli(t, drain...); code != 0 {
			t.Fatalf("drain: exit %d: %s %s", code, out, errs)
		}
		enqueue(400, 600)
		if err := kafka.CreateTopic(t.Context(), late, 3); err != nil {
			t.Fatal(err)
		}
		if code, out, errs := cli(t, append([]string{"parked", "replay", "--all", "--yes"}, flags...)...); code != 0 {
			t.Fatalf("replay: exit %d: %s %s", code, out, errs)
		}
		if code, out, errs := cli(t, drain...); code != 0 {
			t.Fatalf("second drain: exit %d: %s %s", code, out, errs)
		}
		if code, out, _ := cli(t, append([]string{"parked", "list"}, flags...)...); code != 0 || !strings.Contains(out, "\n0 parked\n") {
			t.Fatalf("parked list after the replay: exit %d:\n%s", code, out)
		}
		checkFirstDeliveries(t, commit, outboxtest.ConsumeAll(t, kafka, orders), outboxtest.ConsumeAll(t, kafka, late))
	})

	// ReplayOfMoreThanATransactionHolds parks a key's 12 messages,
	// the last 11 of 380 KB each (4.2 MB together, over DynamoDB's 4 MB per
	// transaction), and replays them through the CLI: every message arrives in
	// commit order and nothing stays parked. Replay never moves a message
	// between partitions, so no size makes a part of it fail while another
	// part applied. The messages are parked through the store, as a relay
	// parks them, to keep the test short.
	t.Run("ReplayOfMoreThanATransactionHolds", func(t *testing.T) {
		if testing.Short() {
			t.Skip("moves 4 MB through the embedded backends")
		}
		ddb, table, flags, kafka, w := quarantinedCLI(t)
		opts := outboxddb.Options{TableName: table}
		s, err := outboxddb.NewStore(ddb.Client, outboxddb.StoreOptions{Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		orders, late := kafka.Topic("orders"), kafka.Topic("late")
		commit := map[string][]string{}
		var behind int64
		for i := range 12 {
			tp, size := orders, 380<<10
			p := outbox.Parking{Reason: outbox.ParkKeyQuarantined, Behind: behind}
			if i == 0 {
				tp, size, p.Reason = late, 100, outbox.ParkUnknownTopic
			}
			m, err := outbox.NewMessage(tp, []byte("k"), []byte(strings.Repeat("x", size)), outbox.MessageOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if m, err = w.Enqueue(t.Context(), m); err != nil {
				t.Fatal(err)
			}
			commit["k"] = append(commit["k"], m.ID.String())
			p.Bucket, p.Sequence = m.Bucket(), m.Sequence()
			if err := s.Park(t.Context(), p); err != nil {
				t.Fatal(err)
			}
			behind = m.Sequence()
		}
		if err := kafka.CreateTopic(t.Context(), late, 3); err != nil {
			t.Fatal(err)
		}
		drain := append([]string{"drain", "--brokers", strings.Join(kafka.Brokers, ","), "--timeout", "120s"}, flags...)
		// An operator runs the replay again while it reports a failure.
		for range 3 {
			if code, _, _ := cli(t, append([]string{"parked", "replay", "--all", "--yes"}, flags...)...); code != 0 {
				continue
			}
			if code, out, errs := cli(t, drain...); code != 0 {
				t.Fatalf("drain after the replay: exit %d: %s %s", code, out, errs)
			}
			break
		}
		if code, out, _ := cli(t, append([]string{"parked", "list"}, flags...)...); code != 0 || !strings.Contains(out, "\n0 parked\n") {
			t.Fatalf("parked list after the replay: exit %d:\n%s", code, out)
		}
		checkFirstDeliveries(t, commit, outboxtest.ConsumeAll(t, kafka, orders), outboxtest.ConsumeAll(t, kafka, late))
	})
}

// checkFirstDeliveries checks that every committed message was read and
// that each key's first deliveries follow commit order: within a topic by
// offset (one key, one partition), across topics by the records'
// timestamps (equal milliseconds cannot be told apart and pass).
func checkFirstDeliveries(t *testing.T, commit map[string][]string, topics ...[]*kgo.Record) {
	t.Helper()
	type first struct {
		topic  int
		offset int64
		ms     int64
	}
	seen := map[string]first{}
	for ti, recs := range topics {
		for _, r := range recs {
			var id string
			for _, h := range r.Headers {
				if h.Key == outbox.DefaultMessageIDHeaderName {
					id = string(h.Value)
				}
			}
			if _, ok := seen[id]; !ok {
				seen[id] = first{ti, r.Offset, r.Timestamp.UnixMilli()}
			}
		}
	}
	var bad []string
	for key, ids := range commit {
		for i, id := range ids {
			f, ok := seen[id]
			if !ok {
				t.Fatalf("key %s: message #%d (%s) never delivered", key, i, id)
			}
			for j := i + 1; j < len(ids); j++ {
				g := seen[ids[j]]
				if (f.topic == g.topic && g.offset < f.offset) || (f.topic != g.topic && g.ms < f.ms) {
					bad = append(bad, fmt.Sprintf("key %s: #%d first delivered before #%d", key, j, i))
					break
				}
			}
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%d messages first delivered before an earlier one of their key, e.g. %s", len(bad), strings.Join(bad[:min(4, len(bad))], "; "))
	}
}

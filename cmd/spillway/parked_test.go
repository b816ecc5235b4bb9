package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestParked(t *testing.T) {
	// ListReplayDrop quarantines a key with `drain` under
	// SPILLWAY_POISON_POLICY=quarantine, then lists, replays (to a repaired
	// topic) and drops through the CLI.
	t.Run("ListReplayDrop", func(t *testing.T) {
		_, _, flags, kafka, w := quarantinedCLI(t)
		orders := kafka.Topic("orders")
		var ids []string
		for i, topic := range []string{orders, "no-such-topic", orders, orders} {
			key := []byte("k")
			if i == 3 {
				key = nil // keyless: parked alone, never behind k
			}
			m, err := outbox.NewMessage(topic, key, []byte{byte(i)}, outbox.MessageOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if i == 3 {
				m.Topic = "no-such-topic"
			}
			if m, err = w.Enqueue(t.Context(), m); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, m.ID.String())
		}
		drain := append([]string{"drain", "--brokers", strings.Join(kafka.Brokers, ","), "--timeout", "30s"}, flags...)
		if code, out, errs := cli(t, drain...); code != 0 {
			t.Fatalf("drain: exit %d: %s %s", code, out, errs)
		}
		var listed []parkedView
		code, out, errs := cli(t, append([]string{"parked", "list", "--json"}, flags...)...)
		if code != 0 || json.Unmarshal([]byte(out), &listed) != nil {
			t.Fatalf("parked list: exit %d: %s %s", code, out, errs)
		}
		got := map[string]string{}
		for _, p := range listed {
			got[p.MessageID] = p.Reason
		}
		want := map[string]string{ids[1]: "unknown-topic", ids[2]: "key-quarantined", ids[3]: "unknown-topic"}
		if len(got) != 3 || got[ids[1]] != want[ids[1]] || got[ids[2]] != want[ids[2]] || got[ids[3]] != want[ids[3]] {
			t.Fatalf("parked %v, want %v", got, want)
		}
		if code, out, _ := cli(t, append([]string{"parked", "list"}, flags...)...); code != 0 || !strings.Contains(out, "3 parked") || !strings.Contains(out, `"k"`) {
			t.Fatalf("parked list: exit %d:\n%s", code, out)
		}

		// Refusals: no --yes, an unknown id, two selectors.
		// status counts them per bucket, beside the pending messages.
		var st statusView
		code, out, errs = cli(t, append([]string{"status", "--json"}, flags...)...)
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("status: exit %d: %s %s", code, out, errs)
		}
		perBucket := map[int]int64{}
		for _, p := range listed {
			perBucket[p.Bucket]++
		}
		for _, b := range st.Buckets {
			if b.Parked != perBucket[b.Bucket] {
				t.Errorf("status: bucket %d parked %d, want %d", b.Bucket, b.Parked, perBucket[b.Bucket])
			}
		}
		if st.Parked != 3 {
			t.Errorf("status: %d parked, want 3", st.Parked)
		}
		if _, out, _ := cli(t, append([]string{"status"}, flags...)...); !strings.Contains(out, "0 pending, 3 parked") || !strings.Contains(out, "PARKED") {
			t.Errorf("status text lacks the parked counts:\n%s", out)
		}

		for _, c := range []struct {
			args []string
			code int
		}{
			{[]string{"parked", "replay", "--message-id", "5c3e9f10-7b2a-4d6e-8f41-a2b3c4d5e6f7", "--yes"}, 1},
			{[]string{"parked", "replay", "--all", "--key-base64", "aw==", "--yes"}, 2},
			{[]string{"parked", "drop", "--message-id", "5c3e9f10-7b2a-4d6e-8f41-a2b3c4d5e6f7", "--yes"}, 1},
			{[]string{"parked", "drop", "--message-id", ids[3]}, 2},
			{[]string{"parked", "purge"}, 2},
		} {
			if code, _, errs := cli(t, append(c.args, flags...)...); code != c.code || errs == "" {
				t.Errorf("%v: exit %d (%s), want %d and a reason", c.args, code, errs, c.code)
			}
		}

		// Without --yes, a dry run: it shows what it would do and how, exit 0.
		code, out, errs = cli(t, append([]string{"parked", "replay", "--message-id", ids[1]}, flags...)...)
		if code != 0 || !strings.Contains(out, ids[1]) || !strings.Contains(out, ids[2]) || !strings.Contains(out, "dry run") || !strings.Contains(out, "--yes") {
			t.Fatalf("replay without --yes: exit %d: %s %s; want 0, both messages, the dry run and --yes", code, out, errs)
		}
		if code, out, _ := cli(t, append([]string{"parked", "list"}, flags...)...); code != 0 || !strings.Contains(out, "3 parked") {
			t.Fatalf("parked list after a dry run: exit %d:\n%s", code, out)
		}

		// Replaying message 1 takes its key's message 2 along, in order.
		code, out, errs = cli(t, append([]string{"parked", "replay", "--message-id", ids[1], "--topic", orders, "--yes"}, flags...)...)
		if code != 0 || !strings.Contains(out, "marked 2 of 2") {
			t.Fatalf("replay: exit %d: %s %s", code, out, errs)
		}
		if code, out, errs := cli(t, append([]string{"parked", "drop", "--message-id", ids[3], "--yes"}, flags...)...); code != 0 || !strings.Contains(out, "dropped") {
			t.Fatalf("drop: exit %d: %s %s", code, out, errs)
		}
		if code, out, errs := cli(t, drain...); code != 0 {
			t.Fatalf("second drain: exit %d: %s %s", code, out, errs)
		}
		var order []string
		for _, r := range outboxtest.Consume(t, kafka, orders, 3) {
			for _, h := range r.Headers {
				if h.Key == outbox.DefaultMessageIDHeaderName {
					order = append(order, string(h.Value))
				}
			}
		}
		if strings.Join(order, ",") != strings.Join(ids[:3], ",") {
			t.Fatalf("orders received %v, want %v", order, ids[:3])
		}
		if code, out, _ := cli(t, append([]string{"parked", "list"}, flags...)...); code != 0 || !strings.Contains(out, "0 parked") {
			t.Fatalf("parked list after replay and drop: exit %d:\n%s", code, out)
		}
	})
}

// quarantinedCLI is the parked commands' set-up: a table for the CLI, a
// Kafka cluster with the topic "orders", the quarantine policy in the
// environment, and a writer on the table.
func quarantinedCLI(t *testing.T) (*outboxlocal.DynamoDB, string, []string, *outboxlocal.Kafka, *outboxddb.Writer) {
	t.Helper()
	ddb, table, flags := cliTable(t)
	kafka := outboxtest.NewKafka(t, "orders")
	t.Setenv(outboxconf.EnvPoisonPolicy, "quarantine")
	w, err := outboxddb.NewWriter(ddb.Client, outboxddb.WriterOptions{Options: outboxddb.Options{TableName: table}})
	if err != nil {
		t.Fatal(err)
	}
	return ddb, table, flags, kafka, w
}

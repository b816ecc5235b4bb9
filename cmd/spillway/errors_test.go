package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestErrors(t *testing.T) {
	// Every command that reaches the table says a missing one in one sentence
	// naming the table, the endpoint and the fix, not the SDK's
	// ResourceNotFoundException inside an operation error.
	t.Run("AMissingTableNamesTheFix", func(t *testing.T) {
		ddb, _, _ := cliTable(t)
		flags := []string{"--dynamodb-endpoint", ddb.Endpoint, "--table", "no-such-table"}
		want := "table no-such-table not found at " + ddb.Endpoint + "; check --table (or SPILLWAY_TABLE) and --dynamodb-endpoint, or run `spillway create-table`\n"
		for _, args := range [][]string{
			{"status"},
			{"enqueue", "--file", filepath.Join("..", "..", "events", "enqueue.single.json")},
			{"parked", "list"},
			{"drain", "--brokers", "127.0.0.1:1", "--timeout", "5s"},
		} {
			code, out, errs := cli(t, append(args, flags...)...)
			if cmd := strings.Fields(strings.Join(args[:1], " "))[0]; code != 1 || out != "" || errs != "spillway "+cmd+": "+want {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want 1 and %q", args, code, out, errs, want)
			}
		}
	})

	// A request that stops being JSON half-way is refused with the place where
	// it stops, in one line on stderr: no log line, no response body.
	t.Run("EnqueueOfTruncatedJSONSaysWhereItBreaksOnce", func(t *testing.T) {
		_, _, flags := cliTable(t)
		path := filepath.Join(t.TempDir(), "truncated.json")
		if err := os.WriteFile(path, []byte("{\"messages\": [\n  {\"topic\": \"orders\", \"key\": \"a\", \"value\":"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out, errs := cli(t, append([]string{"enqueue", "--file", path}, flags...)...)
		want := "spillway enqueue: request " + path + ": is not valid JSON at line 2, column 43 (byte 57 of 57): unexpected end of JSON input; nothing was written\n"
		if code != 1 || out != "" || errs != want {
			t.Errorf("exit %d, stdout %q, stderr %q; want 1, nothing on stdout and %q", code, out, errs, want)
		}
		// A well-formed request the function refuses: its response on stdout,
		// one line on stderr, no log line.
		code, out, errs = cli(t, append([]string{"enqueue", "--file", filepath.Join("..", "..", "events", "enqueue.missing-topic.json")}, flags...)...)
		if code != 1 || !strings.Contains(out, `"field"`) || errs != "spillway enqueue: request refused; nothing was written\n" {
			t.Errorf("refused request: exit %d, stdout %q, stderr %q", code, out, errs)
		}
	})

	// Enqueueing with a bucket count the table's layout record contradicts
	// is refused in one sentence naming both counts, the table and the fix;
	// without --bucket-count the command takes the recorded count.
	t.Run("EnqueueRefusesAnotherBucketCount", func(t *testing.T) {
		_, table, flags := cliTable(t)
		batch := filepath.Join("..", "..", "events", "enqueue.batch.json")
		code, out, errs := cli(t, append([]string{"enqueue", "--file", batch, "--bucket-count", "4"}, flags...)...)
		want := "spillway enqueue: refused, nothing was written: table " + table + " records bucket count 8 for key prefix OUTBOX but --bucket-count is 4; " +
			"pass --bucket-count 8 or leave it out (a new count needs a new generation: docs/operations.md#changing-the-bucket-count)\n"
		if code != 1 || out != "" || errs != want {
			t.Errorf("enqueue with 4 buckets: exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errs, want)
		}
		t.Setenv(outboxconf.EnvBucketCount, "4")
		code, _, errs = cli(t, append([]string{"enqueue", "--file", batch}, flags...)...)
		if code != 1 || !strings.Contains(errs, "but SPILLWAY_BUCKET_COUNT is 4; set SPILLWAY_BUCKET_COUNT=8 or unset it") {
			t.Errorf("enqueue with SPILLWAY_BUCKET_COUNT=4: exit %d, stderr %q", code, errs)
		}
		t.Setenv(outboxconf.EnvBucketCount, "")
		var st statusView
		if _, out, _ := cli(t, append([]string{"status", "--json"}, flags...)...); json.Unmarshal([]byte(out), &st) != nil || st.Pending != 0 {
			t.Errorf("the refused enqueues wrote something: %s", out)
		}
		if code, out, errs := cli(t, append([]string{"enqueue", "--file", batch}, flags...)...); code != 0 || errs != "" {
			t.Fatalf("enqueue without a count: exit %d: %s %s", code, out, errs)
		}
	})

	// A relay stops at a message written with another bucket count; its
	// error says so in one sentence and never advises a drain with that
	// count, which left lease items beyond the table's count (issue 47).
	t.Run("DrainStoppedByAMessageOfAnotherCountNamesTheFix", func(t *testing.T) {
		ddb, table, flags := cliTable(t)
		kafka := outboxtest.NewKafka(t, "orders", "payments")
		// A writer of 16 buckets that checks nothing (another language's),
		// writing key "order-7" where 16 buckets put it, within the 8.
		k := []byte("order-7")
		b, _ := outbox.ComputeBucket(k, outbox.MessageID{}, 16, nil)
		if b >= 8 {
			t.Fatalf("key %q lands in bucket %d of 16; pick one below 8", k, b)
		}
		putStamped(t, ddb, table, b, k, 16)
		code, _, errs := cli(t, append([]string{"drain", "--brokers", strings.Join(kafka.Brokers, ","), "--timeout", "20s"}, flags...)...)
		if code != 1 || !strings.Contains(errs, "written with bucket count 16 at sequence number 1 but this relay uses 8") ||
			!strings.Contains(errs, "a-message-written-with-another-bucket-count") || strings.Contains(errs, "--bucket-count 16") {
			t.Errorf("drain: exit %d, stderr %q; want 1, the sequence number, both counts, the procedure and no drain advice", code, errs)
		}
		// The fix: restamp, then the drain publishes it where it is.
		code, out, _ := cli(t, append([]string{"layout", "restamp"}, flags...)...)
		if code != 0 || !strings.Contains(out, fmt.Sprintf("the head messages of buckets [%d] were written with bucket count 16", b)) {
			t.Fatalf("restamp dry run: exit %d, %q", code, out)
		}
		if code, out, errs := cli(t, append([]string{"layout", "restamp", "--yes"}, flags...)...); code != 0 || !strings.Contains(out, "restamped 1 message(s) to bucket count 8\n") {
			t.Fatalf("restamp: exit %d, %q %q", code, out, errs)
		}
		if code, out, errs := cli(t, append([]string{"drain", "--brokers", strings.Join(kafka.Brokers, ","), "--timeout", "20s"}, flags...)...); code != 0 || !strings.Contains(out, "published 1") {
			t.Fatalf("drain after the restamp: exit %d, %q %q", code, out, errs)
		}
	})
}

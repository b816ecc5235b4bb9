package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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

	// Enqueueing with a bucket count the table contradicts is refused, as
	// status warns about it, and the refusal names the flag that fixes it.
	t.Run("EnqueueRefusesAnotherBucketCount", func(t *testing.T) {
		_, _, flags := cliTable(t)
		batch := filepath.Join("..", "..", "events", "enqueue.batch.json")
		if code, out, errs := cli(t, append([]string{"enqueue", "--file", batch, "--bucket-count", "8"}, flags...)...); code != 0 {
			t.Fatalf("enqueue with 8 buckets: exit %d: %s %s", code, out, errs)
		}
		code, out, errs := cli(t, append([]string{"enqueue", "--file", batch, "--bucket-count", "4"}, flags...)...)
		for _, want := range []string{"refused, nothing was written", "another bucket count than 4", "written with bucket count 8", "Give --bucket-count the count"} {
			if code != 1 || out != "" || !strings.Contains(errs, want) {
				t.Errorf("enqueue with 4 buckets: exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errs, want)
			}
		}
		if _, out, _ := cli(t, append([]string{"status", "--json", "--bucket-count", "8"}, flags...)...); strings.Contains(out, "warnings") {
			t.Errorf("the refused enqueue wrote something: %s", out)
		}
	})

	// A message written with another bucket count fails the drain with the
	// count that relays it and the procedure that changes a count.
	t.Run("DrainOfAnotherBucketCountNamesTheFix", func(t *testing.T) {
		_, _, flags := cliTable(t)
		kafka := outboxtest.NewKafka(t, "orders", "payments")
		if code, out, errs := cli(t, append([]string{"enqueue", "--file", filepath.Join("..", "..", "events", "enqueue.single.json"), "--bucket-count", "4"}, flags...)...); code != 0 {
			t.Fatalf("enqueue with 4 buckets: exit %d: %s %s", code, out, errs)
		}
		code, _, errs := cli(t, append([]string{"drain", "--brokers", strings.Join(kafka.Brokers, ","), "--timeout", "20s"}, flags...)...)
		if code != 1 || !strings.Contains(errs, "spillway drain --bucket-count 4") || !strings.Contains(errs, "Changing the bucket count") {
			t.Errorf("drain with 8 buckets: exit %d, stderr %q; want 1, the count that relays the message and the procedure", code, errs)
		}
	})
}

package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestRun(t *testing.T) {
	t.Run("DemoRelaysEverythingInOrder", func(t *testing.T) {
		emfPath := filepath.Join(t.TempDir(), "emf.jsonl")
		code, out, errs := cli(t, "run", "--messages", "400", "--keys", "12", "--schedule", "1s", "--json", "--emf", emfPath)
		if code != 0 {
			t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
		}
		var sum runSummary
		if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &sum); err != nil {
			t.Fatalf("summary: %v\n%s", err, out)
		}
		v := sum.Verdict
		if v.Enqueued != 400 || v.Delivered != 400 || v.Missing != 0 || v.OrderBroken != 0 || v.MissingHeader != 0 || sum.Pending != 0 {
			t.Fatalf("verdict %+v pending %d", v, sum.Pending)
		}
		if sum.Relay.JoinedInvocations == 0 || sum.EMFLines == 0 || sum.Requests["BatchWriteItem"] == 0 {
			t.Fatalf("summary %+v", sum)
		}
	})

	t.Run("WithOTelCountsTheExportedSpans", func(t *testing.T) {
		code, out, errs := cli(t, "run", "--messages", "40", "--keys", "4", "--schedule", "1s", "--tracing", "otel", "--json", "--emf", filepath.Join(t.TempDir(), "emf.jsonl"))
		if code != 0 {
			t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
		}
		var sum runSummary
		if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &sum); err != nil {
			t.Fatalf("summary: %v\n%s", err, out)
		}
		// Every relay invocation is a root span; an enqueue request is a root
		// and its enqueue span.
		if sum.Verdict.Delivered != 40 || sum.OTelSpans < sum.Relay.Invocations+2 {
			t.Fatalf("%d spans for %d relay invocations (delivered %d)", sum.OTelSpans, sum.Relay.Invocations, sum.Verdict.Delivered)
		}
	})

	// PrintsProgressOnChangeAndAPlainSummary runs the demo in text mode:
	// a progress line is printed only when it differs from the one before (a
	// figure may come back to an earlier value: the invocations running go 3, 4,
	// 3), the keys are counted as the workload has them, and no Go map syntax
	// reaches the summary.
	t.Run("PrintsProgressOnChangeAndAPlainSummary", func(t *testing.T) {
		code, out, errs := cli(t, "run", "--messages", "120", "--keys", "6", "--schedule", "1s", "--emf", filepath.Join(t.TempDir(), "emf.jsonl"))
		if code != 0 {
			t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
		}
		previous := ""
		for _, line := range strings.Split(out, "\n") {
			// "  3.1s  enqueued ...": the progress lines, without their time.
			if f := strings.Fields(line); len(f) > 1 && strings.HasSuffix(f[0], "s") && (f[1] == "enqueued" || f[1] == "every") {
				rest := strings.Join(f[1:], " ")
				if rest == previous {
					t.Errorf("progress line repeated: %q\n%s", rest, out)
				}
				previous = rest
			}
		}
		for _, want := range []string{"kept for 6 keys", "12 topic/key pairs", "every message published and deleted", "  Query  ", "what they did"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "map[") {
			t.Errorf("Go map syntax in the output:\n%s", out)
		}
	})

	t.Run("CountListIsLargestFirstThenByName", func(t *testing.T) {
		if got, want := countList(map[string]int{"wake": 3, "schedule": 1, "direct": 3}), "direct 3, wake 3, schedule 1"; got != want {
			t.Errorf("countList = %q, want %q", got, want)
		}
		if got := countList(nil); got != "none" {
			t.Errorf("countList(nil) = %q, want none", got)
		}
	})

	// Fewer keys than the demo's producers: every producer needs a key of its
	// own, so the demo runs with fewer producers instead of panicking.
	t.Run("WithFewerKeysThanProducers", func(t *testing.T) {
		code, out, errs := cli(t, "run", "--messages", "10", "--keys", "2", "--schedule", "1s", "--json", "--emf", filepath.Join(t.TempDir(), "emf.jsonl"))
		if code != 0 {
			t.Fatalf("run --keys 2: exit %d\n%s\n%s", code, out, errs)
		}
		var sum runSummary
		if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &sum); err != nil || sum.Verdict.Delivered != 10 || sum.Verdict.KeysChecked != 2 {
			t.Fatalf("summary %+v: %v", sum.Verdict, err)
		}
	})

	// On another DynamoDB (here a second embedded server standing in for
	// DynamoDB Local) the run passes its checks in tables of its own, and
	// deletes them afterwards.
	t.Run("OnAnotherDynamoDB_UsesTablesOfItsOwn_AndDeletesThem", func(t *testing.T) {
		host := outboxtest.NewDynamoDB(t, outboxlocal.WithoutEnvironment())
		code, out, errs := cli(t, "run", "--messages", "40", "--keys", "4", "--schedule", "1s", "--json",
			"--emf", filepath.Join(t.TempDir(), "emf.jsonl"), "--dynamodb-endpoint", host.Endpoint)
		if code != 0 {
			t.Fatalf("run: exit %d\n%s\n%s", code, out, errs)
		}
		var sum runSummary
		if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &sum); err != nil {
			t.Fatalf("summary: %v\n%s", err, out)
		}
		if v := sum.Verdict; v.Enqueued != 40 || v.Delivered != 40 || v.Missing != 0 || v.OrderBroken != 0 || sum.Pending != 0 {
			t.Fatalf("verdict %+v pending %d", v, sum.Pending)
		}
		list, err := host.Client.ListTables(t.Context(), &dynamodb.ListTablesInput{})
		if err != nil || len(list.TableNames) != 0 {
			t.Fatalf("tables left after the run: %v, %v", list.TableNames, err)
		}
	})
}

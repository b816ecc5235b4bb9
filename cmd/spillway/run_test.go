//go:build !spillway.ops

package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunDemoRelaysEverythingInOrder(t *testing.T) {
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
}

func TestRunWithOTelCountsTheExportedSpans(t *testing.T) {
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
}

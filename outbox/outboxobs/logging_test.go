package outboxobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/spillway-dev/spillway/outbox"
)

func records(t *testing.T, out *bytes.Buffer) []map[string]any {
	t.Helper()
	var recs []map[string]any
	dec := json.NewDecoder(out)
	for dec.More() {
		var r map[string]any
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("log output is not JSON lines: %v", err)
		}
		recs = append(recs, r)
	}
	return recs
}

func lambdaCtx(id string) context.Context {
	return lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: id})
}

func TestNewLambdaLogger(t *testing.T) {
	var out bytes.Buffer
	log := NewLambdaLogger(&out, slog.LevelInfo).With(KeyRelayID, "relay-1")
	log.InfoContext(lambdaCtx("req-1"), "relay run finished", KeyBucket, 3)
	log.Info("no context")
	log.DebugContext(lambdaCtx("req-2"), "filtered out")
	log.WarnContext(context.Background(), "plain ctx")

	recs := records(t, &out)
	if len(recs) != 3 {
		t.Fatalf("got %d records, want 3 (debug filtered): %v", len(recs), recs)
	}
	first := recs[0]
	if first["message"] != "relay run finished" || first["level"] != "INFO" || first[RequestIDKey] != "req-1" ||
		first[KeyRelayID] != "relay-1" || first[KeyBucket] != 3.0 {
		t.Fatalf("first record = %v", first)
	}
	if _, err := time.Parse(time.RFC3339Nano, first["timestamp"].(string)); err != nil {
		t.Fatalf("timestamp %v: %v", first["timestamp"], err)
	}
	if _, ok := first["msg"]; ok {
		t.Fatal("slog's default msg key leaked; Lambda's JSON format uses message")
	}
	for _, r := range recs[1:] {
		if _, ok := r[RequestIDKey]; ok {
			t.Fatalf("record without a Lambda context has a request id: %v", r)
		}
	}
	out.Reset()
	NewLambdaLogger(&out, slog.LevelInfo).WithGroup("g").InfoContext(lambdaCtx("req-3"), "grouped", "k", "v")
	if recs := records(t, &out); recs[0]["g"].(map[string]any)[RequestIDKey] != "req-3" {
		t.Fatalf("grouped record = %v", recs[0])
	}
}

func TestLogObserverLevels(t *testing.T) {
	kafka := errors.New("NOT_ENOUGH_REPLICAS")
	tests := []struct {
		e     outbox.Event
		level string
	}{
		{outbox.Event{Kind: outbox.EventRefusedWrite, Bucket: 2, Count: 1, Op: "claim"}, "WARN"},
		{outbox.Event{Kind: outbox.EventLeaseLost, Bucket: -1, Count: 3, Op: "keep refused"}, "WARN"},
		{outbox.Event{Kind: outbox.EventReleaseSkipped, Bucket: -1, Count: 4}, "WARN"},
		{outbox.Event{Kind: outbox.EventThrottle, Bucket: 1, Count: 1, Err: errors.New("ProvisionedThroughputExceeded")}, "WARN"},
		{outbox.Event{Kind: outbox.EventEnqueueRejected, Bucket: -1, Count: 1, Err: outbox.ErrInvalidMessage}, "WARN"},
		{outbox.Event{Kind: outbox.EventPublish, Bucket: 5, Count: 1, Err: kafka}, "ERROR"},
		{outbox.Event{Kind: outbox.EventRound, Bucket: -1, Err: errors.New("heartbeat: timeout")}, "ERROR"},
		{outbox.Event{Kind: outbox.EventWakeUpSent, Bucket: -1, Count: 2, Err: errors.New("invoke: denied")}, "ERROR"},
		{outbox.Event{Kind: outbox.EventPublish, Bucket: 6, Err: outbox.ErrLeaseLost}, "WARN"},
		{outbox.Event{Kind: outbox.EventBacklog, Bucket: -1, Err: errors.New("query timeout")}, "WARN"},
		{outbox.Event{Kind: outbox.EventPublish, Bucket: 6, Err: context.Canceled}, "DEBUG"},
		{outbox.Event{Kind: outbox.EventBackoff, Bucket: 5, Duration: time.Second, Err: kafka}, "DEBUG"},
		{outbox.Event{Kind: outbox.EventPublish, Bucket: 0, Count: 100}, "DEBUG"},
		{outbox.Event{Kind: outbox.EventEnqueue, Bucket: 0, Count: 1}, "DEBUG"},
		{outbox.Event{Kind: outbox.EventStop, Bucket: -1, Count: 40, Op: "drained"}, "DEBUG"},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		obs := NewLogObserver(NewLambdaLogger(&out, slog.LevelDebug))
		obs.Observe(tt.e)
		recs := records(t, &out)
		if len(recs) != 1 {
			t.Fatalf("%s: %d records", tt.e.Kind, len(recs))
		}
		if recs[0]["level"] != tt.level {
			t.Errorf("%s (err %v): level %v, want %s", tt.e.Kind, tt.e.Err, recs[0]["level"], tt.level)
		}
	}
}

func TestLogObserverRecord(t *testing.T) {
	var out bytes.Buffer
	obs := NewLogObserver(NewLambdaLogger(&out, slog.LevelDebug))
	obs.Bind(lambdaCtx("req-9"))
	obs.Observe(outbox.Event{Kind: outbox.EventPublish, RelayID: "relay-1", Bucket: 4, Count: 2,
		Latencies: []time.Duration{3 * time.Millisecond, 40 * time.Millisecond}, Origins: []string{"1-5759e988-bd862e3fe1be46a994272793"},
		Err: errors.New("NOT_ENOUGH_REPLICAS")})
	obs.Observe(outbox.Event{Kind: outbox.EventClaim, Bucket: -1, Count: 2})
	recs := records(t, &out)
	want := map[string]any{
		"message": "publish", KeyEvent: "publish", KeyRelayID: "relay-1", KeyBucket: 4.0, KeyCount: 2.0,
		KeyLatencyMax: float64(40 * time.Millisecond), KeyError: "NOT_ENOUGH_REPLICAS", RequestIDKey: "req-9",
	}
	for k, v := range want {
		if recs[0][k] != v {
			t.Errorf("%s = %v, want %v", k, recs[0][k], v)
		}
	}
	if o := recs[0][KeyOrigins].([]any); len(o) != 1 {
		t.Errorf("origins = %v", o)
	}
	if _, ok := recs[1][KeyBucket]; ok {
		t.Errorf("an event of no single bucket logged bucket %v", recs[1][KeyBucket])
	}
}

// TestLogObserverNothingRoutineAtInfo: at Info, successful events (per
// batch and per message) produce nothing; only the five warning kinds show.
func TestLogObserverNothingRoutineAtInfo(t *testing.T) {
	var out bytes.Buffer
	obs := NewLogObserver(NewLambdaLogger(&out, slog.LevelInfo))
	for k := outbox.EventRound; k <= outbox.EventOwned; k++ {
		obs.Observe(outbox.Event{Kind: k, Bucket: 0, Count: 1})
	}
	got := map[string]bool{}
	for _, r := range records(t, &out) {
		if r["level"] != "WARN" {
			t.Fatalf("routine event logged at %v: %v", r["level"], r)
		}
		got[r[KeyEvent].(string)] = true
	}
	for _, k := range []outbox.EventKind{outbox.EventRefusedWrite, outbox.EventThrottle, outbox.EventLeaseLost,
		outbox.EventReleaseSkipped, outbox.EventEnqueueRejected} {
		if !got[k.String()] {
			t.Errorf("%s was not logged at Info", k)
		}
	}
	if len(got) != 5 {
		t.Fatalf("logged %v, want only the five warning kinds", got)
	}
}

package xray

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	awsxray "github.com/aws/aws-xray-sdk-go/xray"
	"github.com/aws/aws-xray-sdk-go/xraylog"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// The SDK's configuration is process-wide, so these tests do not run in
// parallel; each points the emitter at its own loopback "daemon".

func TestMain(m *testing.M) {
	awsxray.SetLogger(xraylog.NewDefaultLogger(io.Discard, xraylog.LogLevelError))
	os.Exit(m.Run())
}

// next returns the next document the SDK sent, decoded, and its body.
func next(t *testing.T, d *outboxtest.XRayDaemon) (doc map[string]any, raw []byte) {
	t.Helper()
	raw = d.Next(t)
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("document is not JSON: %v\n%s", err, raw)
	}
	return doc, raw
}

func subsegments(t *testing.T, doc map[string]any) []map[string]any {
	t.Helper()
	raw, _ := doc["subsegments"].([]any)
	out := make([]map[string]any, len(raw))
	for i, s := range raw {
		out[i] = s.(map[string]any)
	}
	return out
}

func names(segs []map[string]any) []string {
	out := make([]string, len(segs))
	for i, s := range segs {
		out[i] = s["name"].(string)
	}
	return out
}

var (
	traceIDPattern = regexp.MustCompile(`^1-[0-9a-f]{8}-[0-9a-f]{24}$`)
	spanIDPattern  = regexp.MustCompile(`^[0-9a-f]{16}$`)
)

// relayWork opens the spans one relay run opens, in the relay's shape:
// acquire, drain of bucket 3 holding publish (failed) and delete, release.
func relayWork(ctx context.Context, tracer outbox.Tracer, publishErr error) {
	_, acquire := tracer.Start(ctx, outbox.SpanAcquire)
	acquire.Annotate(outbox.AnnotationRelayID, "relay-1")
	acquire.Annotate(outbox.AnnotationOutcome, "claimed")
	acquire.End(nil)

	dctx, drain := tracer.Start(ctx, outbox.SpanDrain)
	drain.Annotate(outbox.AnnotationBucket, 3)
	_, publish := tracer.Start(dctx, outbox.SpanPublish)
	publish.Annotate(outbox.AnnotationMessages, int64(5))
	publish.Metadata(outbox.MetadataOrigins, []string{"1-5759e988-bd862e3fe1be46a994272793"})
	publish.End(publishErr)
	_, del := tracer.Start(dctx, outbox.SpanDelete)
	del.Annotate(outbox.AnnotationMessages, 4)
	del.End(nil)
	drain.End(nil)

	_, release := tracer.Start(ctx, outbox.SpanRelease)
	release.Annotate(outbox.AnnotationOutcome, time.Duration(1500)*time.Millisecond)
	release.End(nil)
}

func TestTracer(t *testing.T) {
	t.Run("UnderRootSegment", func(t *testing.T) {
		d := outboxtest.NewXRayDaemon(t)
		ctx, end := Enable(context.Background(), "spillway-cli")
		relayWork(ctx, Tracer{}, errors.New("NOT_ENOUGH_REPLICAS"))
		end(nil)

		root, raw := next(t, d)
		t.Logf("root segment document: %s", raw)
		if root["name"] != "spillway-cli" || !traceIDPattern.MatchString(root["trace_id"].(string)) || !spanIDPattern.MatchString(root["id"].(string)) {
			t.Fatalf("root segment: name %v, trace_id %v, id %v", root["name"], root["trace_id"], root["id"])
		}
		if _, ok := root["parent_id"]; ok {
			t.Fatalf("root segment has a parent: %v", root["parent_id"])
		}
		top := subsegments(t, root)
		if got := strings.Join(names(top), ","); got != "acquire,drain,release" {
			t.Fatalf("top-level subsegments = %s, want acquire,drain,release", got)
		}
		for _, s := range top {
			if s["parent_id"] != root["id"] || s["trace_id"] != root["trace_id"] {
				t.Fatalf("%s: parent_id %v, trace_id %v; want the root segment's", s["name"], s["parent_id"], s["trace_id"])
			}
		}
		acquire, drain, release := top[0], top[1], top[2]
		if ann := acquire["annotations"].(map[string]any); ann["relay_id"] != "relay-1" || ann["outcome"] != "claimed" {
			t.Fatalf("acquire annotations = %v", ann)
		}
		if ann := release["annotations"].(map[string]any); ann["outcome"] != "1.5s" {
			t.Fatalf("release annotations = %v (a Duration is indexed as its text)", ann)
		}
		if drain["annotations"].(map[string]any)["bucket"] != 3.0 {
			t.Fatalf("drain annotations = %v", drain["annotations"])
		}
		nested := subsegments(t, drain)
		if got := strings.Join(names(nested), ","); got != "publish,delete" {
			t.Fatalf("drain holds %s, want publish,delete", got)
		}
		publish, del := nested[0], nested[1]
		if publish["annotations"].(map[string]any)["messages"] != 5.0 || del["annotations"].(map[string]any)["messages"] != 4.0 {
			t.Fatalf("messages annotations: publish %v, delete %v", publish["annotations"], del["annotations"])
		}
		origins := publish["metadata"].(map[string]any)[MetadataNamespace].(map[string]any)[outbox.MetadataOrigins].([]any)
		if len(origins) != 1 || origins[0] != "1-5759e988-bd862e3fe1be46a994272793" {
			t.Fatalf("publish metadata origins = %v", origins)
		}
		if publish["fault"] != true {
			t.Fatalf("failed publish not marked as a fault: %v", publish)
		}
		exc := publish["cause"].(map[string]any)["exceptions"].([]any)[0].(map[string]any)
		if exc["message"] != "NOT_ENOUGH_REPLICAS" {
			t.Fatalf("publish exception = %v", exc)
		}
		for _, s := range []map[string]any{acquire, drain, release, del} {
			if s["fault"] != nil || s["in_progress"] != nil {
				t.Fatalf("%s: fault %v, in_progress %v", s["name"], s["fault"], s["in_progress"])
			}
		}
		ids := map[string]bool{root["id"].(string): true}
		for _, s := range append(top, nested...) {
			id := s["id"].(string)
			if !spanIDPattern.MatchString(id) || ids[id] {
				t.Fatalf("subsegment %s id %q is malformed or repeated", s["name"], id)
			}
			ids[id] = true
		}
	})

	t.Run("UnderLambdaFacade", func(t *testing.T) {
		d := outboxtest.NewXRayDaemon(t)
		const root, parent = "1-5759e988-bd862e3fe1be46a994272793", "53995c3f42cd8ad8"
		//lint:ignore SA1029 aws-lambda-go stores the trace header under this string key.
		ctx := context.WithValue(context.Background(), awsxray.LambdaTraceHeaderKey, "Root="+root+";Parent="+parent+";Sampled=1")
		relayWork(ctx, Tracer{}, nil)

		// Each top-level span is a subsegment of the function's facade segment
		// and is sent when it closes; nested spans travel inside their parent.
		var got []map[string]any
		for range 3 {
			doc, raw := next(t, d)
			t.Logf("Lambda subsegment document: %s", raw)
			got = append(got, doc)
		}
		if n := strings.Join(names(got), ","); n != "acquire,drain,release" {
			t.Fatalf("documents = %s, want acquire,drain,release", n)
		}
		for _, doc := range got {
			if doc["type"] != "subsegment" || doc["trace_id"] != root || doc["parent_id"] != parent {
				t.Fatalf("%s: type %v, trace_id %v, parent_id %v; want a subsegment of %s/%s",
					doc["name"], doc["type"], doc["trace_id"], doc["parent_id"], root, parent)
			}
		}
		if n := strings.Join(names(subsegments(t, got[1])), ","); n != "publish,delete" {
			t.Fatalf("drain holds %s, want publish,delete", n)
		}
	})

	t.Run("IsOffWithoutSegment", func(t *testing.T) {
		d := outboxtest.NewXRayDaemon(t)
		var logs bytes.Buffer
		awsxray.SetLogger(xraylog.NewDefaultLogger(&logs, xraylog.LogLevelDebug))
		t.Cleanup(func() { awsxray.SetLogger(xraylog.NewDefaultLogger(io.Discard, xraylog.LogLevelError)) })

		ctx := context.Background()
		if Active(ctx) {
			t.Fatal("a bare context reports tracing on")
		}
		//lint:ignore SA1029 aws-lambda-go stores the trace header under this string key.
		untraced := context.WithValue(ctx, awsxray.LambdaTraceHeaderKey, "")
		if Active(untraced) {
			t.Fatal("an empty Lambda trace header (active tracing off) reports tracing on")
		}
		sctx, span := Tracer{}.Start(ctx, outbox.SpanDrain)
		if sctx != ctx {
			t.Fatal("an inactive Start changed the context")
		}
		span.Annotate(outbox.AnnotationBucket, 1)
		span.End(errors.New("ignored"))
		relayWork(untraced, Tracer{}, nil)

		// Sentinel: the first document the daemon receives must be this one,
		// proving the untraced work above sent nothing.
		sctx, end := Enable(ctx, "sentinel")
		if !Active(sctx) {
			t.Fatal("Enable did not turn tracing on")
		}
		end(nil)
		if doc, _ := next(t, d); doc["name"] != "sentinel" {
			t.Fatalf("first document is %v, want the sentinel", doc["name"])
		}
		if strings.Contains(logs.String(), "segment cannot be found") {
			t.Fatalf("inactive tracing logged a missing context:\n%s", logs.String())
		}
	})

	t.Run("AnnotationValue", func(t *testing.T) {
		type named string
		tests := []struct {
			in, want any
		}{
			{"s", "s"}, {true, true}, {7, 7}, {uint(7), uint(7)}, {1.5, 1.5}, {float32(2), float32(2)},
			{int8(-1), -1}, {int16(2), 2}, {int32(3), 3}, {int64(4), 4}, {uint8(5), uint(5)}, {uint16(6), uint(6)},
			{uint32(7), uint(7)}, {uint64(8), uint(8)}, {errors.New("e"), "e"}, {2 * time.Second, "2s"},
			{named("n"), "n"}, {[]int{1}, "[1]"},
		}
		for _, tt := range tests {
			if got := annotationValue(tt.in); got != tt.want {
				t.Errorf("annotationValue(%#v) = %#v, want %#v", tt.in, got, tt.want)
			}
		}
	})
}

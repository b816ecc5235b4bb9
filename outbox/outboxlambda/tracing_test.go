package outboxlambda

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/spillway-dev/spillway/internal/lambdalocal"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// otelFixture is both functions built as their mains build them
// (NewRelayFromEnv, NewEnqueueFromEnv) with SPILLWAY_TRACING=otel, on the
// embedded backends, exporting to an in-process OTLP/HTTP receiver; a Go
// writer outside the functions enqueues with its own trace context.
type otelFixture struct {
	recv    *outboxlocal.OTLPReceiver
	kafka   *outboxlocal.Kafka
	cfg     Config
	relay   *RelayHandler
	enqueue *EnqueueHandler
	writer  *outboxddb.Writer
	seen    int // spans already checked
}

func newOTelFixture(t *testing.T) *otelFixture { return newTracingFixture(t, outboxconf.TracingOTel) }

// newTracingFixture builds the fixture with SPILLWAY_TRACING=mode.
func newTracingFixture(t *testing.T, mode string) *otelFixture {
	t.Helper()
	recv, err := outboxlocal.StartOTLPReceiver()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = recv.Close() })
	api, err := lambdalocal.StartInvokeAPI()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = api.Close() })
	ddb := outboxtest.NewDynamoDB(t)
	f := &otelFixture{recv: recv, kafka: outboxtest.NewKafka(t, "orders")}
	for k, v := range map[string]string{
		outboxconf.EnvTable:            outboxtest.CreateTable(t, ddb),
		outboxconf.EnvDynamoDBEndpoint: ddb.Endpoint,
		outboxconf.EnvKafkaBrokers:     strings.Join(f.kafka.Brokers, ","),
		outboxconf.EnvRelayFunction:    "outbox-relay",
		outboxconf.EnvIdleTimeout:      "200ms",
		outboxconf.EnvPollInterval:     "50ms",
		outboxconf.EnvTracing:          mode,
		outboxconf.EnvOTelEndpoint:     recv.URL,
		// Only the flush at the end of an invocation exports.
		"OTEL_BSP_SCHEDULE_DELAY":   "3600000",
		"AWS_ENDPOINT_URL_LAMBDA":   api.URL,
		"AWS_REGION":                "us-east-1",
		"AWS_ACCESS_KEY_ID":         "spillway",
		"AWS_SECRET_ACCESS_KEY":     "spillway",
		"AWS_EC2_METADATA_DISABLED": "true",
		EnvTraceID:                  "",
	} {
		t.Setenv(k, v)
	}
	named := func(fn string) func(string) string {
		return func(k string) string {
			if k == EnvFunctionName {
				return fn
			}
			return os.Getenv(k)
		}
	}
	log := testLogger(t)
	if f.relay, err = NewRelayFromEnv(t.Context(), named("outbox-relay"), log); err != nil {
		t.Fatal(err)
	}
	if f.enqueue, err = NewEnqueueFromEnv(t.Context(), named("outbox-enqueue"), log); err != nil {
		t.Fatal(err)
	}
	if f.cfg, err = LoadConfig(os.Getenv); err != nil {
		t.Fatal(err)
	}
	if f.writer, err = outboxddb.NewWriter(ddb.Client, f.cfg.WriterOptions()); err != nil {
		t.Fatal(err)
	}
	return f
}

// Trace contexts of writers outside the functions: one W3C, one X-Ray.
const (
	w3cWriter  = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	xrayWriter = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
)

// writerMessages enqueues one message per writer trace context and returns
// their buckets.
func (f *otelFixture) writerMessages(t *testing.T) []int {
	t.Helper()
	var buckets []int
	for i, tc := range []outbox.TraceContext{{TraceParent: w3cWriter}, {AmznTraceID: xrayWriter}} {
		m, err := f.writer.Enqueue(t.Context(), outbox.Message{ID: outbox.NewMessageID(), Topic: f.kafka.Topic("orders"),
			Key: []byte(fmt.Sprintf("writer-%d", i)), Value: []byte("v"), Headers: outbox.EncodeHeaders(tc.Headers())})
		if err != nil {
			t.Fatal(err)
		}
		buckets = append(buckets, m.Bucket())
	}
	return buckets
}

// wakeFor is a wake-up event for buckets.
func wakeFor(buckets []int) json.RawMessage {
	buckets = slices.Clone(buckets)
	slices.Sort(buckets)
	b, _ := json.Marshal(map[string]any{"trigger": "wake", "buckets": slices.Compact(buckets), "hop": 0, "join": false})
	return b
}

// invocationCtx is the ctx aws-lambda-go hands a handler when the Lambda
// segment of trace header is active.
func invocationCtx(t *testing.T, fn, requestID, header string) context.Context {
	//lint:ignore SA1029 the key is aws-lambda-go's, a plain string
	ctx := context.WithValue(t.Context(), "x-amzn-trace-id", header)
	return lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{
		AwsRequestID: requestID, InvokedFunctionArn: "arn:aws:lambda:us-east-1:123456789012:function:" + fn})
}

// exported returns the spans received since the last call, and checks
// that they form one tree of the invocation whose Lambda trace header is
// header: every span is in its trace, the root is a server span named fn
// whose parent is the Lambda segment, and every other span's parent was
// exported with it. Spans of an earlier invocation arriving now would have
// ended after that invocation returned, and been lost at a freeze.
func (f *otelFixture) exported(t *testing.T, fn, header string) (root *tracepb.Span, spans []*tracepb.Span) {
	t.Helper()
	all := f.recv.Spans()
	spans, f.seen = all[f.seen:], len(all)
	traceID, parent := headerIDs(t, header)
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		if got := hex.EncodeToString(s.TraceId); got != traceID {
			t.Fatalf("span %q of trace %s exported with the invocation of trace %s", s.Name, got, traceID)
		}
		byID[hex.EncodeToString(s.SpanId)] = s
	}
	for _, s := range spans {
		p := hex.EncodeToString(s.ParentSpanId)
		if p == parent {
			if root != nil {
				t.Fatalf("two roots: %q and %q", root.Name, s.Name)
			}
			root = s
			continue
		}
		if byID[p] == nil {
			t.Fatalf("span %q has parent %s, which was not exported", s.Name, p)
		}
	}
	if root == nil || root.Name != fn || root.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Fatalf("no server root span %q under the Lambda segment %s: %v", fn, parent, names(spans))
	}
	if attrs(root)["faas.invocation_id"] == nil {
		t.Errorf("root span lacks faas.invocation_id: %v", attrs(root))
	}
	return root, spans
}

func headerIDs(t *testing.T, header string) (traceID, parent string) {
	t.Helper()
	var span linkRecorder
	outbox.LinkOrigins(&span, []outbox.Message{{Headers: outbox.EncodeHeaders([]outbox.Header{{Key: outbox.HeaderAmznTraceID, Value: []byte(header)}})}})
	if len(span.links) != 1 {
		t.Fatalf("bad test header %q", header)
	}
	return span.links[0].TraceID, span.links[0].SpanID
}

// linkRecorder is a span that keeps the links the relay would attach.
type linkRecorder struct {
	links []outbox.TraceLink
}

func (*linkRecorder) Annotate(string, any)            {}
func (*linkRecorder) Metadata(string, any)            {}
func (*linkRecorder) End(error)                       {}
func (r *linkRecorder) Link(links []outbox.TraceLink) { r.links = append(r.links, links...) }

func names(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func named(spans []*tracepb.Span, name string) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attrs(s *tracepb.Span) map[string]any {
	out := map[string]any{}
	for _, kv := range s.Attributes {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.Key] = v.IntValue
		case *commonpb.AnyValue_BoolValue:
			out[kv.Key] = v.BoolValue
		default:
			out[kv.Key] = fmt.Sprint(kv.Value)
		}
	}
	return out
}

func childOf(s, parent *tracepb.Span) bool { return string(s.ParentSpanId) == string(parent.SpanId) }

func TestTracing(t *testing.T) {
	// OTelTracesARelayRunAndAnEnqueue: the spans of an enqueue and of a
	// relay run reach an OTLP/HTTP receiver before each invocation returns,
	// with the X-Ray subsegments' names and attributes, in one tree under the
	// Lambda segment, and the publish spans link to the writers' spans — a W3C
	// traceparent, an X-Ray header, and the enqueue function's own span.
	t.Run("OTelTracesARelayRunAndAnEnqueue", func(t *testing.T) {
		f := newOTelFixture(t)
		const (
			enqHeader  = "Root=1-6a1b2c3d-0123456789abcdef01234567;Parent=1111111111111111;Sampled=1"
			relHeader  = "Root=1-6a1b2c3e-0123456789abcdef01234568;Parent=2222222222222222;Sampled=1"
			enq2Header = "Root=1-6a1b2c3f-0123456789abcdef01234569;Parent=3333333333333333;Sampled=1"
			rel2Header = "Root=1-6a1b2c40-0123456789abcdef0123456a;Parent=4444444444444444;Sampled=1"
		)
		buckets := f.writerMessages(t)

		// The enqueue function: root, enqueue span, its DynamoDB write.
		resp, err := f.enqueue.Handle(invocationCtx(t, "outbox-enqueue", "req-enqueue", enqHeader),
			json.RawMessage(fmt.Sprintf(`{"topic":%q,"key":"function","value":"v"}`, f.kafka.Topic("orders"))))
		if err != nil || resp.Error != "" {
			t.Fatalf("enqueue: %+v %v", resp, err)
		}
		buckets = append(buckets, resp.Messages[0].Bucket)
		root, spans := f.exported(t, "outbox-enqueue", enqHeader)
		enq := named(spans, outbox.SpanEnqueue)
		if len(enq) != 1 || !childOf(enq[0], root) {
			t.Fatalf("enqueue spans %v, want one under the root", names(spans))
		}
		if a := attrs(enq[0]); a["messages"] != int64(1) || a["outcome"] != "ok" {
			t.Errorf("enqueue span attributes %v", a)
		}
		put := named(spans, "DynamoDB.PutItem")
		if len(put) != 1 || !childOf(put[0], enq[0]) || attrs(put[0])["cloud.region"] != "us-east-1" {
			t.Fatalf("the PutItem call is not traced under the enqueue span: %v", names(spans))
		}
		enqSpanID := hex.EncodeToString(enq[0].SpanId)

		// The relay run.
		rresp, err := f.relay.Handle(invocationCtx(t, "outbox-relay", "req-relay", relHeader), wakeFor(buckets))
		if err != nil || rresp.Published != 3 {
			t.Fatalf("relay: %+v %v", rresp, err)
		}
		root, spans = f.exported(t, "outbox-relay", relHeader)
		for _, name := range []string{outbox.SpanAcquire, outbox.SpanDrain, outbox.SpanPublish, outbox.SpanDelete, outbox.SpanRelease} {
			if len(named(spans, name)) == 0 {
				t.Fatalf("no %s span among %v", name, names(spans))
			}
		}
		for _, s := range named(spans, outbox.SpanAcquire) {
			if !childOf(s, root) || attrs(s)["relay_id"] != rresp.RelayID {
				t.Errorf("acquire span: parent %x, attributes %v", s.ParentSpanId, attrs(s))
			}
		}
		published := int64(0)
		links := map[string]bool{}
		for _, s := range named(spans, outbox.SpanPublish) {
			a := attrs(s)
			if a["outcome"] != "ok" || a["bucket"] == nil || s.Kind != tracepb.Span_SPAN_KIND_PRODUCER {
				t.Errorf("publish span attributes %v, kind %v", a, s.Kind)
			}
			published += a["messages"].(int64)
			for _, l := range s.Links {
				links[hex.EncodeToString(l.TraceId)+"/"+hex.EncodeToString(l.SpanId)] = true
			}
		}
		if published != 3 {
			t.Errorf("publish spans count %d messages, want 3", published)
		}
		wantLinks := map[string]bool{
			"4bf92f3577b34da6a3ce929d0e0e4736/00f067aa0ba902b7":  true,
			"5759e988bd862e3fe1be46a994272793/53995c3f42cd8ad8":  true,
			hex.EncodeToString(enq[0].TraceId) + "/" + enqSpanID: true,
		}
		if fmt.Sprint(links) != fmt.Sprint(wantLinks) {
			t.Errorf("publish links %v, want %v", links, wantLinks)
		}
		for _, s := range named(spans, outbox.SpanDrain) {
			if a := attrs(s); a["relay_id"] != rresp.RelayID || a["bucket"] == nil {
				t.Errorf("drain span attributes %v", a)
			}
		}
		if len(named(spans, "DynamoDB.Query")) == 0 || len(named(spans, "DynamoDB.TransactWriteItems"))+len(named(spans, "DynamoDB.BatchWriteItem")) == 0 {
			t.Errorf("the relay's DynamoDB calls are not traced: %v", names(spans))
		}

		// Records keep the writers' headers.
		recs := outboxtest.Consume(t, f.kafka, f.kafka.Topic("orders"), 3)
		var kinds []string
		for _, r := range recs {
			for _, h := range r.Headers {
				if h.Key == outbox.HeaderTraceParent || h.Key == outbox.HeaderAmznTraceID {
					kinds = append(kinds, h.Key+"="+string(h.Value))
				}
			}
		}
		for _, want := range []string{"traceparent=" + w3cWriter, "X-Amzn-Trace-Id=" + xrayWriter,
			"traceparent=00-" + hex.EncodeToString(enq[0].TraceId) + "-" + enqSpanID + "-01"} {
			if !slices.Contains(kinds, want) {
				t.Errorf("no record carries %s: %v", want, kinds)
			}
		}

		// Later invocations export only their own spans: nothing of the
		// earlier ones ended after they returned.
		refused, err := f.enqueue.Handle(invocationCtx(t, "outbox-enqueue", "req-enqueue-2", enq2Header), json.RawMessage(`{"topic":"bad topic","value":"v"}`))
		if err != nil || refused.Error == "" {
			t.Fatalf("refused enqueue: %+v %v", refused, err)
		}
		_, spans = f.exported(t, "outbox-enqueue", enq2Header)
		if enq := named(spans, outbox.SpanEnqueue); len(enq) != 1 || attrs(enq[0])["outcome"] != "refused" {
			t.Errorf("refused request's spans %v", names(spans))
		}
		if _, err := f.relay.Handle(invocationCtx(t, "outbox-relay", "req-relay-2", rel2Header), json.RawMessage(`{"trigger":"schedule"}`)); err != nil {
			t.Fatal(err)
		}
		f.exported(t, "outbox-relay", rel2Header)
	})
}

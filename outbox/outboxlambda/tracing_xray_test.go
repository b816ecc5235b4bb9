//go:build !spillway.noxray

package outboxlambda

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// xraySegment is the part of a (sub)segment document the test reads.
type xraySegment struct {
	Name        string                    `json:"name"`
	ID          string                    `json:"id"`
	TraceID     string                    `json:"trace_id"`
	ParentID    string                    `json:"parent_id"`
	Annotations map[string]any            `json:"annotations"`
	Metadata    map[string]map[string]any `json:"metadata"`
	AWS         map[string]any            `json:"aws"`
	Subsegments []*xraySegment            `json:"subsegments"`
}

// sent decodes the documents the SDK has sent.
func sent(t *testing.T, d *outboxtest.XRayDaemon) []*xraySegment {
	t.Helper()
	var out []*xraySegment
	for _, body := range d.Sent(t) {
		var s xraySegment
		if err := json.Unmarshal(body, &s); err != nil {
			t.Fatalf("document %s: %v", body, err)
		}
		out = append(out, &s)
	}
	return out
}

// flatten lists every (sub)segment of docs, depth first.
func flatten(docs []*xraySegment) []*xraySegment {
	var out []*xraySegment
	for _, d := range docs {
		out = append(out, d)
		out = append(out, flatten(d.Subsegments)...)
	}
	return out
}

func xrayNamed(segs []*xraySegment, name string) []*xraySegment {
	var out []*xraySegment
	for _, s := range segs {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func TestTracingXRay(t *testing.T) {
	// XRayTracesARelayRunAndAnEnqueue is the X-Ray mode's counterpart of
	// TestTracing/OTelTracesARelayRunAndAnEnqueue: the same span names and annotations
	// under the Lambda segment, the origins of the writers' traces on the
	// publish subsegments (X-Ray has no links), and the enqueue subsegment's
	// header on the stored message.
	t.Run("XRayTracesARelayRunAndAnEnqueue", func(t *testing.T) {
		d := outboxtest.NewXRayDaemon(t)
		f := newTracingFixture(t, outboxconf.TracingXRay)
		const (
			enqHeader = "Root=1-6a1b2c3d-0123456789abcdef01234567;Parent=1111111111111111;Sampled=1"
			relHeader = "Root=1-6a1b2c3e-0123456789abcdef01234568;Parent=2222222222222222;Sampled=1"
		)
		buckets := f.writerMessages(t)
		resp, err := f.enqueue.Handle(invocationCtx(t, "outbox-enqueue", "req-enqueue", enqHeader),
			json.RawMessage(fmt.Sprintf(`{"topic":%q,"key":"function","value":"v"}`, f.kafka.Topic("orders"))))
		if err != nil || resp.Error != "" {
			t.Fatalf("enqueue: %+v %v", resp, err)
		}
		buckets = append(buckets, resp.Messages[0].Bucket)
		docs := sent(t, d)
		if len(docs) != 1 || docs[0].Name != outbox.SpanEnqueue || docs[0].ParentID != "1111111111111111" ||
			docs[0].TraceID != "1-6a1b2c3d-0123456789abcdef01234567" {
			t.Fatalf("enqueue documents %+v, want one enqueue subsegment of the Lambda segment", docs)
		}
		enq := docs[0]
		if a := enq.Annotations; a["messages"] != float64(1) || a["outcome"] != "ok" {
			t.Errorf("enqueue annotations %v", a)
		}
		var ops []any
		for _, c := range xrayNamed(enq.Subsegments, "DynamoDB") {
			ops = append(ops, c.AWS["operation"])
		}
		if !slices.Contains(ops, any("PutItem")) {
			t.Errorf("the PutItem call is not traced under the enqueue subsegment: DynamoDB calls %v", ops)
		}

		rresp, err := f.relay.Handle(invocationCtx(t, "outbox-relay", "req-relay", relHeader), wakeFor(buckets))
		if err != nil || rresp.Published != 3 {
			t.Fatalf("relay: %+v %v", rresp, err)
		}
		docs = sent(t, d)
		for _, doc := range docs {
			if doc.TraceID != "1-6a1b2c3e-0123456789abcdef01234568" || doc.ParentID != "2222222222222222" {
				t.Fatalf("document %q is not a subsegment of the relay's Lambda segment: trace %s parent %s", doc.Name, doc.TraceID, doc.ParentID)
			}
		}
		all := flatten(docs)
		for _, name := range []string{outbox.SpanAcquire, outbox.SpanDrain, outbox.SpanPublish, outbox.SpanDelete, outbox.SpanRelease} {
			if len(xrayNamed(all, name)) == 0 {
				t.Fatalf("no %s subsegment", name)
			}
		}
		for _, s := range xrayNamed(all, outbox.SpanAcquire) {
			if s.Annotations["relay_id"] != rresp.RelayID {
				t.Errorf("acquire annotations %v", s.Annotations)
			}
		}
		for _, s := range xrayNamed(all, outbox.SpanDrain) {
			if s.Annotations["relay_id"] != rresp.RelayID || s.Annotations["bucket"] == nil {
				t.Errorf("drain annotations %v", s.Annotations)
			}
		}
		published := 0.0
		var origins []string
		for _, s := range xrayNamed(all, outbox.SpanPublish) {
			if s.Annotations["outcome"] != "ok" || s.Annotations["bucket"] == nil {
				t.Errorf("publish annotations %v", s.Annotations)
			}
			published += s.Annotations["messages"].(float64)
			for _, o := range s.Metadata["spillway"]["origins"].([]any) {
				origins = append(origins, o.(string))
			}
		}
		slices.Sort(origins)
		want := []string{"1-4bf92f35-77b34da6a3ce929d0e0e4736", "1-5759e988-bd862e3fe1be46a994272793", "1-6a1b2c3d-0123456789abcdef01234567"}
		if published != 3 || !slices.Equal(origins, want) {
			t.Errorf("publish subsegments: %v messages, origins %v, want 3 and %v", published, origins, want)
		}
		// The function's message names the enqueue subsegment.
		for _, r := range outboxtest.Consume(t, f.kafka, f.kafka.Topic("orders"), 3) {
			if string(r.Key) != "function" {
				continue
			}
			if h, _ := header(r, outbox.HeaderAmznTraceID); h != "Root=1-6a1b2c3d-0123456789abcdef01234567;Parent="+enq.ID+";Sampled=1" {
				t.Errorf("the enqueued record carries %q, want the enqueue subsegment %s", h, enq.ID)
			}
		}
	})
}

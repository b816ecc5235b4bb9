package outbox

import (
	"context"
	"slices"
	"testing"
)

const (
	testTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	testTraceState  = "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
	testAmzn        = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	testAmznRoot    = "1-5759e988-bd862e3fe1be46a994272793"
	testW3CAsXRay   = "1-4bf92f35-77b34da6a3ce929d0e0e4736"
)

func headerMap(hs []Header) map[string]string {
	m := map[string]string{}
	for _, h := range hs {
		m[h.Key] = string(h.Value)
	}
	return m
}

func TestTraceContext(t *testing.T) {
	t.Run("RoundTripsThroughContext", func(t *testing.T) {
		if got := TraceContextFrom(context.Background()); !got.IsZero() {
			t.Fatalf("empty ctx gave %+v", got)
		}
		tc := TraceContext{TraceParent: testTraceParent, TraceState: testTraceState, AmznTraceID: testAmzn}
		if got := TraceContextFrom(WithTraceContext(context.Background(), tc)); got != tc {
			t.Fatalf("got %+v, want %+v", got, tc)
		}
	})

	t.Run("Headers", func(t *testing.T) {
		tests := []struct {
			name string
			tc   TraceContext
			want []Header
		}{
			{"zero", TraceContext{}, nil},
			{"all", TraceContext{TraceParent: testTraceParent, TraceState: testTraceState, AmznTraceID: testAmzn}, []Header{
				{HeaderTraceParent, []byte(testTraceParent)},
				{HeaderTraceState, []byte(testTraceState)},
				{HeaderAmznTraceID, []byte(testAmzn)},
			}},
			{"amzn only", TraceContext{AmznTraceID: testAmzn}, []Header{{HeaderAmznTraceID, []byte(testAmzn)}}},
			{"state without parent is dropped", TraceContext{TraceState: testTraceState}, nil},
			{"malformed parent drops its state", TraceContext{TraceParent: "00-xyz", TraceState: testTraceState, AmznTraceID: testAmzn},
				[]Header{{HeaderAmznTraceID, []byte(testAmzn)}}},
			{"malformed amzn", TraceContext{AmznTraceID: "Parent=53995c3f42cd8ad8"}, nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got := tt.tc.Headers()
				if !slices.EqualFunc(got, tt.want, func(a, b Header) bool { return a.Key == b.Key && string(a.Value) == string(b.Value) }) {
					t.Fatalf("Headers() = %v, want %v", got, tt.want)
				}
			})
		}
	})

	t.Run("MergeTraceHeadersKeepsCallerValues", func(t *testing.T) {
		callerParent := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		existing := make([]Header, 2, 8) // spare capacity must not be written into
		existing[0] = Header{Key: "content-type", Value: []byte("json")}
		existing[1] = Header{Key: "TraceParent", Value: []byte(callerParent)}
		tc := TraceContext{TraceParent: testTraceParent, TraceState: testTraceState, AmznTraceID: testAmzn}

		got := MergeTraceHeaders(existing, tc)

		if len(got) != 3 {
			t.Fatalf("got %d headers %v, want 3", len(got), got)
		}
		m := headerMap(got)
		if m["TraceParent"] != callerParent {
			t.Fatalf("caller traceparent replaced: %v", got)
		}
		if _, ok := m[HeaderTraceParent]; ok {
			t.Fatalf("second traceparent added: %v", got)
		}
		if _, ok := m[HeaderTraceState]; ok {
			t.Fatalf("tracestate of another trace added next to the caller's traceparent: %v", got)
		}
		if m[HeaderAmznTraceID] != testAmzn {
			t.Fatalf("X-Amzn-Trace-Id missing: %v", got)
		}
		if full := existing[:3]; full[2].Key != "" {
			t.Fatalf("MergeTraceHeaders wrote into the caller's backing array: %v", full)
		}

		callerAmzn := "Root=1-00000001-000000000000000000000001"
		got = MergeTraceHeaders([]Header{{Key: "x-amzn-trace-id", Value: []byte(callerAmzn)}}, tc)
		m = headerMap(got)
		if len(got) != 3 || m["x-amzn-trace-id"] != callerAmzn || m[HeaderTraceParent] != testTraceParent || m[HeaderTraceState] != testTraceState {
			t.Fatalf("caller X-Amzn-Trace-Id case: got %v", got)
		}

		if got := MergeTraceHeaders(existing, TraceContext{}); len(got) != 2 {
			t.Fatalf("zero context changed the headers: %v", got)
		}
	})

	t.Run("ParentValidation", func(t *testing.T) {
		tests := []struct {
			in string
			ok bool
		}{
			{testTraceParent, true},
			{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
			{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future", true},
			{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
			{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", false},
			{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
			{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false},
			{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
			{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
			{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", false},
			{"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
			{"", false},
		}
		for _, tt := range tests {
			if _, ok := traceParentID(tt.in); ok != tt.ok {
				t.Errorf("traceParentID(%q) ok = %v, want %v", tt.in, ok, tt.ok)
			}
		}
	})

	t.Run("AmznTraceRoot", func(t *testing.T) {
		tests := []struct {
			in, root string
		}{
			{testAmzn, testAmznRoot},
			{"Sampled=1; Parent=53995c3f42cd8ad8; Root=1-5759E988-BD862E3FE1BE46A994272793", testAmznRoot},
			{"Root=1-5759e988-bd862e3fe1be46a994272793", testAmznRoot},
			{"Root=2-5759e988-bd862e3fe1be46a994272793", ""},
			{"Root=1-5759e988-bd862e3fe1be46a99427279", ""},
			{"Root=1-00000000-000000000000000000000000", ""},
			{"Parent=53995c3f42cd8ad8;Sampled=1", ""},
			{"", ""},
		}
		for _, tt := range tests {
			root, ok := amznTraceRoot(tt.in)
			if root != tt.root || ok != (tt.root != "") {
				t.Errorf("amznTraceRoot(%q) = %q, %v; want %q", tt.in, root, ok, tt.root)
			}
		}
	})

	t.Run("originTraces", func(t *testing.T) {
		otherParent := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		msgs := []Message{
			{Headers: EncodeHeaders([]Header{{Key: HeaderAmznTraceID, Value: []byte(testAmzn)}})},
			{}, // no headers
			{Headers: EncodeHeaders([]Header{{Key: "k", Value: nil}, {Key: HeaderTraceParent, Value: []byte(testTraceParent)}})},
			{Headers: []byte{9, 9, 9}}, // undecodable: skipped
			// Same trace in both forms yields one id.
			{Headers: EncodeHeaders([]Header{
				{Key: HeaderTraceParent, Value: []byte(testTraceParent)},
				{Key: HeaderAmznTraceID, Value: []byte("Root=" + testW3CAsXRay + ";Sampled=1")},
			})},
			{Headers: EncodeHeaders([]Header{{Key: "TRACEPARENT", Value: []byte(otherParent)}})},
			{Headers: EncodeHeaders([]Header{{Key: HeaderTraceParent, Value: []byte("garbage")}})},
			{Headers: EncodeHeaders([]Header{{Key: HeaderAmznTraceID, Value: []byte(testAmzn)}})},
		}
		want := []string{testAmznRoot, testW3CAsXRay, "1-0af76519-16cd43dd8448eb211c80319c"}
		if got := originTraces(msgs); !slices.Equal(got, want) {
			t.Fatalf("originTraces = %v, want %v", got, want)
		}
		if got := originTraces([]Message{{}, {Headers: EncodeHeaders([]Header{{Key: "a", Value: []byte("b")}})}}); got != nil {
			t.Fatalf("originTraces without traces = %v, want nil", got)
		}
	})
}

func FuzzOriginTracesNeverPanics(f *testing.F) {
	f.Add([]byte(testTraceParent), []byte(testAmzn))
	f.Add([]byte("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-"), []byte("Root="))
	f.Fuzz(func(t *testing.T, parent, amzn []byte) {
		msgs := []Message{{Headers: EncodeHeaders([]Header{
			{Key: HeaderTraceParent, Value: parent},
			{Key: HeaderAmznTraceID, Value: amzn},
		})}}
		for _, id := range originTraces(msgs) {
			if len(id) != 35 || id[:2] != "1-" {
				t.Fatalf("malformed origin id %q", id)
			}
		}
		for _, h := range (TraceContext{TraceParent: string(parent), AmznTraceID: string(amzn)}).Headers() {
			if len(h.Value) == 0 {
				t.Fatalf("empty header value for %s", h.Key)
			}
		}
	})
}

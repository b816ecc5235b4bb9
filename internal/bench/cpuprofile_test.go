package bench

import (
	"bytes"
	"math"
	"testing"

	"github.com/google/pprof/profile"
)

// TestLabelShares splits a written profile by the component label and the
// Spillway part by the innermost frame of a known module.
func TestLabelShares(t *testing.T) {
	fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
	relayFn, sdkFn, rtFn := fn(1, "github.com/spillway-dev/spillway/outbox.(*Relay).Run"), fn(2, "github.com/aws/smithy-go.Decode"), fn(3, "runtime.mallocgc")
	loc := func(id uint64, f *profile.Function) *profile.Location {
		return &profile.Location{ID: id, Line: []profile.Line{{Function: f}}}
	}
	relay, sdk, rt := loc(1, relayFn), loc(2, sdkFn), loc(3, rtFn)
	sample := func(ns int64, label string, locs ...*profile.Location) *profile.Sample {
		s := &profile.Sample{Value: []int64{1, ns}, Location: locs}
		if label != "" {
			s.Label = map[string][]string{labelKey: {label}}
		}
		return s
	}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			sample(30, labelSpillway, rt, relay), // runtime frame charged to the relay that called it
			sample(10, labelSpillway, sdk, relay),
			sample(40, labelBackend, rt),
			sample(20, "", rt),
		},
		Location: []*profile.Location{relay, sdk, rt},
		Function: []*profile.Function{relayFn, sdkFn, rtFn},
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := labelShares(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if got.Samples != 4 || got.CPU != 100 || !near(got.Spillway, 40) || !near(got.Backend, 40) || !near(got.Other, 20) {
		t.Fatalf("shares %+v, want 4 samples, 100ns, 40/40/20", got)
	}
	if !near(got.InSpillway[CauseRelay], 75) || !near(got.InSpillway[CauseSDK], 25) {
		t.Fatalf("Spillway split %v, want outbox 75, aws-sdk 25", got.InSpillway)
	}
	if _, err := labelShares([]byte("not a profile")); err == nil {
		t.Fatal("garbage decoded without an error")
	}
}

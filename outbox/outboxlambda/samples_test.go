package outboxlambda

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// sampleExpectation is what a sample event in events/ must produce.
type sampleExpectation struct {
	// relay samples: the decoded source, hints and hop, or invalid.
	source  Source
	buckets []int
	hop     int
	invalid bool
	// enqueue samples: the stored message count, or the refused field.
	messages int
	field    string
}

// sampleExpectations lists every file of events/; a new sample without an
// entry fails TestEverySampleEventRoundTrips.
var sampleExpectations = map[string]sampleExpectation{
	"relay.schedule.json":             {source: SourceSchedule, buckets: []int{}},
	"relay.schedule-eventbridge.json": {source: SourceSchedule, buckets: []int{}},
	"relay.schedule-scheduler.json":   {source: SourceSchedule, buckets: []int{}},
	"relay.notify.json":               {source: SourceWake, buckets: []int{5}},
	"relay.notify-continuation.json":  {source: SourceWake, buckets: []int{1, 2, 5}, hop: 3},
	"relay.streams.json":              {source: SourceStreams, buckets: []int{1, 5}},
	"relay.streams-removals.json":     {source: SourceStreams, buckets: []int{}},
	"relay.invalid.json":              {invalid: true},
	"relay.invalid-bucket.json":       {invalid: true},
	"relay.invalid-source.json":       {invalid: true},
	"enqueue.single.json":             {messages: 1},
	"enqueue.batch.json":              {messages: 5},
	"enqueue.invalid-base64.json":     {field: "messages[1].key"},
	"enqueue.missing-topic.json":      {field: "messages[0].topic"},
	"enqueue.too-many.json":           {field: "messages"},
	"enqueue.unknown-encoding.json":   {field: "valueEncoding"},
	"enqueue.bad-partition.json":      {field: "messages[1].partition"},
	"enqueue.bad-message-id.json":     {field: "messages[0].messageId"},
	"enqueue.duplicate-ids.json":      {field: "messages[1].messageId"},
	"enqueue.unknown-field.json":      {field: "vaule"},
}

// TestEverySampleEventRoundTrips hands every sample event to its handler on
// the embedded backends: enqueue samples first (so the relay samples find
// messages), then relay samples.
func TestEverySampleEventRoundTrips(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "..", "events", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		name := filepath.Base(f)
		if _, ok := sampleExpectations[name]; !ok {
			t.Errorf("events/%s has no expectation in sampleExpectations", name)
		}
		names = append(names, name)
	}
	for name := range sampleExpectations {
		if !slices.Contains(names, name) {
			t.Errorf("sampleExpectations lists %s, which is not in events/", name)
		}
	}
	// Enqueue samples before relay samples.
	slices.SortFunc(names, func(a, b string) int {
		ea, eb := strings.HasPrefix(a, "enqueue."), strings.HasPrefix(b, "enqueue.")
		switch {
		case ea && !eb:
			return -1
		case eb && !ea:
			return 1
		}
		return strings.Compare(a, b)
	})
	b := setup(t, bundleOptions{})
	for _, name := range names {
		want := sampleExpectations[name]
		payload := b.sample(t, name)
		if strings.HasPrefix(name, "enqueue.") {
			resp, err := b.enqueue.Handle(t.Context(), payload)
			if err != nil {
				t.Errorf("%s: function error %v", name, err)
				continue
			}
			if len(resp.Messages) != want.messages || resp.Field != want.field || (want.field != "") != (resp.Error != "") {
				t.Errorf("%s: response %+v, want %d messages, field %q", name, resp, want.messages, want.field)
			}
			continue
		}
		resp, err := b.relay.Handle(t.Context(), payload)
		if want.invalid {
			if !IsInvalidEvent(err) {
				t.Errorf("%s: error %v, want an invalid event", name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: function error %v", name, err)
			continue
		}
		if resp.Trigger != want.source || !reflect.DeepEqual(resp.Buckets, want.buckets) || resp.Hop != want.hop || resp.Reason == "" {
			t.Errorf("%s: response %+v, want source %s, buckets %v, hop %d", name, resp, want.source, want.buckets, want.hop)
		}
		t.Logf("%s: %s, reason %s, published %d", name, resp.Trigger, resp.Reason, resp.Published)
	}
}

package outboxlambda

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// sampleExpectation is what a sample event in events/ must produce, as
// testdata/sample-events.json lists it (the functions' tests read the same
// file).
type sampleExpectation struct {
	// relay samples: the decoded source, hints and hop, or invalid.
	Source  Source `json:"source"`
	Buckets []int  `json:"buckets"`
	Hop     int    `json:"hop"`
	Invalid bool   `json:"invalid"`
	// enqueue samples: the stored message count, or the refused field.
	Messages int    `json:"messages"`
	Field    string `json:"field"`
}

// readSampleExpectations reads testdata/sample-events.json; a sample in
// events/ without an entry fails TestSamples/EverySampleEventRoundTrips.
func readSampleExpectations(t *testing.T) map[string]sampleExpectation {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "sample-events.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]sampleExpectation
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("testdata/sample-events.json: %v", err)
	}
	return m
}

// servedTopics are the topics `spillway run --serve` creates (the demo's,
// cmd/spillway's demoTopics): `make invoke` against it publishes the
// enqueue samples only to these.
var servedTopics = []string{"orders", "payments"}

func TestSamples(t *testing.T) {
	t.Parallel()
	// EnqueueSamplesWriteTheServedTopics: a stored sample's message on a
	// topic the local cluster lacks would block its bucket behind an
	// unknown-topic head.
	t.Run("EnqueueSamplesWriteTheServedTopics", func(t *testing.T) {
		t.Parallel()
		files, err := filepath.Glob(filepath.Join("..", "..", "events", "enqueue.*.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := ParseEnqueueRequest(raw, RequestOptions{})
			if err != nil {
				continue // refused: nothing is stored
			}
			for _, m := range msgs {
				if !slices.Contains(servedTopics, m.Topic) {
					t.Errorf("%s writes to topic %q, which spillway run --serve does not create (it creates %v)", filepath.Base(f), m.Topic, servedTopics)
				}
			}
		}
	})

	// EverySampleEventRoundTrips hands every sample event to its handler on
	// the embedded backends: enqueue samples first (so the relay samples find
	// messages), then relay samples.
	t.Run("EverySampleEventRoundTrips", func(t *testing.T) {
		t.Parallel()
		sampleExpectations := readSampleExpectations(t)
		files, err := filepath.Glob(filepath.Join("..", "..", "events", "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range files {
			name := filepath.Base(f)
			if strings.HasPrefix(name, "consumer.") {
				continue // the inbox's Kafka events, tested in outbox/outboxinbox
			}
			if _, ok := sampleExpectations[name]; !ok {
				t.Errorf("events/%s has no expectation in testdata/sample-events.json", name)
			}
			names = append(names, name)
		}
		for name := range sampleExpectations {
			if !slices.Contains(names, name) {
				t.Errorf("testdata/sample-events.json lists %s, which is not in events/", name)
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
				if len(resp.Messages) != want.Messages || resp.Field != want.Field || (want.Field != "") != (resp.Error != "") {
					t.Errorf("%s: response %+v, want %d messages, field %q", name, resp, want.Messages, want.Field)
				}
				continue
			}
			resp, err := b.relay.Handle(t.Context(), payload)
			if want.Invalid {
				if !IsInvalidEvent(err) {
					t.Errorf("%s: error %v, want an invalid event", name, err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: function error %v", name, err)
				continue
			}
			if resp.Trigger != want.Source || !reflect.DeepEqual(resp.Buckets, want.Buckets) || resp.Hop != want.Hop || resp.Reason == "" {
				t.Errorf("%s: response %+v, want source %s, buckets %v, hop %d", name, resp, want.Source, want.Buckets, want.Hop)
			}
			t.Logf("%s: %s, reason %s, published %d", name, resp.Trigger, resp.Reason, resp.Published)
		}
	})
}

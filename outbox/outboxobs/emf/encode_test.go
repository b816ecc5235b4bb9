package emf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// goldenTime is 2026-03-01T12:00:00.250Z, 1772366400250 ms.
var goldenTime = time.Date(2026, 3, 1, 12, 0, 0, 250_000_000, time.UTC)

func TestEncode(t *testing.T) {
	t.Run("DocumentGolden", func(t *testing.T) {
		d := Document{
			Timestamp:     goldenTime,
			Namespace:     "Shop/Checkout",
			Dimensions:    []Dimension{{"Service", "checkout"}, {"Region", "eu-west-1"}},
			DimensionSets: [][]string{{"Service"}, {"Service", "Region"}},
			Metrics: []Metric{
				{Name: "Latency", Unit: "Milliseconds", StorageResolution: 1, Values: []float64{1.25, 3}},
				{Name: "Orders", Unit: "Count", Values: []float64{7}},
				{Name: "Delta", Unit: "None", Values: []float64{-2, 1e-7}},
			},
			Properties: []Property{
				{"TraceId", "1-5759e988-bd862e3fe1be46a994272793"},
				{"Detail", map[string]any{"k": []int{1, 2}, "ok": true}},
			},
		}
		var out bytes.Buffer
		if err := Encode(&out, d); err != nil {
			t.Fatal(err)
		}
		assertGolden(t, "document.golden.json", out.Bytes())
	})

	// SplitsAtLimits encodes 150 metrics of 250 values each: the
	// metric limit splits every round in two directives, the value limit needs
	// three rounds, so six lines; reassembled, every metric has all its values
	// in order, each exactly once.
	t.Run("SplitsAtLimits", func(t *testing.T) {
		const metrics, values = 150, 250
		d := Document{Timestamp: goldenTime, Namespace: "N", Dimensions: []Dimension{{"D", "d"}},
			Properties: []Property{{"P", "p"}}}
		for m := range metrics {
			vals := make([]float64, values-m%2) // odd metrics end one value early
			for i := range vals {
				vals[i] = float64(m*1000 + i)
			}
			d.Metrics = append(d.Metrics, Metric{Name: fmt.Sprintf("M%03d", m), Unit: "Count", Values: vals})
		}
		var out bytes.Buffer
		if err := Encode(&out, d); err != nil {
			t.Fatal(err)
		}
		lines := splitLines(t, out.Bytes())
		if len(lines) != 6 {
			t.Fatalf("got %d lines, want 6", len(lines))
		}
		got := map[string][]float64{}
		for i, line := range lines {
			if err := validateEMF(line); err != nil {
				t.Fatalf("line %d: %v", i, err)
			}
			var root map[string]any
			if err := json.Unmarshal(line, &root); err != nil {
				t.Fatal(err)
			}
			if root["D"] != "d" || root["P"] != "p" {
				t.Fatalf("line %d lost the dimension or property", i)
			}
			defs := root["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Metrics"].([]any)
			for _, def := range defs {
				name := def.(map[string]any)["Name"].(string)
				switch v := root[name].(type) {
				case []any:
					for _, x := range v {
						got[name] = append(got[name], x.(float64))
					}
				case float64:
					got[name] = append(got[name], v)
				}
			}
		}
		for _, m := range d.Metrics {
			if len(got[m.Name]) != len(m.Values) {
				t.Fatalf("%s: got %d values, want %d", m.Name, len(got[m.Name]), len(m.Values))
			}
			for i, v := range m.Values {
				if got[m.Name][i] != v {
					t.Fatalf("%s value %d = %v, want %v", m.Name, i, got[m.Name][i], v)
				}
			}
		}
	})

	t.Run("RefusesInvalidDocuments", func(t *testing.T) {
		ok := func() Document {
			return Document{Timestamp: goldenTime, Namespace: "N", Dimensions: []Dimension{{"D", "d"}},
				Metrics: []Metric{{Name: "M", Unit: "Count", Values: []float64{1}}}}
		}
		var positive bytes.Buffer
		if err := Encode(&positive, ok()); err != nil || positive.Len() == 0 {
			t.Fatalf("positive control: %v, %d bytes", err, positive.Len())
		}
		many := ok()
		for i := range 31 {
			many.Dimensions = append(many.Dimensions, Dimension{fmt.Sprintf("X%d", i), "v"})
		}
		cases := map[string]func(d *Document){
			"zero timestamp":        func(d *Document) { d.Timestamp = time.Time{} },
			"empty namespace":       func(d *Document) { d.Namespace = "" },
			"AWS namespace":         func(d *Document) { d.Namespace = "AWS/Lambda" },
			"no metrics":            func(d *Document) { d.Metrics = nil },
			"no values":             func(d *Document) { d.Metrics[0].Values = nil },
			"NaN":                   func(d *Document) { d.Metrics[0].Values = []float64{math.NaN()} },
			"Inf":                   func(d *Document) { d.Metrics[0].Values = []float64{math.Inf(1)} },
			"bad unit":              func(d *Document) { d.Metrics[0].Unit = "Messages" },
			"bad resolution":        func(d *Document) { d.Metrics[0].StorageResolution = 10 },
			"empty dimension value": func(d *Document) { d.Dimensions[0].Value = " " },
			"colon dimension":       func(d *Document) { d.Dimensions[0].Name = ":D" },
			"non-ASCII dimension":   func(d *Document) { d.Dimensions[0].Name = "Dé" },
			"metric is dimension":   func(d *Document) { d.Metrics[0].Name = "D" },
			"property is metric":    func(d *Document) { d.Properties = []Property{{"M", 1}} },
			"property is _aws":      func(d *Document) { d.Properties = []Property{{"_aws", 1}} },
			"unencodable property":  func(d *Document) { d.Properties = []Property{{"P", make(chan int)}} },
			"unknown dimension set": func(d *Document) { d.DimensionSets = [][]string{{"Nope"}} },
			"31 keys in a set":      func(d *Document) { *d = many },
			"line over 1 MB":        func(d *Document) { d.Properties = []Property{{"P", strings.Repeat("x", MaxEventBytes)}} },
		}
		for name, mutate := range cases {
			d := ok()
			mutate(&d)
			var out bytes.Buffer
			err := Encode(&out, d)
			if !errors.Is(err, ErrInvalidDocument) {
				t.Errorf("%s: err = %v, want ErrInvalidDocument", name, err)
			}
			if out.Len() != 0 {
				t.Errorf("%s: wrote %d bytes of an invalid document", name, out.Len())
			}
		}
	})

	t.Run("ReportsWriteErrors", func(t *testing.T) {
		boom := errors.New("disk full")
		d := Document{Timestamp: goldenTime, Namespace: "N", Metrics: []Metric{{Name: "M", Values: []float64{1}}}}
		if err := Encode(failingWriter{boom}, d); !errors.Is(err, boom) {
			t.Fatalf("err = %v, want %v", err, boom)
		}
	})

	t.Run("AppendNumberIsJSON", func(t *testing.T) {
		for _, v := range []float64{0, -0.5, 1, 12.5, 1e-7, 123456789, 1e21, -3e-300, math.MaxFloat64, 0.1} {
			b := appendNumber(nil, v)
			var back float64
			if err := json.Unmarshal(b, &back); err != nil || back != v {
				t.Errorf("appendNumber(%v) = %s, decodes to %v (%v)", v, b, back, err)
			}
		}
	})
}

type failingWriter struct{ err error }

func (f failingWriter) Write([]byte) (int, error) { return 0, f.err }

// Package emf writes CloudWatch metrics in Embedded Metric Format (EMF): one
// JSON log line whose "_aws" member tells CloudWatch Logs which top-level
// members are metrics. In Lambda, writing the line to stdout is enough — no
// agent, no PutMetricData call, no VPC endpoint.
//
// Encode is a small, dependency-free encoder that enforces the format's
// limits by splitting a document over several lines where the limits force
// it. Recorder is a hook (outbox.Hook) that aggregates one invocation's
// reports into the Spillway metrics and flushes them as EMF; InboxRecorder
// does the same for an inbox.
package emf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Limits of the EMF specification and of CloudWatch.
const (
	// MaxMetricsPerDirective bounds the MetricDefinitions of one directive;
	// Encode spreads more metrics over several lines.
	MaxMetricsPerDirective = 100
	// MaxDimensionsPerSet bounds the keys of one dimension set.
	MaxDimensionsPerSet = 30
	// MaxValuesPerMetric bounds the values of one metric member; Encode
	// spreads more values over several lines.
	MaxValuesPerMetric = 100
	// MaxEventBytes is the largest log event CloudWatch Logs accepts.
	MaxEventBytes = 1 << 20
)

// ErrInvalidDocument marks a document that would not be valid EMF; the
// wrapping error says which member is wrong.
var ErrInvalidDocument = errors.New("emf: invalid document")

// Dimension is one dimension: a top-level string member referenced from a
// dimension set.
type Dimension struct {
	Name  string
	Value string
}

// Metric is one metric and the values observed for it during the document's
// period.
type Metric struct {
	// Name is the top-level member holding the values.
	Name string
	// Unit is a CloudWatch standard unit; empty omits it (CloudWatch then
	// uses None).
	Unit string
	// StorageResolution is 1 for a high-resolution metric, 60 or 0 (omitted)
	// for standard resolution.
	StorageResolution int
	// Values holds at least one finite value. One value is written as a
	// number, more as an array.
	Values []float64
}

// Property is a top-level member that is not a metric: searchable in Logs
// Insights, free of metric cost. Use it for high-cardinality ids.
type Property struct {
	Name string
	// Value is any JSON-encodable value.
	Value any
}

// Document is one set of metrics sharing a timestamp, a namespace and
// dimensions.
type Document struct {
	// Timestamp is written in milliseconds since the Unix epoch.
	Timestamp time.Time
	// Namespace is the CloudWatch namespace.
	Namespace string
	// Dimensions are the dimension members, in order.
	Dimensions []Dimension
	// DimensionSets lists the dimension sets by name. Nil means one set
	// holding every dimension, in order.
	DimensionSets [][]string
	// Metrics are written in order.
	Metrics []Metric
	// Properties are written after the metrics, in order, on every line.
	Properties []Property
}

// Encode writes d to w as newline-terminated EMF lines in a single Write.
// It writes one line unless the limits force more: metrics beyond
// MaxMetricsPerDirective and values beyond MaxValuesPerMetric go to further
// lines that repeat the timestamp, dimensions and properties and declare only
// the metrics whose values they carry, so no value is counted twice. A
// document that would not be valid EMF is refused with an error matching
// ErrInvalidDocument and nothing is written.
func Encode(w io.Writer, d Document) error {
	sets, err := d.validate()
	if err != nil {
		return err
	}
	props := make([][]byte, len(d.Properties))
	for i, p := range d.Properties {
		b, err := json.Marshal(p.Value)
		if err != nil {
			return fmt.Errorf("%w: property %q: %v", ErrInvalidDocument, p.Name, err)
		}
		props[i] = b
	}

	var out bytes.Buffer
	offsets := make([]int, len(d.Metrics))
	for {
		pending := make([]int, 0, len(d.Metrics))
		for i, m := range d.Metrics {
			if offsets[i] < len(m.Values) {
				pending = append(pending, i)
			}
		}
		if len(pending) == 0 {
			break
		}
		for start := 0; start < len(pending); start += MaxMetricsPerDirective {
			chunk := pending[start:min(start+MaxMetricsPerDirective, len(pending))]
			line := d.appendLine(nil, sets, chunk, offsets, props)
			if len(line) > MaxEventBytes {
				return fmt.Errorf("%w: a line is %d bytes, CloudWatch Logs accepts at most %d", ErrInvalidDocument, len(line), MaxEventBytes)
			}
			out.Write(line)
			for _, i := range chunk {
				offsets[i] = min(offsets[i]+MaxValuesPerMetric, len(d.Metrics[i].Values))
			}
		}
	}
	if _, err := w.Write(out.Bytes()); err != nil {
		return fmt.Errorf("emf: write %d bytes: %w", out.Len(), err)
	}
	return nil
}

// appendLine appends one line declaring the metrics in chunk, each with the
// next MaxValuesPerMetric values from its offset.
func (d *Document) appendLine(b []byte, sets [][]string, chunk, offsets []int, props [][]byte) []byte {
	b = append(b, `{"_aws":{"Timestamp":`...)
	b = strconv.AppendInt(b, d.Timestamp.UnixMilli(), 10)
	b = append(b, `,"CloudWatchMetrics":[{"Namespace":`...)
	b = appendString(b, d.Namespace)
	b = append(b, `,"Dimensions":[`...)
	for i, set := range sets {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		for j, name := range set {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendString(b, name)
		}
		b = append(b, ']')
	}
	b = append(b, `],"Metrics":[`...)
	for n, i := range chunk {
		m := &d.Metrics[i]
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"Name":`...)
		b = appendString(b, m.Name)
		if m.Unit != "" {
			b = append(b, `,"Unit":`...)
			b = appendString(b, m.Unit)
		}
		if m.StorageResolution != 0 {
			b = append(b, `,"StorageResolution":`...)
			b = strconv.AppendInt(b, int64(m.StorageResolution), 10)
		}
		b = append(b, '}')
	}
	b = append(b, `]}]}`...)
	for _, dim := range d.Dimensions {
		b = append(b, ',')
		b = appendString(b, dim.Name)
		b = append(b, ':')
		b = appendString(b, dim.Value)
	}
	for _, i := range chunk {
		m := &d.Metrics[i]
		values := m.Values[offsets[i]:min(offsets[i]+MaxValuesPerMetric, len(m.Values))]
		b = append(b, ',')
		b = appendString(b, m.Name)
		b = append(b, ':')
		if len(values) == 1 {
			b = appendNumber(b, values[0])
			continue
		}
		b = append(b, '[')
		for j, v := range values {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendNumber(b, v)
		}
		b = append(b, ']')
	}
	for i, p := range d.Properties {
		b = append(b, ',')
		b = appendString(b, p.Name)
		b = append(b, ':')
		b = append(b, props[i]...)
	}
	return append(b, '}', '\n')
}

// validate checks d against the EMF specification and CloudWatch's naming
// rules and returns the effective dimension sets.
func (d *Document) validate() ([][]string, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidDocument, fmt.Sprintf(format, args...))
	}
	if d.Timestamp.IsZero() || d.Timestamp.UnixMilli() < 0 {
		return nil, invalid("timestamp %v is not after the Unix epoch", d.Timestamp)
	}
	if d.Namespace == "" || len(d.Namespace) > 255 || strings.HasPrefix(d.Namespace, "AWS/") {
		return nil, invalid("namespace %q must be 1-255 characters and must not start with AWS/", d.Namespace)
	}
	if len(d.Metrics) == 0 {
		return nil, invalid("no metrics")
	}
	members := map[string]string{"_aws": "metadata"}
	claim := func(name, what string) error {
		if name == "" || len(name) > 255 {
			return invalid("%s name %q must be 1-255 characters", what, name)
		}
		if prev, ok := members[name]; ok {
			return invalid("%s %q collides with %s %q", what, name, prev, name)
		}
		members[name] = what
		return nil
	}
	for _, dim := range d.Dimensions {
		if err := claim(dim.Name, "dimension"); err != nil {
			return nil, err
		}
		if !validDimensionName(dim.Name) {
			return nil, invalid("dimension name %q must be ASCII, not blank and not start with ':'", dim.Name)
		}
		if strings.TrimSpace(dim.Value) == "" || len(dim.Value) > 1024 {
			return nil, invalid("dimension %q value %q must be 1-1024 characters, not blank", dim.Name, dim.Value)
		}
	}
	for _, m := range d.Metrics {
		if err := claim(m.Name, "metric"); err != nil {
			return nil, err
		}
		if m.Unit != "" && !ValidUnit(m.Unit) {
			return nil, invalid("metric %q unit %q is not a CloudWatch unit", m.Name, m.Unit)
		}
		if m.StorageResolution != 0 && m.StorageResolution != 1 && m.StorageResolution != 60 {
			return nil, invalid("metric %q storage resolution %d must be 1 or 60", m.Name, m.StorageResolution)
		}
		if len(m.Values) == 0 {
			return nil, invalid("metric %q has no values", m.Name)
		}
		for _, v := range m.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, invalid("metric %q value %v is not a finite number", m.Name, v)
			}
		}
	}
	for _, p := range d.Properties {
		if err := claim(p.Name, "property"); err != nil {
			return nil, err
		}
	}
	sets := d.DimensionSets
	if sets == nil {
		all := make([]string, len(d.Dimensions))
		for i, dim := range d.Dimensions {
			all[i] = dim.Name
		}
		sets = [][]string{all}
	}
	for _, set := range sets {
		if len(set) > MaxDimensionsPerSet {
			return nil, invalid("dimension set %v has %d keys, at most %d allowed", set, len(set), MaxDimensionsPerSet)
		}
		for _, name := range set {
			if members[name] != "dimension" {
				return nil, invalid("dimension set %v names %q, which is not a dimension", set, name)
			}
		}
	}
	return sets, nil
}

func validDimensionName(name string) bool {
	if strings.HasPrefix(name, ":") || strings.TrimSpace(name) == "" {
		return false
	}
	for _, r := range name {
		if r > unicode.MaxASCII {
			return false
		}
	}
	return true
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	enc, _ := json.Marshal(s) // a string always marshals
	return append(b, enc...)
}

// appendNumber appends a finite v as a JSON number, in the same shortest
// round-trip form encoding/json uses: plain decimals, exponent only for very
// small or very large magnitudes.
func appendNumber(b []byte, v float64) []byte {
	if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		return strconv.AppendFloat(b, v, 'e', -1, 64)
	}
	return strconv.AppendFloat(b, v, 'f', -1, 64)
}

package emf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// specUnits is the CloudWatch StandardUnit enumeration, written out again
// here so the validator does not trust the encoder's own list.
var specUnits = map[string]bool{
	"Seconds": true, "Microseconds": true, "Milliseconds": true, "Bytes": true, "Kilobytes": true,
	"Megabytes": true, "Gigabytes": true, "Terabytes": true, "Bits": true, "Kilobits": true,
	"Megabits": true, "Gigabits": true, "Terabits": true, "Percent": true, "Count": true,
	"Bytes/Second": true, "Kilobytes/Second": true, "Megabytes/Second": true, "Gigabytes/Second": true,
	"Terabytes/Second": true, "Bits/Second": true, "Kilobits/Second": true, "Megabits/Second": true,
	"Gigabits/Second": true, "Terabits/Second": true, "Count/Second": true, "None": true,
}

// validateEMF checks one log line against the EMF specification: a single
// JSON object with no other data; a root "_aws" object with an integer
// millisecond Timestamp and a non-empty CloudWatchMetrics array; every
// directive a Namespace string, Dimensions as arrays of at most 30 strings
// naming top-level string members, and 1-100 MetricDefinitions whose Name
// names a top-level number or array of 1-100 numbers and whose Unit is a
// CloudWatch unit; no member the specification does not define inside the
// metadata objects; no duplicate root members; at most 1 MB.
func validateEMF(line []byte) error {
	if len(line) == 0 || len(line) > MaxEventBytes {
		return fmt.Errorf("line is %d bytes", len(line))
	}
	if bytes.ContainsAny(line, "\r\n") {
		return fmt.Errorf("line contains a line break")
	}
	if err := noDuplicateRootMembers(line); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var root map[string]any
	if err := dec.Decode(&root); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("data after the JSON object")
	}
	aws, ok := root["_aws"].(map[string]any)
	if !ok {
		return fmt.Errorf("_aws is missing or not an object")
	}
	for k := range aws {
		if k != "Timestamp" && k != "CloudWatchMetrics" {
			return fmt.Errorf("_aws has unexpected member %q", k)
		}
	}
	ts, ok := aws["Timestamp"].(json.Number)
	if !ok {
		return fmt.Errorf("_aws.Timestamp is missing or not a number")
	}
	if ms, err := strconv.ParseInt(ts.String(), 10, 64); err != nil || ms < 0 {
		return fmt.Errorf("_aws.Timestamp %s is not a non-negative integer of milliseconds", ts)
	}
	directives, ok := aws["CloudWatchMetrics"].([]any)
	if !ok || len(directives) == 0 {
		return fmt.Errorf("_aws.CloudWatchMetrics is missing, empty or not an array")
	}
	for di, d := range directives {
		dir, ok := d.(map[string]any)
		if !ok {
			return fmt.Errorf("directive %d is not an object", di)
		}
		for k := range dir {
			if k != "Namespace" && k != "Dimensions" && k != "Metrics" {
				return fmt.Errorf("directive %d has unexpected member %q", di, k)
			}
		}
		if ns, ok := dir["Namespace"].(string); !ok || ns == "" {
			return fmt.Errorf("directive %d Namespace is missing or not a non-empty string", di)
		}
		sets, ok := dir["Dimensions"].([]any)
		if !ok {
			return fmt.Errorf("directive %d Dimensions is missing or not an array", di)
		}
		for si, s := range sets {
			set, ok := s.([]any)
			if !ok {
				return fmt.Errorf("directive %d dimension set %d is not an array", di, si)
			}
			if len(set) > 30 {
				return fmt.Errorf("directive %d dimension set %d has %d keys", di, si, len(set))
			}
			for _, k := range set {
				name, ok := k.(string)
				if !ok {
					return fmt.Errorf("directive %d dimension set %d has a non-string key", di, si)
				}
				if v, ok := root[name].(string); !ok || v == "" {
					return fmt.Errorf("dimension %q does not name a non-empty top-level string", name)
				}
			}
		}
		metrics, ok := dir["Metrics"].([]any)
		if !ok || len(metrics) == 0 || len(metrics) > 100 {
			return fmt.Errorf("directive %d Metrics must be an array of 1-100 definitions", di)
		}
		seen := map[string]bool{}
		for mi, m := range metrics {
			def, ok := m.(map[string]any)
			if !ok {
				return fmt.Errorf("metric definition %d is not an object", mi)
			}
			for k := range def {
				if k != "Name" && k != "Unit" && k != "StorageResolution" {
					return fmt.Errorf("metric definition %d has unexpected member %q", mi, k)
				}
			}
			name, ok := def["Name"].(string)
			if !ok || name == "" || seen[name] {
				return fmt.Errorf("metric definition %d Name is missing, empty or repeated", mi)
			}
			seen[name] = true
			if u, present := def["Unit"]; present {
				if s, ok := u.(string); !ok || !specUnits[s] {
					return fmt.Errorf("metric %q Unit %v is not a CloudWatch unit", name, u)
				}
			}
			if r, present := def["StorageResolution"]; present {
				if n, ok := r.(json.Number); !ok || (n.String() != "1" && n.String() != "60") {
					return fmt.Errorf("metric %q StorageResolution %v is not 1 or 60", name, r)
				}
			}
			if err := checkValues(name, root[name]); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkValues(name string, v any) error {
	values := []any{v}
	if arr, ok := v.([]any); ok {
		if len(arr) == 0 || len(arr) > 100 {
			return fmt.Errorf("metric %q has %d values, want 1-100", name, len(arr))
		}
		values = arr
	}
	for _, x := range values {
		n, ok := x.(json.Number)
		if !ok {
			return fmt.Errorf("metric %q value %v is not a number", name, x)
		}
		f, err := n.Float64()
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("metric %q value %v is not a finite number", name, n)
		}
	}
	return nil
}

// noDuplicateRootMembers walks the root object's tokens: encoding/json
// keeps the last of two equal keys silently, CloudWatch may not.
func noDuplicateRootMembers(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("line does not start with a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key := tok.(string)
		if seen[key] {
			return fmt.Errorf("root member %q appears twice", key)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return nil
}

// splitLines returns out's lines without their terminators, failing the
// test if out does not end with a newline.
func splitLines(t *testing.T, out []byte) [][]byte {
	t.Helper()
	if len(out) == 0 {
		return nil
	}
	if out[len(out)-1] != '\n' {
		t.Fatalf("output does not end with a newline: %q", out)
	}
	return bytes.Split(out[:len(out)-1], []byte("\n"))
}

// assertGolden validates every line of out and compares it, as JSON values,
// with the hand-written documents in testdata/name.
func assertGolden(t *testing.T, name string, out []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var want []any
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	lines := splitLines(t, out)
	if len(lines) != len(want) {
		t.Fatalf("%s: got %d lines, want %d:\n%s", name, len(lines), len(want), out)
	}
	for i, line := range lines {
		if err := validateEMF(line); err != nil {
			t.Fatalf("%s line %d is not valid EMF: %v\n%s", name, i, err, line)
		}
		var got any
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want[i]) {
			w, _ := json.Marshal(want[i])
			t.Fatalf("%s line %d differs\n got: %s\nwant: %s", name, i, line, w)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Run("EMFRejectsSpecViolations", func(t *testing.T) {
		valid := `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[["D"]],"Metrics":[{"Name":"M","Unit":"Count"}]}]},"D":"d","M":[1,2]}`
		if err := validateEMF([]byte(valid)); err != nil {
			t.Fatalf("positive control rejected: %v", err)
		}
		bad := map[string]string{
			"no _aws":             `{"M":1}`,
			"float timestamp":     `{"_aws":{"Timestamp":1.5,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[],"Metrics":[{"Name":"M"}]}]},"M":1}`,
			"string timestamp":    `{"_aws":{"Timestamp":"1","CloudWatchMetrics":[{"Namespace":"N","Dimensions":[],"Metrics":[{"Name":"M"}]}]},"M":1}`,
			"no directives":       `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[]},"M":1}`,
			"no namespace":        `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Dimensions":[],"Metrics":[{"Name":"M"}]}]},"M":1}`,
			"missing dimension":   `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[["D"]],"Metrics":[{"Name":"M"}]}]},"M":1}`,
			"numeric dimension":   `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[["D"]],"Metrics":[{"Name":"M"}]}]},"D":3,"M":1}`,
			"missing metric":      `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[],"Metrics":[{"Name":"M"}]}]}}`,
			"string metric":       `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[],"Metrics":[{"Name":"M"}]}]},"M":"1"}`,
			"bad unit":            `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[],"Metrics":[{"Name":"M","Unit":"Messages"}]}]},"M":1}`,
			"extra member":        `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[],"Metrics":[{"Name":"M","Dims":1}]}]},"M":1}`,
			"trailing data":       valid + ` {}`,
			"two lines":           valid + "\n" + valid,
			"duplicate member":    `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[],"Metrics":[{"Name":"M"}]}]},"M":1,"M":2}`,
			"empty array":         `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[],"Metrics":[{"Name":"M"}]}]},"M":[]}`,
			"bad resolution":      `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[],"Metrics":[{"Name":"M","StorageResolution":5}]}]},"M":1}`,
			"31 dimension keys":   thirtyOneDimensions(),
			"101 values":          hundredOneValues(),
			"repeated definition": `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[],"Metrics":[{"Name":"M"},{"Name":"M"}]}]},"M":1}`,
		}
		for name, line := range bad {
			if err := validateEMF([]byte(line)); err == nil {
				t.Errorf("%s: accepted %s", name, line)
			}
		}
	})
}

func thirtyOneDimensions() string {
	var keys, members bytes.Buffer
	for i := range 31 {
		if i > 0 {
			keys.WriteByte(',')
		}
		fmt.Fprintf(&keys, `"D%d"`, i)
		fmt.Fprintf(&members, `,"D%d":"v"`, i)
	}
	return `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[` + keys.String() +
		`]],"Metrics":[{"Name":"M"}]}]}` + members.String() + `,"M":1}`
}

func hundredOneValues() string {
	var vals bytes.Buffer
	for i := range 101 {
		if i > 0 {
			vals.WriteByte(',')
		}
		vals.WriteString(strconv.Itoa(i))
	}
	return `{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[],"Metrics":[{"Name":"M"}]}]},"M":[` + vals.String() + `]}`
}

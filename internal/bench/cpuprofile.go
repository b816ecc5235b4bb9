package bench

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// CPUShare splits the CPU time sampled during a measurement by the
// component label: Spillway (the relay, the AWS SDK and franz-go clients:
// what runs on the relay's CPU on AWS), the embedded backends (DynamoDB
// and Kafka, which run elsewhere on AWS), and the rest (the garbage
// collector's background workers and other unlabelled runtime work).
type CPUShare struct {
	// Spillway, Backend and Other are percentages of the sampled CPU time.
	Spillway, Backend, Other float64
	// InSpillway splits the Spillway share by the code that caused it
	// (see the Cause constants), in percent of the Spillway share.
	InSpillway map[string]float64
	// CPU is the sampled CPU time; Samples the number of samples.
	CPU     time.Duration
	Samples int
	// Unavailable says why no profile was taken (another CPU profile was
	// running); the shares are zero then.
	Unavailable string `json:",omitempty"`
}

// Causes of the Spillway share: the innermost frame of a sample that
// belongs to one of these modules (runtime and standard-library frames are
// charged to the caller that belongs to one).
const (
	CauseRelay   = "outbox"      // Spillway's own packages
	CauseCounter = "outboxlocal" // the bench's counting middleware (not deployed)
	CauseSDK     = "aws-sdk"     // AWS SDK for Go v2 and smithy-go
	CauseKafka   = "franz-go"    // the Kafka client
	CauseRuntime = "runtime+std" // no module frame: GC, scheduler, net/http's own loops
)

var causePrefixes = []struct{ prefix, cause string }{
	{"github.com/spillway-dev/spillway/outbox/outboxlocal.", CauseCounter},
	{"github.com/spillway-dev/spillway/", CauseRelay},
	{"github.com/aws/", CauseSDK},
	{"github.com/twmb/franz-go/", CauseKafka},
}

// profileCPU runs fn under a CPU profile and returns the shares. With dir
// set, the raw profile is written to dir/name.pprof for `go tool pprof
// -tagfocus component=spillway`.
func profileCPU(dir, name string, fn func() error) (CPUShare, error) {
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		// The process is already being profiled (go test -cpuprofile):
		// measure without the split rather than not at all.
		return CPUShare{Unavailable: err.Error()}, fn()
	}
	err := fn()
	pprof.StopCPUProfile()
	if err != nil {
		return CPUShare{}, err
	}
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return CPUShare{}, fmt.Errorf("bench: profile directory: %w", err)
		}
		path := filepath.Join(dir, name+".pprof")
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			return CPUShare{}, fmt.Errorf("bench: write profile %s: %w", path, err)
		}
	}
	return labelShares(buf.Bytes())
}

// labelShares sums the CPU time of a gzipped pprof profile by the value of
// the component label, and the spillway part by cause.
func labelShares(data []byte) (CPUShare, error) {
	p, err := decodeProfile(data)
	if err != nil {
		return CPUShare{}, err
	}
	cpu := p.valueIndex("cpu")
	if cpu < 0 {
		return CPUShare{}, errors.New("bench: profile has no cpu sample type")
	}
	byLabel := map[string]int64{}
	byCause := map[string]int64{}
	var total int64
	for _, s := range p.samples {
		if cpu >= len(s.values) {
			continue
		}
		ns := s.values[cpu]
		label := s.labels[labelKey]
		byLabel[label] += ns
		total += ns
		if label == labelSpillway {
			byCause[p.cause(s)] += ns
		}
	}
	share := CPUShare{CPU: time.Duration(total), Samples: len(p.samples)}
	if total == 0 {
		return share, nil
	}
	pct := func(ns, of int64) float64 { return 100 * float64(ns) / float64(of) }
	share.Spillway = pct(byLabel[labelSpillway], total)
	share.Backend = pct(byLabel[labelBackend], total)
	share.Other = 100 - share.Spillway - share.Backend
	if own := byLabel[labelSpillway]; own > 0 {
		share.InSpillway = map[string]float64{}
		for cause, ns := range byCause {
			share.InSpillway[cause] = pct(ns, own)
		}
	}
	return share, nil
}

// profile is the part of a profile.proto the shares need.
type profile struct {
	types     []string
	samples   []sample
	functions map[uint64]string   // function id → name
	locations map[uint64][]uint64 // location id → function ids, innermost first
}

type sample struct {
	locations []uint64 // leaf first
	values    []int64
	labels    map[string]string
}

func (p *profile) valueIndex(typ string) int {
	for i, t := range p.types {
		if t == typ {
			return i
		}
	}
	return -1
}

// cause walks a sample's frames from the leaf and returns the cause of the
// first frame in one of the known modules.
func (p *profile) cause(s sample) string {
	for _, loc := range s.locations {
		for _, fn := range p.locations[loc] {
			name := p.functions[fn]
			for _, c := range causePrefixes {
				if strings.HasPrefix(name, c.prefix) {
					return c.cause
				}
			}
		}
	}
	return CauseRuntime
}

// decodeProfile reads a gzipped profile.proto: sample types, samples with
// locations, values and string labels, locations, functions and the string
// table. String references are resolved once the table is read (it may
// come last).
func decodeProfile(data []byte) (*profile, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("bench: read profile: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("bench: read profile: %w", err)
	}
	type rawSample struct {
		locations []uint64
		values    []int64
		labels    [][2]uint64 // key, str
	}
	var (
		types     []uint64
		samples   []rawSample
		strs      []string
		funcNames = map[uint64]uint64{}
	)
	p := &profile{functions: map[uint64]string{}, locations: map[uint64][]uint64{}}
	err = eachField(raw, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case 1: // sample_type: ValueType{type = 1}
			return eachField(v, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
				if n == 1 {
					types = append(types, x)
				}
				return nil
			})
		case 2: // sample: location_id = 1, value = 2, label = 3
			var s rawSample
			err := eachField(v, func(n protowire.Number, t protowire.Type, b []byte, x uint64) error {
				switch n {
				case 1:
					return appendPacked(&s.locations, t, b, x, func(u uint64) uint64 { return u })
				case 2:
					return appendPacked(&s.values, t, b, x, func(u uint64) int64 { return int64(u) })
				case 3: // Label{key = 1, str = 2}
					var kv [2]uint64
					err := eachField(b, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
						if n == 1 || n == 2 {
							kv[n-1] = x
						}
						return nil
					})
					s.labels = append(s.labels, kv)
					return err
				}
				return nil
			})
			samples = append(samples, s)
			return err
		case 4: // location: id = 1, line = 4 (Line{function_id = 1})
			var id uint64
			var fns []uint64
			err := eachField(v, func(n protowire.Number, _ protowire.Type, b []byte, x uint64) error {
				switch n {
				case 1:
					id = x
				case 4:
					return eachField(b, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
						if n == 1 {
							fns = append(fns, x)
						}
						return nil
					})
				}
				return nil
			})
			p.locations[id] = fns
			return err
		case 5: // function: id = 1, name = 2
			var id, name uint64
			err := eachField(v, func(n protowire.Number, _ protowire.Type, _ []byte, x uint64) error {
				switch n {
				case 1:
					id = x
				case 2:
					name = x
				}
				return nil
			})
			funcNames[id] = name
			return err
		case 6: // string_table
			strs = append(strs, string(v))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	str := func(i uint64) string {
		if i >= uint64(len(strs)) {
			return ""
		}
		return strs[i]
	}
	for _, t := range types {
		p.types = append(p.types, str(t))
	}
	for id, name := range funcNames {
		p.functions[id] = str(name)
	}
	for _, rs := range samples {
		s := sample{locations: rs.locations, values: rs.values, labels: map[string]string{}}
		for _, kv := range rs.labels {
			s.labels[str(kv[0])] = str(kv[1])
		}
		p.samples = append(p.samples, s)
	}
	return p, nil
}

// appendPacked appends a repeated scalar field, packed (t is BytesType) or
// not (one varint x per field).
func appendPacked[T any](dst *[]T, t protowire.Type, b []byte, x uint64, conv func(uint64) T) error {
	if t == protowire.VarintType {
		*dst = append(*dst, conv(x))
		return nil
	}
	for len(b) > 0 {
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return fmt.Errorf("bench: decode profile: %w", protowire.ParseError(n))
		}
		*dst = append(*dst, conv(v))
		b = b[n:]
	}
	return nil
}

// eachField calls fn for every field of a protobuf message: varints come
// as x, length-delimited fields as v; other wire types are skipped.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("bench: decode profile: %w", protowire.ParseError(n))
		}
		b = b[n:]
		var (
			v []byte
			x uint64
		)
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("bench: decode profile: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

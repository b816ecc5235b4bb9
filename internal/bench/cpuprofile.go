package bench

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"
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
	p, err := profile.ParseData(data)
	if err != nil {
		return CPUShare{}, fmt.Errorf("bench: read profile: %w", err)
	}
	cpu := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == "cpu" })
	if cpu < 0 {
		return CPUShare{}, errors.New("bench: profile has no cpu sample type")
	}
	byLabel := map[string]int64{}
	byCause := map[string]int64{}
	var total int64
	for _, s := range p.Sample {
		ns := s.Value[cpu]
		var label string
		if l := s.Label[labelKey]; len(l) > 0 {
			label = l[0]
		}
		byLabel[label] += ns
		total += ns
		if label == labelSpillway {
			byCause[sampleCause(s)] += ns
		}
	}
	share := CPUShare{CPU: time.Duration(total), Samples: len(p.Sample)}
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

// sampleCause walks a sample's frames from the leaf and returns the cause
// of the first frame in one of the known modules.
func sampleCause(s *profile.Sample) string {
	for _, loc := range s.Location {
		for _, line := range loc.Line {
			if line.Function == nil {
				continue
			}
			for _, c := range causePrefixes {
				if strings.HasPrefix(line.Function.Name, c.prefix) {
					return c.cause
				}
			}
		}
	}
	return CauseRuntime
}

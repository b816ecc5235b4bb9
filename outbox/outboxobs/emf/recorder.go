package emf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// Property names the Recorder writes besides the metrics. They are plain
// members, never dimensions: relay and request ids would make every
// invocation a new billed metric.
const (
	PropertyRelayID              = "RelayId"
	PropertyRequestID            = "RequestId"
	PropertyWriteUnitsPerMessage = "WriteUnitsPerMessage"
	PropertyReadUnitsPerMessage  = "ReadUnitsPerMessage"
)

// Recorder defaults.
const (
	// DefaultMaxLatencyValues bounds the PublishLatency values kept per
	// flush: at most ten lines of 100 values.
	DefaultMaxLatencyValues = 1000
	// DefaultFunctionName is the FunctionName dimension outside Lambda.
	DefaultFunctionName = "local"
)

// Config configures a Recorder.
type Config struct {
	// Namespace is the CloudWatch namespace. Default "Spillway"
	// (outboxconf.DefaultMetricsNamespace).
	Namespace string
	// Outbox is the Outbox dimension. Default "outbox"
	// (outbox.DefaultMetricsName).
	Outbox string
	// FunctionName is the FunctionName dimension. Default the
	// AWS_LAMBDA_FUNCTION_NAME environment variable, else "local".
	FunctionName string
	// MaxLatencyValues bounds the PublishLatency values kept per flush;
	// beyond it a deterministic, evenly spaced subsample is kept. Default
	// DefaultMaxLatencyValues.
	MaxLatencyValues int
}

// metric indexes, in the order the metrics are written.
const (
	mPublished = iota
	mPublishFailures
	mLatency
	mEnqueued
	mRejected
	mPending
	mOldestAge
	mOwned
	mClaims
	mReleases
	mLosses
	mRefused
	mDDBRequests
	mWriteUnits
	mReadUnits
	mThrottles
	mBudget
	mReleasesSkipped
	mHeadRowRetries
	mWakeUps
	mParked
	mParkedGauge
	mReplayed
	numMetrics
)

var metricNames = [numMetrics]string{
	mPublished:       outboxconf.MetricMessagesPublished,
	mPublishFailures: outboxconf.MetricPublishFailures,
	mLatency:         outboxconf.MetricPublishLatency,
	mEnqueued:        outboxconf.MetricMessagesEnqueued,
	mRejected:        outboxconf.MetricEnqueueRejected,
	mPending:         outboxconf.MetricPendingMessages,
	mOldestAge:       outboxconf.MetricOldestPendingAge,
	mOwned:           outboxconf.MetricOwnedBuckets,
	mClaims:          outboxconf.MetricLeaseClaims,
	mReleases:        outboxconf.MetricLeaseReleases,
	mLosses:          outboxconf.MetricLeaseLosses,
	mRefused:         outboxconf.MetricRefusedConditionalWrites,
	mDDBRequests:     outboxconf.MetricDynamoDBRequests,
	mWriteUnits:      outboxconf.MetricWriteUnits,
	mReadUnits:       outboxconf.MetricReadUnits,
	mThrottles:       outboxconf.MetricThrottles,
	mBudget:          outboxconf.MetricBudgetUsed,
	mReleasesSkipped: outboxconf.MetricReleasesSkipped,
	mHeadRowRetries:  outboxconf.MetricHeadRowRetries,
	mWakeUps:         outboxconf.MetricWakeUpsSent,
	mParked:          outboxconf.MetricMessagesParked,
	mParkedGauge:     outboxconf.MetricParkedMessages,
	mReplayed:        outboxconf.MetricMessagesReplayed,
}

// Counters written as 0 when their side was active but saw none, so alarms
// and dashboards see a zero rather than missing data. Each side only
// zero-fills its own counters: a zero MessagesPublished under the enqueue
// function would be one more billed custom metric that means nothing.
var (
	relayCounters  = []int{mPublished, mPublishFailures, mClaims, mReleases, mLosses, mRefused, mThrottles, mReleasesSkipped, mHeadRowRetries, mWakeUps}
	writerCounters = []int{mEnqueued, mRejected, mRefused, mThrottles, mWakeUps}
)

// Recorder is an outbox.Observer that aggregates the events of one
// invocation and writes them as EMF on Flush. It is safe for concurrent use;
// Observe takes one short lock.
type Recorder struct {
	namespace string
	dims      []Dimension
	reserved  map[string]bool

	mu sync.Mutex
	st state
}

// state is one invocation's aggregate.
type state struct {
	values        [numMetrics]float64
	touched       [numMetrics]bool
	relay, writer bool
	latency       sample
	relayID       string
	props         []Property // values are json.RawMessage
}

var _ outbox.Observer = (*Recorder)(nil)

// NewRecorder returns a Recorder for cfg, with defaults applied. It fails
// with ErrInvalidDocument when a name could not appear in valid EMF.
func NewRecorder(cfg Config) (*Recorder, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = outboxconf.DefaultMetricsNamespace
	}
	if cfg.Outbox == "" {
		cfg.Outbox = outbox.DefaultMetricsName
	}
	if cfg.FunctionName == "" {
		cfg.FunctionName = os.Getenv("AWS_LAMBDA_FUNCTION_NAME")
	}
	if cfg.FunctionName == "" {
		cfg.FunctionName = DefaultFunctionName
	}
	if cfg.MaxLatencyValues <= 0 {
		cfg.MaxLatencyValues = DefaultMaxLatencyValues
	}
	r := &Recorder{
		namespace: cfg.Namespace,
		dims: []Dimension{
			{Name: outboxconf.DimensionOutbox, Value: cfg.Outbox},
			{Name: outboxconf.DimensionFunction, Value: cfg.FunctionName},
		},
		reserved: map[string]bool{
			"_aws":                       true,
			outboxconf.DimensionOutbox:   true,
			outboxconf.DimensionFunction: true,
			PropertyWriteUnitsPerMessage: true,
			PropertyReadUnitsPerMessage:  true,
		},
		st: state{latency: newSample(cfg.MaxLatencyValues)},
	}
	for _, name := range metricNames {
		r.reserved[name] = true
	}
	// Prove the configuration encodes before the first invocation needs it.
	probe := Document{Timestamp: time.UnixMilli(0).Add(time.Millisecond), Namespace: r.namespace, Dimensions: r.dims,
		Metrics: []Metric{{Name: metricNames[mPublished], Unit: outboxconf.UnitCount, Values: []float64{0}}}}
	if _, err := probe.validate(); err != nil {
		return nil, fmt.Errorf("emf: new recorder: %w", err)
	}
	return r, nil
}

// relayCounts are the relay's events that add their count to one metric.
var relayCounts = map[outbox.EventKind]int{
	outbox.EventClaim:          mClaims,
	outbox.EventRelease:        mReleases,
	outbox.EventLeaseLost:      mLosses,
	outbox.EventReleaseSkipped: mReleasesSkipped,
	outbox.EventParked:         mParked,
	outbox.EventReplayed:       mReplayed,
}

// Observe implements outbox.Observer.
func (r *Recorder) Observe(e outbox.Event) {
	count := float64(max(e.Count, 0))
	r.mu.Lock()
	defer r.mu.Unlock()
	st := &r.st
	if e.RelayID != "" {
		st.relayID = e.RelayID
	}
	if m, ok := relayCounts[e.Kind]; ok {
		st.relay = true
		st.add(m, count)
		return
	}
	switch e.Kind {
	case outbox.EventPublish:
		st.relay = true
		st.add(mPublished, count)
		if e.Err != nil && !errors.Is(e.Err, context.Canceled) && !errors.Is(e.Err, outbox.ErrLeaseLost) {
			st.add(mPublishFailures, 1)
		}
		for _, d := range e.Latencies {
			st.latency.add(max(float64(d)/float64(time.Millisecond), 0))
		}
	case outbox.EventBacklog:
		st.relay = true
		if e.Err == nil {
			st.set(mPending, count)
			st.set(mOldestAge, max(e.Duration.Seconds(), 0))
		}
	case outbox.EventOwned:
		st.relay = true
		st.raise(mOwned, count)
	case outbox.EventRound:
		st.relay = true
		if e.Err == nil {
			st.raise(mOwned, count)
		}
	case outbox.EventHeadRowRetry:
		st.relay = true
		st.add(mHeadRowRetries, 1)
	case outbox.EventStop:
		st.relay = true
		st.set(mBudget, finite(e.BudgetUsed))
	case outbox.EventParkedBacklog:
		st.relay = true
		st.set(mParkedGauge, count)
	case outbox.EventBatchFetched, outbox.EventDelete:
		st.relay = true
	case outbox.EventRefusedWrite:
		st.add(mRefused, count)
	case outbox.EventThrottle:
		st.add(mThrottles, max(count, 1))
	case outbox.EventWakeUpSent:
		if e.Err == nil {
			st.add(mWakeUps, 1)
		} else {
			st.touched[mWakeUps] = true
		}
	case outbox.EventEnqueue:
		st.writer = true
		st.add(mEnqueued, count)
	case outbox.EventEnqueueRejected:
		st.writer = true
		st.add(mRejected, count)
	}
}

// AddDynamoDB adds DynamoDB requests and consumed capacity units, as counted
// by an SDK middleware. Negative and non-finite amounts are ignored. Any call
// makes the next flush write DynamoDBRequests, ReadUnits and WriteUnits, and
// the per-message ratios when messages were published or enqueued.
func (r *Recorder) AddDynamoDB(requests int, readUnits, writeUnits float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.add(mDDBRequests, float64(max(requests, 0)))
	r.st.add(mReadUnits, finite(readUnits))
	r.st.add(mWriteUnits, finite(writeUnits))
}

func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0
	}
	return v
}

// SetProperty sets a plain member written with the next flush, such as
// PropertyRequestID; setting a name again replaces its value. Metric,
// dimension and ratio names are refused, and so is a value that does not
// encode as JSON. PropertyRelayID set here wins over the relay id the events
// carry.
func (r *Recorder) SetProperty(name string, value any) error {
	if name == "" || r.reserved[name] {
		return fmt.Errorf("emf: set property %q: %w: the name is reserved", name, ErrInvalidDocument)
	}
	raw, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("emf: set property %q: %w: %v", name, ErrInvalidDocument, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := Property{Name: name, Value: json.RawMessage(raw)}
	if i := slices.IndexFunc(r.st.props, func(q Property) bool { return q.Name == name }); i >= 0 {
		r.st.props[i] = p
	} else {
		r.st.props = append(r.st.props, p)
	}
	return nil
}

// Flush writes what was observed since the previous flush as EMF lines
// stamped now, then starts a new aggregate whatever the outcome, so a failed
// write never double-counts into the next invocation. It writes nothing when
// nothing was observed.
func (r *Recorder) Flush(w io.Writer, now time.Time) error {
	r.mu.Lock()
	// Swapping in a fresh state hands the old one, slices included, to this
	// flush alone: observers of the next invocation never touch it.
	st := r.st
	r.st = state{latency: newSample(st.latency.max)}
	r.mu.Unlock()

	doc := Document{Timestamp: now, Namespace: r.namespace, Dimensions: r.dims}
	if st.relay {
		st.touch(relayCounters)
	}
	if st.writer {
		st.touch(writerCounters)
	}
	for i := range numMetrics {
		switch {
		case i == mLatency:
			if len(st.latency.values) > 0 {
				doc.Metrics = append(doc.Metrics, r.metric(i, st.latency.values...))
			}
		case st.touched[i]:
			doc.Metrics = append(doc.Metrics, r.metric(i, st.values[i]))
		}
	}
	if len(doc.Metrics) == 0 {
		return nil
	}
	if st.relayID != "" && !slices.ContainsFunc(st.props, func(p Property) bool { return p.Name == PropertyRelayID }) {
		doc.Properties = append(doc.Properties, Property{Name: PropertyRelayID, Value: st.relayID})
	}
	doc.Properties = append(doc.Properties, st.props...)
	if messages := st.values[mPublished] + st.values[mEnqueued]; messages > 0 && st.touched[mDDBRequests] {
		doc.Properties = append(doc.Properties,
			Property{Name: PropertyWriteUnitsPerMessage, Value: ratio(st.values[mWriteUnits], messages)},
			Property{Name: PropertyReadUnitsPerMessage, Value: ratio(st.values[mReadUnits], messages)})
	}
	if err := Encode(w, doc); err != nil {
		return fmt.Errorf("emf: flush: %w", err)
	}
	return nil
}

func (r *Recorder) metric(i int, values ...float64) Metric {
	name := metricNames[i]
	return Metric{Name: name, Unit: outboxconf.MetricUnits[name], Values: values}
}

// ratio rounds to three decimals: capacity units per message need no more,
// and short numbers keep the log line readable.
func ratio(units, messages float64) float64 { return math.Round(units/messages*1000) / 1000 }

func (st *state) add(i int, v float64) {
	st.values[i] += v
	st.touched[i] = true
}

func (st *state) set(i int, v float64) {
	st.values[i] = v
	st.touched[i] = true
}

// raise keeps the largest value seen: the relay releases every lease before
// it returns, so the last owned count of an invocation is always 0.
func (st *state) raise(i int, v float64) {
	if !st.touched[i] || v > st.values[i] {
		st.values[i] = v
	}
	st.touched[i] = true
}

func (st *state) touch(counters []int) {
	for _, i := range counters {
		st.touched[i] = true
	}
}

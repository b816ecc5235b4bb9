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
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
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
	mStranded
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
	mStranded:        outboxconf.MetricStrandedMessages,
}

// Counters written as 0 when their side was active but saw none, so alarms
// and dashboards see a zero rather than missing data. Each side only
// zero-fills its own counters: a zero MessagesPublished under the enqueue
// function would be one more billed custom metric that means nothing.
var (
	relayCounters  = []int{mPublished, mPublishFailures, mClaims, mReleases, mLosses, mRefused, mThrottles, mReleasesSkipped, mHeadRowRetries, mWakeUps}
	writerCounters = []int{mEnqueued, mRejected, mRefused, mThrottles, mWakeUps}
)

// Recorder is a hook (outbox.Hook) that aggregates the reports of one
// invocation and writes them as EMF on Flush. It implements every hook
// interface of the relay (outbox.HookLease, HookBatch, HookPark, HookRun,
// HookStranded, HookWakeUp), of the DynamoDB store (outboxddb.HookRequest) and of the
// enqueue function (outboxlambda.HookEnqueue). It is safe for concurrent
// use; each report takes one short lock.
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

var (
	_ outbox.HookLease      = (*Recorder)(nil)
	_ outbox.HookBatch      = (*Recorder)(nil)
	_ outbox.HookPark       = (*Recorder)(nil)
	_ outbox.HookRun        = (*Recorder)(nil)
	_ outbox.HookStranded   = (*Recorder)(nil)
	_ outbox.HookWakeUp     = (*Recorder)(nil)
	_ outboxddb.HookRequest = (*Recorder)(nil)
)

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

// relayEvent locks the aggregate for one report of a relay, marking the
// relay side active and keeping the relay's id; the caller unlocks.
func (r *Recorder) relayEvent(relayID string) *state {
	r.mu.Lock()
	st := &r.st
	st.relay = true
	if relayID != "" {
		st.relayID = relayID
	}
	return st
}

// count clamps a reported count at zero.
func count(n int) float64 { return float64(max(n, 0)) }

// OnRound implements outbox.HookLease.
func (r *Recorder) OnRound(relayID string, _ time.Duration, _ lease.Acquisition, _ error) {
	r.relayEvent(relayID)
	r.mu.Unlock()
}

// OnLeases implements outbox.HookLease: OwnedBuckets keeps the largest
// owned count of the invocation, LeaseClaims and LeaseReleases add up.
func (r *Recorder) OnLeases(relayID string, owned, claimed, released int) {
	st := r.relayEvent(relayID)
	defer r.mu.Unlock()
	st.raise(mOwned, count(owned))
	if claimed > 0 {
		st.add(mClaims, count(claimed))
	}
	if released > 0 {
		st.add(mReleases, count(released))
	}
}

// OnLeaseLost implements outbox.HookLease.
func (r *Recorder) OnLeaseLost(relayID string, lost int, _ outbox.LossReason) {
	st := r.relayEvent(relayID)
	defer r.mu.Unlock()
	st.add(mLosses, count(lost))
}

// OnReleaseSkipped implements outbox.HookLease.
func (r *Recorder) OnReleaseSkipped(relayID string, lapsing int) {
	st := r.relayEvent(relayID)
	defer r.mu.Unlock()
	st.add(mReleasesSkipped, count(lapsing))
}

// OnFetch implements outbox.HookBatch.
func (r *Recorder) OnFetch(relayID string, _, _ int) {
	r.relayEvent(relayID)
	r.mu.Unlock()
}

// OnPublish implements outbox.HookBatch: a failure counts once per
// publish, unless the relay stopped or lost the lease.
func (r *Recorder) OnPublish(relayID string, _, acked int, latencies []time.Duration, err error) {
	st := r.relayEvent(relayID)
	defer r.mu.Unlock()
	st.add(mPublished, count(acked))
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, outbox.ErrLeaseLost) {
		st.add(mPublishFailures, 1)
	}
	for _, d := range latencies {
		st.latency.add(max(float64(d)/float64(time.Millisecond), 0))
	}
}

// OnDelete implements outbox.HookBatch.
func (r *Recorder) OnDelete(relayID string, _, _ int) {
	r.relayEvent(relayID)
	r.mu.Unlock()
}

// OnBackoff implements outbox.HookBatch. A backoff alone, like a store's
// request, does not make the invocation a relay's.
func (r *Recorder) OnBackoff(relayID string, _ int, _ time.Duration, _ error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.request(outboxddb.Request{RelayID: relayID})
}

// OnHeadRowRetry implements outbox.HookBatch.
func (r *Recorder) OnHeadRowRetry(relayID string, _ int) {
	st := r.relayEvent(relayID)
	defer r.mu.Unlock()
	st.add(mHeadRowRetries, 1)
}

// OnPark implements outbox.HookPark.
func (r *Recorder) OnPark(relayID string, _ outbox.Parking) {
	st := r.relayEvent(relayID)
	defer r.mu.Unlock()
	st.add(mParked, 1)
}

// OnReplay implements outbox.HookPark.
func (r *Recorder) OnReplay(relayID string, _, replayed int) {
	st := r.relayEvent(relayID)
	defer r.mu.Unlock()
	st.add(mReplayed, count(replayed))
}

// OnParkedBacklog implements outbox.HookPark.
func (r *Recorder) OnParkedBacklog(relayID string, parked int64) {
	st := r.relayEvent(relayID)
	defer r.mu.Unlock()
	st.set(mParkedGauge, float64(max(parked, 0)))
}

// OnBacklog implements outbox.HookRun.
func (r *Recorder) OnBacklog(relayID string, pending int64, oldest time.Duration) {
	st := r.relayEvent(relayID)
	defer r.mu.Unlock()
	st.set(mPending, float64(max(pending, 0)))
	st.set(mOldestAge, max(oldest.Seconds(), 0))
}

// OnStranded implements outbox.HookStranded.
func (r *Recorder) OnStranded(relayID string, stranded int64) {
	st := r.relayEvent(relayID)
	defer r.mu.Unlock()
	st.set(mStranded, float64(max(stranded, 0)))
}

// OnRetry implements outbox.HookRun.
func (r *Recorder) OnRetry(relayID string, _ time.Duration, _ error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.request(outboxddb.Request{RelayID: relayID})
}

// OnRunEnd implements outbox.HookRun: BudgetUsed is the run's share of its
// deadline.
func (r *Recorder) OnRunEnd(relayID string, res outbox.RunResult) {
	st := r.relayEvent(relayID)
	defer r.mu.Unlock()
	st.set(mBudget, finite(res.BudgetUsed))
}

// OnWakeUp implements outbox.HookWakeUp: WakeUpsSent counts the wake-ups
// sent, and is written (as 0 when all failed) once one was tried.
func (r *Recorder) OnWakeUp(_ outbox.WakeUp, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.st.add(mWakeUps, 1)
	} else {
		r.st.touched[mWakeUps] = true
	}
}

// OnRefused implements outboxddb.HookRequest.
func (r *Recorder) OnRefused(req outboxddb.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.request(req).add(mRefused, 1)
}

// OnThrottle implements outboxddb.HookRequest.
func (r *Recorder) OnThrottle(req outboxddb.Request, _ error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.request(req).add(mThrottles, 1)
}

// request keeps the relay id of a report that does not mark the relay
// side active; the caller holds the lock.
func (r *Recorder) request(req outboxddb.Request) *state {
	if req.RelayID != "" {
		r.st.relayID = req.RelayID
	}
	return &r.st
}

// OnEnqueue implements outboxlambda.HookEnqueue.
func (r *Recorder) OnEnqueue(enqueued int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.writer = true
	r.st.add(mEnqueued, count(enqueued))
}

// OnEnqueueRejected implements outboxlambda.HookEnqueue.
func (r *Recorder) OnEnqueueRejected(rejected int, _ error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.writer = true
	r.st.add(mRejected, count(rejected))
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

package steady

import (
	"cmp"
	"io"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// Defaults of Config.
const (
	DefaultRate         = 10.0
	DefaultBuckets      = outbox.DefaultBucketCount
	DefaultDuration     = 10 * time.Minute
	DefaultRelayTimeout = 15 * time.Minute
	DefaultSeed         = 1
)

// The run's fixed settings of the stack: the schedule's period (its phase
// comes from Config.Seed), and the event invoke configuration's maximum
// age, beyond which an asynchronous event that waited for an execution
// environment is dropped. The reserved concurrency is Config.Buckets, as
// the stack's default.
const (
	scheduleInterval = time.Minute
	maxEventAge      = time.Minute
)

// maxValueSize keeps a message item well under DynamoDB's 400 KB limit.
const maxValueSize = 256 << 10

// Defaults of Latency: typical in-region figures for a Lambda function.
const (
	DefaultDynamoDBLatency = 5 * time.Millisecond
	DefaultKafkaLatency    = 10 * time.Millisecond
	DefaultKafkaInit       = 100 * time.Millisecond
	DefaultInvokeLatency   = 15 * time.Millisecond
	DefaultStartDelay      = 50 * time.Millisecond
	DefaultColdStart       = 250 * time.Millisecond
)

// Latency is how long the simulated round trips take, in simulated time.
// Zero fields take their defaults; a negative field means none.
type Latency struct {
	// DynamoDB is one request's round trip; the request is applied at its
	// end. Default 5 ms.
	DynamoDB time.Duration
	// Kafka is one produce round trip (a batch), and the ping of a warm
	// environment's publisher initialisation. Default 10 ms.
	Kafka time.Duration
	// KafkaInit is the first publisher initialisation of an execution
	// environment (connect, metadata, producer id). Default 100 ms.
	KafkaInit time.Duration
	// Invoke is the asynchronous Invoke API call the notifier makes (the
	// caller waits for it). Default 15 ms.
	Invoke time.Duration
	// Start is the delay from an accepted asynchronous invoke to the
	// handler starting in a warm environment. Default 50 ms.
	Start time.Duration
	// ColdStart is added to Start when a new execution environment must be
	// created. Default 250 ms.
	ColdStart time.Duration
}

func (l Latency) withDefaults() Latency {
	l.DynamoDB = orDefault(l.DynamoDB, DefaultDynamoDBLatency)
	l.Kafka = orDefault(l.Kafka, DefaultKafkaLatency)
	l.KafkaInit = orDefault(l.KafkaInit, DefaultKafkaInit)
	l.Invoke = orDefault(l.Invoke, DefaultInvokeLatency)
	l.Start = orDefault(l.Start, DefaultStartDelay)
	l.ColdStart = orDefault(l.ColdStart, DefaultColdStart)
	return l
}

// orDefault maps zero to def and a negative duration to none.
func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// Config describes one scenario run. The zero value runs the standard
// scenario: 10 commits per second over 8 buckets for 10 simulated minutes,
// relays with the relay function's defaults and a 15-minute timeout.
type Config struct {
	// Rate is the commits per second (a Poisson process), one message per
	// commit. Default 10; negative: no commits (only the schedule runs).
	Rate float64
	// ValueSize pads every message value to this many bytes. Default: a
	// short JSON document (about 30 bytes).
	ValueSize int
	// Buckets is the bucket count of the writer and the relays. Default 8.
	Buckets int
	// Duration is how long the writer commits, in simulated time. The run
	// goes on until the last message is published and the last relay has
	// stopped. Default 10 minutes.
	Duration time.Duration
	// RelayTimeout is the relay function's timeout: every invocation's
	// deadline is its start plus RelayTimeout. Default 15 minutes, the
	// relay function's default.
	RelayTimeout time.Duration
	// StopMargin is the relay's SPILLWAY_STOP_MARGIN. Default: the relay
	// function's (5 s).
	StopMargin time.Duration
	// Relay overrides the relay function's settings that its environment
	// variables expose: PollInterval, TargetLatency, IdleTimeout, MaxIdleTimeout, LeaseDuration,
	// LeaseRenewInterval, BatchSize and Mode. Zero fields keep the
	// function's defaults; RelayID and BucketCount are set by the run;
	// the other fields must be zero (the function has no setting for them).
	Relay outbox.RelayOptions
	// WithoutWakeUps makes the writer send no wake-up: only the schedule
	// and the relays' continuation wake-ups start relays. A control: the
	// latency and ownership targets must then fail.
	WithoutWakeUps bool
	// Doorbell makes the writer ring the doorbell after each commit and
	// every relay listen on it for the buckets it holds (lab.Doorbell, with
	// Kafka's latency), as the functions do with SPILLWAY_DOORBELL_TOPIC,
	// whose defaults the relays then take (TargetLatency at the poll).
	// DoorbellDown loses every ring: the doorbell's path has failed, and
	// the polls find the messages.
	Doorbell, DoorbellDown bool
	// Latency is the simulated round-trip times.
	Latency Latency
	// Seed fixes the commit times, keys, message ids and the schedule's
	// phase. Default 1.
	Seed uint64
	// Progress receives a line per simulated minute. Optional.
	Progress io.Writer `json:"-"`
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.Rate = cmp.Or(c.Rate, DefaultRate)
	c.Buckets = cmp.Or(c.Buckets, DefaultBuckets)
	c.Duration = cmp.Or(c.Duration, DefaultDuration)
	c.RelayTimeout = cmp.Or(c.RelayTimeout, DefaultRelayTimeout)
	c.Seed = cmp.Or(c.Seed, DefaultSeed)
	c.Latency = c.Latency.withDefaults()
	return c
}

// Validate reports the first unusable field; it checks c as given, so call
// WithDefaults first to accept zero fields.
func (c Config) Validate() error {
	const op = "validate steady config"
	switch {
	case c.Rate == 0:
		return outbox.Misconfigured(op, "Rate must be > 0, or negative for no commits, got 0")
	case c.ValueSize < 0 || c.ValueSize > maxValueSize:
		return outbox.Misconfigured(op, "ValueSize must be in [0, %d], got %d", maxValueSize, c.ValueSize)
	case c.Buckets < 1:
		return outbox.Misconfigured(op, "Buckets must be >= 1, got %d", c.Buckets)
	case c.Duration <= 0:
		return outbox.Misconfigured(op, "Duration must be > 0, got %v", c.Duration)
	case c.RelayTimeout < time.Second:
		return outbox.Misconfigured(op, "RelayTimeout must be at least 1s, got %v", c.RelayTimeout)
	case c.StopMargin < 0 || c.StopMargin >= c.RelayTimeout:
		return outbox.Misconfigured(op, "StopMargin must be >= 0 and below RelayTimeout %v, got %v", c.RelayTimeout, c.StopMargin)
	case c.DoorbellDown && !c.Doorbell:
		return outbox.Misconfigured(op, "DoorbellDown needs Doorbell")
	case c.Doorbell && c.WithoutWakeUps:
		return outbox.Misconfigured(op, "Doorbell needs the writer's notifier (not WithoutWakeUps)")
	}
	r := c.Relay
	if r.RelayID != "" || r.BucketCount != 0 {
		return outbox.Misconfigured(op, "Relay.RelayID and Relay.BucketCount are set by the run (use Buckets)")
	}
	if r.ErrorBackoff != 0 || r.MaxConcurrency != 0 || r.BacklogInterval != 0 || r.MessageIDHeaderName != "" || r.StopMargin != 0 {
		return outbox.Misconfigured(op, "the relay function has no setting for ErrorBackoff, MaxConcurrency, BacklogInterval or MessageIDHeaderName; set StopMargin through Config.StopMargin")
	}
	_, err := c.functionConfig("validate")
	return err
}

// functionConfig is the relay function's configuration for this run, as
// the stack's environment gives it (lab.FunctionConfig), so the run uses
// the function's defaults and validation.
func (c Config) functionConfig(table string) (outboxlambda.Config, error) {
	o := c.Relay
	o.StopMargin = c.StopMargin
	var env map[string]string
	if c.Doorbell {
		env = lab.DoorbellEnv
	}
	return lab.FunctionConfigWith(table, c.Buckets, o, env)
}

// StartBound is "one invocation start": the simulated time from a wake-up
// sent for an orphaned bucket to the woken relay's claim in a new execution
// environment. The Invoke call, the queueing delay and the cold start, the
// publisher's first initialisation, and the relay's requests in order: the
// trust check's coordination read and head fetch, the second look after the
// initialisation, the round's heartbeat, coordination read and claims, plus
// one request of slack (a keep or release batch of the same round).
func (c Config) StartBound() time.Duration {
	l := c.Latency
	return l.Invoke + l.Start + l.ColdStart + l.KafkaInit + 7*l.DynamoDB
}

// LatencyBound is the commit-to-publish latency no message may exceed: one
// PollInterval (the owner's probe cadence) plus one invocation start
// (StartBound) plus the drain of the batch (probe, fetch, publish). A
// message beyond it waited for something slower: a schedule sweep, a lease
// that had to lapse.
func (c Config) LatencyBound(poll time.Duration) time.Duration {
	l := c.Latency
	return poll + c.StartBound() + 2*l.DynamoDB + l.Kafka
}

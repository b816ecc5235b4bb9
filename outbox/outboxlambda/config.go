package outboxlambda

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/generation"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// Defaults of Config that the core does not define.
const (
	// DefaultOutboxName is the Outbox metric dimension.
	DefaultOutboxName = outbox.DefaultMetricsName
	// DefaultKafkaAuth is the Kafka authentication mode.
	DefaultKafkaAuth = outboxconf.KafkaAuthNone
)

// Config is the functions' configuration, read from the environment
// variables named in outboxconf. LoadConfig fills every default, so a
// loaded Config has no zero field that means "default".
type Config struct {
	// Table is the outbox table (SPILLWAY_TABLE, required).
	Table string
	// PartitionKey and SortKey are the table's key attribute names
	// (SPILLWAY_PARTITION_KEY, SPILLWAY_SORT_KEY). Default "PK" and "SK".
	PartitionKey, SortKey string
	// KeyPrefix starts every outbox partition key (SPILLWAY_KEY_PREFIX).
	// Default "OUTBOX".
	KeyPrefix string
	// BucketCount is shared by every writer and relay of the table
	// (SPILLWAY_BUCKET_COUNT). Default 8.
	BucketCount int
	// DynamoDBEndpoint overrides the DynamoDB endpoint URL
	// (SPILLWAY_DYNAMODB_ENDPOINT): DynamoDB Local, the embedded server.
	// Default: the SDK's regional endpoint.
	DynamoDBEndpoint string
	// KafkaBrokers are the seed brokers as host:port
	// (SPILLWAY_KAFKA_BROKERS, comma-separated). Required by the relay.
	KafkaBrokers []string
	// KafkaAuth is none, scram-sha-512 or msk-iam (SPILLWAY_KAFKA_AUTH).
	// Default none.
	KafkaAuth string
	// KafkaTLS turns on TLS to the brokers (SPILLWAY_KAFKA_TLS). Default
	// true with scram-sha-512 and msk-iam (Amazon MSK requires it), false
	// without authentication.
	KafkaTLS bool
	// KafkaScramSecretARN is the Secrets Manager secret holding the SCRAM
	// credentials as {"username":…,"password":…}
	// (SPILLWAY_KAFKA_SCRAM_SECRET_ARN). Required with scram-sha-512.
	KafkaScramSecretARN string
	// Topics lists the topics the relay may publish to (SPILLWAY_TOPICS,
	// comma-separated). When set, the enqueue function refuses other topics,
	// which the relay could not publish. Default: any topic.
	Topics []string
	// RelayFunction is the relay function's name or ARN, invoked for
	// wake-ups (SPILLWAY_RELAY_FUNCTION). Default: none, so the enqueue
	// function sends no wake-up and the relay wakes itself
	// (AWS_LAMBDA_FUNCTION_NAME).
	RelayFunction string
	// Mode is drain or hold (SPILLWAY_MODE). Default drain.
	Mode outbox.Mode
	// PollInterval, IdleTimeout, StopMargin, LeaseDuration and
	// LeaseRenewInterval are the relay's timings (SPILLWAY_POLL_INTERVAL,
	// SPILLWAY_IDLE_TIMEOUT, SPILLWAY_STOP_MARGIN, SPILLWAY_LEASE_DURATION,
	// SPILLWAY_LEASE_RENEW_INTERVAL) as Go durations. Defaults 1s, 2s, 5s,
	// 30s and 10s.
	PollInterval, IdleTimeout, StopMargin, LeaseDuration, LeaseRenewInterval time.Duration
	// TargetLatency is how soon the relay looks for a message committed to
	// a busy bucket it holds (SPILLWAY_TARGET_LATENCY;
	// outbox.RelayOptions.TargetLatency). Default
	// outbox.DefaultTargetLatency, or PollInterval with a DoorbellTopic:
	// the rings tell the relay of every commit, so busy buckets need no
	// faster probe.
	TargetLatency time.Duration
	// DoorbellTopic is the Kafka topic of the doorbell
	// (SPILLWAY_DOORBELL_TOPIC): the enqueue function rings it after every
	// commit, and the relay listens on it for the buckets it holds and
	// fetches a rung bucket at once. It needs KafkaBrokers. Default: none
	// (the relay finds commits by probing).
	DoorbellTopic string
	// MaxIdleTimeout is the longer linger of a relay under steady traffic
	// (SPILLWAY_MAX_IDLE_TIMEOUT; outbox.RelayOptions.MaxIdleTimeout), at
	// least IdleTimeout. Default 5 × IdleTimeout (10s).
	MaxIdleTimeout time.Duration
	// BatchSize bounds the messages fetched and published per bucket per
	// round trip (SPILLWAY_BATCH_SIZE). Default 500.
	BatchSize int
	// MaxHops bounds a chain of continuation wake-ups (SPILLWAY_MAX_HOPS);
	// 0 sends none. Default 10.
	MaxHops int
	// OutboxName is the Outbox metric dimension (SPILLWAY_OUTBOX_NAME).
	// Default "outbox".
	OutboxName string
	// MetricsNamespace is the CloudWatch namespace
	// (SPILLWAY_METRICS_NAMESPACE). Default "Spillway".
	MetricsNamespace string
	// MemoryMB is the memory the relay has, in MB (SPILLWAY_MEMORY_MB, else
	// Lambda's AWS_LAMBDA_FUNCTION_MEMORY_SIZE). The relay spends it as
	// outbox.MemoryBudgetFor says: the messages it holds at once, the
	// Kafka client's buffer and Go's soft memory limit. Default 0: no
	// bound (outside Lambda, without the variable).
	MemoryMB int
	// Tracing is xray, otel or off (SPILLWAY_TRACING). Default xray. With
	// otel, the exporter is configured by the standard OTEL_* variables
	// only, and OTEL_EXPORTER_OTLP_PROTOCOL (or its _TRACES_ form) must be
	// unset or http/protobuf.
	Tracing string
	// PoisonPolicy is block or quarantine (SPILLWAY_POISON_POLICY): what
	// the relay does with a message Kafka will not take. Default block.
	PoisonPolicy outbox.PoisonPolicy
	// PoisonMaxAttempts parks a message under quarantine after that many
	// failed attempts (SPILLWAY_POISON_MAX_ATTEMPTS). Default 10.
	PoisonMaxAttempts int
	// KeepEveryRound makes the relay keep every owned lease in every round
	// and heartbeat without the keep-ahead mark, as relays of other
	// languages do (outbox.RelayOptions.KeepEveryRound). It is not read
	// from the environment: a deployed relay keeps every round by itself
	// while such a relay is around. Default false.
	KeepEveryRound bool
	// PreviousKeyPrefix and PreviousBucketCount name the previous
	// generation while the bucket count changes
	// (SPILLWAY_PREVIOUS_KEY_PREFIX, SPILLWAY_PREVIOUS_BUCKET_COUNT; both or
	// neither). The relay then drains it before it serves the current one
	// (generation.Relay), and the enqueue function writes it until it
	// is sealed (outboxddb.WriterOptions.PreviousKeyPrefix). Default: none.
	PreviousKeyPrefix   string
	PreviousBucketCount int
	// GenerationCheck makes the enqueue function's writes check that its
	// generation is not sealed (SPILLWAY_GENERATION_CHECK, see
	// outboxddb.WriterOptions.GenerationCheck). Default false.
	GenerationCheck bool
}

// ConfigError names the environment variable that makes the configuration
// unusable, its value and what is wrong. It matches outbox.ErrMisconfigured.
type ConfigError = outboxconf.VariableError

// LoadConfig reads every variable through getenv (os.Getenv in the
// functions), applies the defaults and validates the result. The error is a
// *ConfigError for the first unusable variable, in the order of Config's
// fields; cross-field problems name every variable involved.
func LoadConfig(getenv func(string) string) (Config, error) {
	p := outboxconf.NewEnv(getenv)
	c := Config{
		Table:               p.Required(outboxconf.EnvTable),
		PartitionKey:        p.Name(outboxconf.EnvPartitionKey, outboxddb.DefaultPartitionKey),
		SortKey:             p.Name(outboxconf.EnvSortKey, outboxddb.DefaultSortKey),
		KeyPrefix:           p.Name(outboxconf.EnvKeyPrefix, outboxddb.DefaultKeyPrefix),
		BucketCount:         p.Int(outboxconf.EnvBucketCount, outbox.DefaultBucketCount, 1, math.MaxInt32),
		DynamoDBEndpoint:    p.Endpoint(outboxconf.EnvDynamoDBEndpoint),
		KafkaBrokers:        p.Brokers(outboxconf.EnvKafkaBrokers),
		KafkaAuth:           p.OneOf(outboxconf.EnvKafkaAuth, DefaultKafkaAuth, outboxconf.KafkaAuthNone, outboxconf.KafkaAuthScram, outboxconf.KafkaAuthIAM),
		KafkaScramSecretARN: p.ARN(outboxconf.EnvKafkaScramSecret, "secretsmanager"),
		Topics:              p.Topics(outboxconf.EnvTopics),
		DoorbellTopic:       p.Topic(outboxconf.EnvDoorbellTopic),
		RelayFunction:       p.Function(outboxconf.EnvRelayFunction),
		Mode:                outbox.Mode(p.OneOf(outboxconf.EnvMode, string(outbox.ModeDrain), string(outbox.ModeDrain), string(outbox.ModeHold))),
		PollInterval:        p.Duration(outboxconf.EnvPollInterval, outbox.DefaultPollInterval),
		IdleTimeout:         p.Duration(outboxconf.EnvIdleTimeout, outbox.DefaultIdleTimeout),
		StopMargin:          p.Duration(outboxconf.EnvStopMargin, outbox.DefaultStopMargin),
		LeaseDuration:       p.Duration(outboxconf.EnvLeaseDuration, outbox.DefaultLeaseDuration),
		LeaseRenewInterval:  p.Duration(outboxconf.EnvLeaseRenewInterval, outbox.DefaultLeaseRenewInterval),
		BatchSize:           p.Int(outboxconf.EnvBatchSize, outbox.DefaultBatchSize, 1, math.MaxInt32),
		MaxHops:             p.Int(outboxconf.EnvMaxHops, outboxconf.DefaultMaxHops, 0, math.MaxInt32),
		OutboxName:          p.Name(outboxconf.EnvOutboxName, DefaultOutboxName),
		MetricsNamespace:    p.Name(outboxconf.EnvMetricsNamespace, outboxconf.DefaultMetricsNamespace),
		MemoryMB: p.Int(outboxconf.EnvMemoryMB,
			p.Int(outboxconf.EnvLambdaMemory, 0, 0, math.MaxInt32), 0, math.MaxInt32),
		Tracing: p.OneOf(outboxconf.EnvTracing, outboxconf.TracingXRay, outboxconf.TracingXRay, outboxconf.TracingOTel, outboxconf.TracingOff),
		PoisonPolicy: outbox.PoisonPolicy(p.OneOf(outboxconf.EnvPoisonPolicy, string(outbox.PoisonBlock),
			string(outbox.PoisonBlock), string(outbox.PoisonQuarantine))),
		PoisonMaxAttempts:   p.Int(outboxconf.EnvPoisonMaxAttempts, outbox.DefaultPoisonMaxAttempts, 1, math.MaxInt32),
		PreviousKeyPrefix:   p.Name(outboxconf.EnvPreviousKeyPrefix, ""),
		PreviousBucketCount: p.Int(outboxconf.EnvPreviousBucketCount, 0, 1, math.MaxInt32),
		GenerationCheck:     p.Bool(outboxconf.EnvGenerationCheck, false),
	}
	c.KafkaTLS = p.Bool(outboxconf.EnvKafkaTLS, c.KafkaAuth != outboxconf.KafkaAuthNone)
	target := outbox.DefaultTargetLatency
	if c.DoorbellTopic != "" {
		target = c.PollInterval
	}
	c.TargetLatency = p.Duration(outboxconf.EnvTargetLatency, target)
	c.MaxIdleTimeout = p.Duration(outboxconf.EnvMaxIdleTimeout, outbox.DefaultMaxIdleTimeoutFactor*c.IdleTimeout)
	if err := p.Err(); err != nil {
		return Config{}, err
	}
	if err := c.crossCheck(getenv); err != nil {
		return Config{}, err
	}
	return c, nil
}

// crossCheck validates what no single variable decides.
func (c Config) crossCheck(getenv func(string) string) error {
	if c.KafkaAuth == outboxconf.KafkaAuthScram && c.KafkaScramSecretARN == "" {
		return &ConfigError{Variable: outboxconf.EnvKafkaScramSecret, Value: "",
			Problem: fmt.Sprintf("required when %s=%s", outboxconf.EnvKafkaAuth, outboxconf.KafkaAuthScram)}
	}
	if c.DoorbellTopic != "" && len(c.KafkaBrokers) == 0 {
		return &ConfigError{Variable: outboxconf.EnvKafkaBrokers, Value: "",
			Problem: fmt.Sprintf("required with %s: the doorbell is a Kafka topic", outboxconf.EnvDoorbellTopic)}
	}
	if c.LeaseRenewInterval >= c.LeaseDuration {
		return &ConfigError{Variable: outboxconf.EnvLeaseRenewInterval, Value: getenv(outboxconf.EnvLeaseRenewInterval),
			Problem: fmt.Sprintf("the renew interval %v must be shorter than %s (%v), or leases lapse between renewals",
				c.LeaseRenewInterval, outboxconf.EnvLeaseDuration, c.LeaseDuration)}
	}
	if c.MaxIdleTimeout < c.IdleTimeout {
		return &ConfigError{Variable: outboxconf.EnvMaxIdleTimeout, Value: getenv(outboxconf.EnvMaxIdleTimeout),
			Problem: fmt.Sprintf("the longer linger %v must be at least %s (%v)", c.MaxIdleTimeout, outboxconf.EnvIdleTimeout, c.IdleTimeout)}
	}
	if err := c.checkTracing(getenv); err != nil {
		return err
	}
	if err := c.checkPrevious(); err != nil {
		return err
	}
	if c.PartitionKey == c.SortKey {
		return &ConfigError{Variable: outboxconf.EnvSortKey, Value: getenv(outboxconf.EnvSortKey),
			Problem: fmt.Sprintf("the sort key attribute %q equals %s; they must differ", c.SortKey, outboxconf.EnvPartitionKey)}
	}
	if err := c.StoreOptions().WithDefaults().Validate(); err != nil {
		var mis *outbox.MisconfigurationError
		detail := err.Error()
		if errors.As(err, &mis) {
			detail = mis.Detail
		}
		return &ConfigError{Variable: outboxconf.EnvPartitionKey + "/" + outboxconf.EnvSortKey,
			Value: c.PartitionKey + "/" + c.SortKey, Problem: detail}
	}
	return nil
}

// checkPrevious requires the previous generation's prefix and bucket count
// together, under a prefix of its own.
func (c Config) checkPrevious() error {
	switch {
	case c.PreviousKeyPrefix == "" && c.PreviousBucketCount == 0:
		return nil
	case c.PreviousKeyPrefix == "":
		return &ConfigError{Variable: outboxconf.EnvPreviousKeyPrefix, Problem: fmt.Sprintf("required with %s", outboxconf.EnvPreviousBucketCount)}
	case c.PreviousBucketCount == 0:
		return &ConfigError{Variable: outboxconf.EnvPreviousBucketCount, Problem: fmt.Sprintf("required with %s", outboxconf.EnvPreviousKeyPrefix)}
	case c.PreviousKeyPrefix == c.KeyPrefix:
		return &ConfigError{Variable: outboxconf.EnvPreviousKeyPrefix, Value: c.PreviousKeyPrefix,
			Problem: fmt.Sprintf("equals %s; the new generation needs a key prefix of its own", outboxconf.EnvKeyPrefix)}
	}
	return nil
}

// Previous returns the previous generation and true when one is configured.
func (c Config) Previous() (generation.Generation, bool) {
	return generation.Generation{KeyPrefix: c.PreviousKeyPrefix, BucketCount: c.PreviousBucketCount}, c.PreviousKeyPrefix != ""
}

// Current returns the generation of KeyPrefix and BucketCount.
func (c Config) Current() generation.Generation {
	return generation.Generation{KeyPrefix: c.KeyPrefix, BucketCount: c.BucketCount}
}

// checkTracing refuses a tracing mode this binary was built without, and
// in otel mode an OTLP protocol other than http/protobuf (the only exporter
// linked in).
func (c Config) checkTracing(getenv func(string) string) error {
	if _, ok := tracingModes[c.Tracing]; !ok {
		return &ConfigError{Variable: outboxconf.EnvTracing, Value: c.Tracing, Problem: tracingProblem(c.Tracing)}
	}
	if c.Tracing != outboxconf.TracingOTel {
		return nil
	}
	for _, name := range []string{outboxconf.EnvOTelTracesProtocol, outboxconf.EnvOTelProtocol} {
		if v := getenv(name); v != "" && v != outboxconf.OTelProtocolHTTP {
			return &ConfigError{Variable: name, Value: v,
				Problem: fmt.Sprintf("only %s is supported with %s=%s (the ADOT collector layer accepts it on port 4318)",
					outboxconf.OTelProtocolHTTP, outboxconf.EnvTracing, outboxconf.TracingOTel)}
		}
	}
	return nil
}

// TableOptions returns the table of c as the DynamoDB store, the writer
// and the table helpers share it (outboxddb.Options). The caller adds the
// clock, hooks and logger.
func (c Config) TableOptions() outboxddb.Options {
	return outboxddb.Options{
		TableName:    c.Table,
		PartitionKey: c.PartitionKey,
		SortKey:      c.SortKey,
		KeyPrefix:    c.KeyPrefix,
		BucketCount:  c.BucketCount,
	}
}

// StoreOptions returns the DynamoDB store options of c: its table, and
// backlog samples that count the parked partitions where relays
// quarantine.
func (c Config) StoreOptions() outboxddb.StoreOptions {
	return outboxddb.StoreOptions{Options: c.TableOptions(), CountParked: c.PoisonPolicy == outbox.PoisonQuarantine}
}

// WriterOptions returns the DynamoDB writer options of c; the caller adds
// the notifier.
func (c Config) WriterOptions() outboxddb.WriterOptions {
	return outboxddb.WriterOptions{
		Options: c.TableOptions(),
		Topics:  c.Topics,
		// The writers' check, set only where it is asked for: it makes
		// every enqueue a transaction.
		GenerationCheck: c.GenerationCheck,
		// The enqueue function's writer switches at the seal.
		PreviousKeyPrefix:   c.PreviousKeyPrefix,
		PreviousBucketCount: c.PreviousBucketCount,
	}
}

// PreviousStoreOptions returns StoreOptions on the previous generation's
// key prefix and bucket count.
func (c Config) PreviousStoreOptions() outboxddb.StoreOptions {
	o := c.StoreOptions()
	o.KeyPrefix, o.BucketCount = c.PreviousKeyPrefix, c.PreviousBucketCount
	return o
}

// RelayOptions returns the relay options of c for the relay relayID.
func (c Config) RelayOptions(relayID string) outbox.RelayOptions {
	return outbox.RelayOptions{
		RelayID:            relayID,
		BucketCount:        c.BucketCount,
		BatchSize:          c.BatchSize,
		PollInterval:       c.PollInterval,
		TargetLatency:      c.TargetLatency,
		LeaseDuration:      c.LeaseDuration,
		LeaseRenewInterval: c.LeaseRenewInterval,
		Mode:               c.Mode,
		IdleTimeout:        c.IdleTimeout,
		MaxIdleTimeout:     c.MaxIdleTimeout,
		StopMargin:         c.StopMargin,
		MaxHeldBytes:       outbox.MemoryBudgetFor(int64(c.MemoryMB) << 20).MaxHeldBytes,
		PoisonPolicy:       c.PoisonPolicy,
		PoisonMaxAttempts:  c.PoisonMaxAttempts,
		KeepEveryRound:     c.KeepEveryRound,
	}.WithDefaults()
}

// Package outboxconf holds the names that the functions, the CLI and the CDK
// stack must agree on: environment variables and CloudWatch metric names,
// and the reader of those variables (Env) that reports an unusable one by
// name. It imports only the standard library and the core, so the stack's
// module and a service's writer can use it without pulling in the AWS SDK.
package outboxconf

// Environment variables read by the functions and the CLI and set by the
// stack. Each is documented in docs/configuration.md.
const (
	EnvTable              = "SPILLWAY_TABLE"
	EnvKeyPrefix          = "SPILLWAY_KEY_PREFIX"
	EnvPartitionKey       = "SPILLWAY_PARTITION_KEY"
	EnvSortKey            = "SPILLWAY_SORT_KEY"
	EnvBucketCount        = "SPILLWAY_BUCKET_COUNT"
	EnvDynamoDBEndpoint   = "SPILLWAY_DYNAMODB_ENDPOINT"
	EnvKafkaBrokers       = "SPILLWAY_KAFKA_BROKERS"
	EnvKafkaAuth          = "SPILLWAY_KAFKA_AUTH"
	EnvKafkaTLS           = "SPILLWAY_KAFKA_TLS"
	EnvKafkaScramSecret   = "SPILLWAY_KAFKA_SCRAM_SECRET_ARN"
	EnvRelayFunction      = "SPILLWAY_RELAY_FUNCTION"
	EnvMode               = "SPILLWAY_MODE"
	EnvPollInterval       = "SPILLWAY_POLL_INTERVAL"
	EnvTargetLatency      = "SPILLWAY_TARGET_LATENCY"
	EnvIdleTimeout        = "SPILLWAY_IDLE_TIMEOUT"
	EnvMaxIdleTimeout     = "SPILLWAY_MAX_IDLE_TIMEOUT"
	EnvStopMargin         = "SPILLWAY_STOP_MARGIN"
	EnvLeaseDuration      = "SPILLWAY_LEASE_DURATION"
	EnvLeaseRenewInterval = "SPILLWAY_LEASE_RENEW_INTERVAL"
	EnvBatchSize          = "SPILLWAY_BATCH_SIZE"
	EnvMaxHops            = "SPILLWAY_MAX_HOPS"
	EnvOutboxName         = "SPILLWAY_OUTBOX_NAME"
	EnvMetricsNamespace   = "SPILLWAY_METRICS_NAMESPACE"
	EnvTopics             = "SPILLWAY_TOPICS"
	// EnvDoorbellTopic is the Kafka topic writers ring after a commit and
	// relays listen on for the buckets they hold.
	EnvDoorbellTopic = "SPILLWAY_DOORBELL_TOPIC"
	// EnvMemoryMB is the memory, in MB, the relay sizes its held messages
	// from; it overrides EnvLambdaMemory and is how a relay outside Lambda
	// (the CLI) gets a bound.
	EnvMemoryMB = "SPILLWAY_MEMORY_MB"
	// EnvLambdaMemory is set by Lambda to the function's memory in MB.
	EnvLambdaMemory      = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"
	EnvTracing           = "SPILLWAY_TRACING"
	EnvPoisonPolicy      = "SPILLWAY_POISON_POLICY"
	EnvPoisonMaxAttempts = "SPILLWAY_POISON_MAX_ATTEMPTS"
	// The previous generation a relay drains first while the bucket count
	// changes, and the writers' check that it is not sealed.
	EnvPreviousKeyPrefix   = "SPILLWAY_PREVIOUS_KEY_PREFIX"
	EnvPreviousBucketCount = "SPILLWAY_PREVIOUS_BUCKET_COUNT"
	EnvGenerationCheck     = "SPILLWAY_GENERATION_CHECK"
)

// Tracing modes accepted in EnvTracing.
const (
	// TracingXRay traces with the AWS X-Ray SDK (the default).
	TracingXRay = "xray"
	// TracingOTel traces with OpenTelemetry, exporting OTLP over HTTP to
	// the endpoint the standard OTEL_EXPORTER_OTLP_* variables name.
	TracingOTel = "otel"
	// TracingOff records no spans.
	TracingOff = "off"
)

// Standard OpenTelemetry variables the functions read in TracingOTel mode
// and the stack sets. Only the http/protobuf protocol is supported.
const (
	EnvOTelEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvOTelProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvOTelTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvOTelServiceName    = "OTEL_SERVICE_NAME"
	OTelProtocolHTTP      = "http/protobuf"
)

// Kafka authentication modes accepted in EnvKafkaAuth.
const (
	KafkaAuthNone  = "none"
	KafkaAuthScram = "scram-sha-512"
	KafkaAuthIAM   = "msk-iam"
)

// DefaultMaxHops bounds a chain of continuation wake-ups.
const DefaultMaxHops = 10

// MaxBucketCount is the largest bucket count the stack accepts: the
// largest the scale study measured the coordination partition at (1,024
// buckets and up to 128 relays, docs/benchmarks.md), where one lease round's
// read is already about 23 read units.
const MaxBucketCount = 1024

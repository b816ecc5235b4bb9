package outboxconf

// DimensionConsumer is the dimension of the inbox's metrics: the consumer
// name, one per service reading a topic.
const DimensionConsumer = "Consumer"

// Metric names the inbox (outbox/outboxinbox) emits, all counts.
const (
	// MetricRecordsConsumed counts records with a verdict: applied or
	// skipped as duplicates.
	MetricRecordsConsumed = "RecordsConsumed"
	// MetricDuplicatesSkipped counts records whose message was applied
	// before.
	MetricDuplicatesSkipped = "DuplicatesSkipped"
	// MetricConsumeFailures counts records left without a verdict: handler
	// errors, refused conditions, missing ids, exhausted conflicts.
	MetricConsumeFailures = "ConsumeFailures"
	// MetricTransactionConflicts counts transactions cancelled by a
	// conflict (each re-runs the handler).
	MetricTransactionConflicts = "TransactionConflicts"
	// MetricPayloadMismatches counts records refused because their message
	// id was already used for another topic, key or value.
	MetricPayloadMismatches = "PayloadMismatches"
	// MetricRecordsDeadLettered counts records given up after the
	// consumer's MaxAttempts and handed to its OnFailure policy.
	MetricRecordsDeadLettered = "RecordsDeadLettered"
)

// EnvInboxConsumer names the consumer of the sample consumer function (the
// inbox's Consumer option); default the function's name.
const EnvInboxConsumer = "SPILLWAY_INBOX_CONSUMER"

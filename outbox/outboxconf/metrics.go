package outboxconf

// CloudWatch namespace and dimensions of every metric the functions emit.
const (
	DefaultMetricsNamespace = "Spillway"
	DimensionOutbox         = "Outbox"
	DimensionFunction       = "FunctionName"
)

// Metric names emitted in Embedded Metric Format. The stack's alarms and
// dashboard use the same constants.
const (
	MetricMessagesPublished        = "MessagesPublished"
	MetricPublishFailures          = "PublishFailures"
	MetricPublishLatency           = "PublishLatency"
	MetricMessagesEnqueued         = "MessagesEnqueued"
	MetricEnqueueRejected          = "EnqueueRejected"
	MetricPendingMessages          = "PendingMessages"
	MetricOldestPendingAge         = "OldestPendingAge"
	MetricOwnedBuckets             = "OwnedBuckets"
	MetricLeaseClaims              = "LeaseClaims"
	MetricLeaseReleases            = "LeaseReleases"
	MetricLeaseLosses              = "LeaseLosses"
	MetricRefusedConditionalWrites = "RefusedConditionalWrites"
	MetricDynamoDBRequests         = "DynamoDBRequests"
	MetricWriteUnits               = "WriteUnits"
	MetricReadUnits                = "ReadUnits"
	MetricThrottles                = "Throttles"
	MetricBudgetUsed               = "BudgetUsed"
	MetricReleasesSkipped          = "ReleasesSkipped"
	MetricHeadRowRetries           = "HeadRowRetries"
	MetricWakeUpsSent              = "WakeUpsSent"
	MetricMessagesParked           = "MessagesParked"
	MetricParkedMessages           = "ParkedMessages"
	// MetricMessagesReplayed counts parked messages published on an
	// operator's replay (they count in MessagesPublished too).
	MetricMessagesReplayed = "MessagesReplayed"
	// MetricStrandedMessages is the gauge of messages in buckets beyond
	// the bucket count, where no relay reads them (outbox.StrandedCounter).
	MetricStrandedMessages = "StrandedMessages"
)

// CloudWatch units used by the metrics above.
const (
	UnitCount        = "Count"
	UnitMilliseconds = "Milliseconds"
	UnitSeconds      = "Seconds"
	UnitPercent      = "Percent"
)

// MetricUnits maps every metric name to its unit.
var MetricUnits = map[string]string{
	MetricMessagesPublished:        UnitCount,
	MetricPublishFailures:          UnitCount,
	MetricPublishLatency:           UnitMilliseconds,
	MetricMessagesEnqueued:         UnitCount,
	MetricEnqueueRejected:          UnitCount,
	MetricPendingMessages:          UnitCount,
	MetricOldestPendingAge:         UnitSeconds,
	MetricOwnedBuckets:             UnitCount,
	MetricLeaseClaims:              UnitCount,
	MetricLeaseReleases:            UnitCount,
	MetricLeaseLosses:              UnitCount,
	MetricRefusedConditionalWrites: UnitCount,
	MetricDynamoDBRequests:         UnitCount,
	MetricWriteUnits:               UnitCount,
	MetricReadUnits:                UnitCount,
	MetricThrottles:                UnitCount,
	MetricBudgetUsed:               UnitPercent,
	MetricReleasesSkipped:          UnitCount,
	MetricHeadRowRetries:           UnitCount,
	MetricWakeUpsSent:              UnitCount,
	MetricMessagesParked:           UnitCount,
	MetricParkedMessages:           UnitCount,
	MetricMessagesReplayed:         UnitCount,
	MetricStrandedMessages:         UnitCount,
}

package spillway

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

const (
	minute      = 60
	fiveMinutes = 5 * minute
)

// tableOperations are the DynamoDB operations Spillway issues; the table
// throttle alarm sums ThrottledRequests over them.
var tableOperations = []awsdynamodb.Operation{
	awsdynamodb.Operation_QUERY,
	awsdynamodb.Operation_PUT_ITEM,
	awsdynamodb.Operation_UPDATE_ITEM,
	awsdynamodb.Operation_DELETE_ITEM,
	awsdynamodb.Operation_BATCH_WRITE_ITEM,
	awsdynamodb.Operation_TRANSACT_WRITE_ITEMS,
}

// newAlarmTopic returns the topic alarms notify: the given one, a new one
// with the e-mail subscription, or nil. A created topic is encrypted with a
// rotated customer-managed key, because CloudWatch cannot publish to a
// topic under the AWS-managed SNS key.
func newAlarmTopic(scope constructs.Construct, a AlarmProps) awssns.ITopic {
	if a.TopicArn != "" {
		return awssns.Topic_FromTopicArn(scope, jsii.String("AlarmTopic"), jsii.String(a.TopicArn))
	}
	if a.Email == "" {
		return nil
	}
	key := awskms.NewKey(scope, jsii.String("AlarmTopicKey"), &awskms.KeyProps{
		Description:       jsii.String("Encrypts the Spillway alarm topic"),
		EnableKeyRotation: jsii.Bool(true),
	})
	// What CloudWatch needs to publish to an encrypted topic, no more, and
	// only for this account's alarms (confused deputy).
	key.AddToResourcePolicy(alarmKeyStatement(awscdk.Stack_Of(scope)), nil)
	topic := awssns.NewTopic(scope, jsii.String("AlarmTopic"), &awssns.TopicProps{
		DisplayName: jsii.String("Spillway alarms"),
		MasterKey:   key,
		EnforceSSL:  jsii.Bool(true),
	})
	topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(a.Email), nil))
	return topic
}

// alarmKeyStatement lets CloudWatch alarms of the stack's account and
// region use the alarm topic's key.
func alarmKeyStatement(stack awscdk.Stack) awsiam.PolicyStatement {
	s := awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey*"),
		Resources:  jsii.Strings("*"),
	})
	s.AddCondition(jsii.String("StringEquals"), map[string]interface{}{"aws:SourceAccount": stack.Account()})
	s.AddCondition(jsii.String("ArnLike"), map[string]interface{}{"aws:SourceArn": stack.FormatArn(&awscdk.ArnComponents{
		Service:      jsii.String("cloudwatch"),
		Resource:     jsii.String("alarm"),
		ResourceName: jsii.String("*"),
		ArnFormat:    awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})})
	return s
}

type alarmInputs struct {
	props          OutboxProps
	emf            emf
	relay, enqueue awslambda.IFunction
	relayName      *string
	table          awsdynamodb.ITable
	topic          awssns.ITopic
}

// Alarm tuning that is not a prop: each value is explained where it is used
// and in infra/README.md.
const (
	// publishFailurePeriods and publishFailureDatapoints: failures in 2 of
	// the last 5 minutes. One failing minute is often a leader election the
	// client could not ride out; a stuck head row is retried at least every
	// renew interval (10 s), so it fails in every minute and fires within 2.
	publishFailurePeriods    = 5
	publishFailureDatapoints = 2
	// livenessPeriod: the schedule starts a relay run every minute, and
	// every run writes a document with BudgetUsed at its end, so 10 minutes
	// without one means the fleet stopped.
	livenessPeriod = 10 * minute
	// enqueueDurationPercent of the enqueue timeout, as its maximum over 5
	// minutes: the next slow request times out.
	enqueueDurationPercent = 90
	// relayThrottleThreshold and relayThrottlePeriods: a burst of wake-ups
	// beyond the reserved concurrency is throttled and retried by Lambda's
	// asynchronous queue, which is normal. The steady scenario (10 commits
	// a second, about 600 wake-ups a minute, reserved concurrency 8) needed
	// 5 environments and was never throttled, so throttles in every minute
	// for 5 minutes mean wake-ups arrive faster than the fleet can take
	// them, not a burst.
	relayThrottleThreshold = 0
	relayThrottlePeriods   = 5
	// strandedPeriod: the holder of bucket 0 counts the stranded messages
	// every tenth backlog interval (5 minutes by default) of the runs that
	// join, so 15 minutes hold a count while relays work; without one the
	// alarm keeps its state (an idle outbox counts nothing), and a count
	// of 0 after `spillway layout rehome` returns it to OK.
	strandedPeriod = 15 * minute
)

// alarmDef is one alarm: what it watches, when it fires, and how missing
// data counts.
type alarmDef struct {
	id, description     string
	metric              awscloudwatch.IMetric
	threshold           float64
	periods, datapoints float64
	below               bool // fire below the threshold instead of above
	missingBreaches     bool
	missingIgnored      bool // keep the state while no data arrives
}

// newAlarms creates the alarms. Missing data is not breaching, except for
// the liveness alarm: the EMF metrics exist only while relays run, and an
// idle outbox is healthy, but a fleet that stopped running reports nothing
// at all.
func newAlarms(scope constructs.Construct, in alarmInputs) []awscloudwatch.Alarm {
	group := constructs.NewConstruct(scope, jsii.String("Alarms"))
	specs := append(relayAlarms(in), enqueueAlarms(in)...)
	specs = append(specs, alarmDef{
		id:          "TableThrottles",
		description: "DynamoDB throttled requests on the outbox table",
		metric: in.table.MetricThrottledRequestsForOperations(&awsdynamodb.OperationsMetricOptions{
			Operations: &tableOperations,
			Period:     seconds(fiveMinutes),
		}),
		periods: 1, datapoints: 1,
	})
	alarms := make([]awscloudwatch.Alarm, 0, len(specs))
	for _, s := range specs {
		op, missing := awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD, awscloudwatch.TreatMissingData_NOT_BREACHING
		if s.below {
			op = awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD
		}
		if s.missingBreaches {
			missing = awscloudwatch.TreatMissingData_BREACHING
		}
		if s.missingIgnored {
			missing = awscloudwatch.TreatMissingData_IGNORE
		}
		alarm := awscloudwatch.NewAlarm(group, jsii.String(s.id), &awscloudwatch.AlarmProps{
			Metric:             s.metric,
			AlarmDescription:   jsii.String(s.description),
			Threshold:          jsii.Number(s.threshold),
			ComparisonOperator: op,
			EvaluationPeriods:  jsii.Number(s.periods),
			DatapointsToAlarm:  jsii.Number(s.datapoints),
			TreatMissingData:   missing,
		})
		if in.topic != nil {
			action := awscloudwatchactions.NewSnsAction(in.topic)
			alarm.AddAlarmAction(action)
			alarm.AddOkAction(action)
		}
		alarms = append(alarms, alarm)
	}
	return alarms
}

// relayAlarms watch the relay: its backlog, failures, parked messages,
// liveness and Lambda health.
func relayAlarms(in alarmInputs) []alarmDef {
	p := in.props
	sum5 := &awscloudwatch.MetricOptions{Statistic: jsii.String(statSum), Period: seconds(fiveMinutes)}
	return []alarmDef{
		{
			id:          "OldestPendingAge",
			description: fmt.Sprintf("Oldest pending outbox message is older than %v", p.Alarms.OldestPendingAge),
			metric:      in.emf.metric(in.relayName, outboxconf.MetricOldestPendingAge, statMaximum, minute),
			threshold:   p.Alarms.OldestPendingAge.Seconds(),
			periods:     1, datapoints: 1,
		},
		{
			id: "PublishFailures",
			description: fmt.Sprintf("More than %d Kafka publish failures a minute in %d of the last %d minutes",
				p.Alarms.PublishFailures, publishFailureDatapoints, publishFailurePeriods),
			metric:    in.emf.metric(in.relayName, outboxconf.MetricPublishFailures, statSum, minute),
			threshold: float64(p.Alarms.PublishFailures),
			periods:   publishFailurePeriods, datapoints: publishFailureDatapoints,
		},
		{
			id:          "ParkedMessages",
			description: "Messages are parked (SPILLWAY_POISON_POLICY=quarantine): list them with spillway parked list",
			metric:      in.emf.metric(in.relayName, outboxconf.MetricParkedMessages, statMaximum, fiveMinutes),
			periods:     1, datapoints: 1,
		},
		{
			id:          "StrandedMessages",
			description: "Messages wait in buckets beyond the bucket count, where no relay reads them: a writer uses another count. Fix it, then run spillway layout rehome",
			metric:      in.emf.metric(in.relayName, outboxconf.MetricStrandedMessages, statMaximum, strandedPeriod),
			periods:     1, datapoints: 1,
			missingIgnored: true,
		},
		{
			id:          "RelayNotRunning",
			description: fmt.Sprintf("No relay run completed in %d minutes although the schedule starts one every minute", livenessPeriod/minute),
			metric:      in.emf.metric(in.relayName, outboxconf.MetricBudgetUsed, statSampleCount, livenessPeriod),
			threshold:   1, below: true, missingBreaches: true,
			periods: 1, datapoints: 1,
		},
		{
			id:          "RelayErrors",
			description: "The relay function failed",
			metric:      in.relay.MetricErrors(sum5),
			periods:     1, datapoints: 1,
		},
		{
			id:          "RelayAsyncEventsDropped",
			description: "Relay wake-ups were dropped (too old or out of retries): messages wait for the next schedule",
			metric:      in.relay.Metric(jsii.String("AsyncEventsDropped"), sum5),
			periods:     1, datapoints: 1,
		},
		{
			id: "RelayThrottles",
			description: fmt.Sprintf("More than %d relay throttles a minute for %d minutes: wake-ups pile up behind the reserved concurrency",
				relayThrottleThreshold, relayThrottlePeriods),
			metric:    in.relay.MetricThrottles(&awscloudwatch.MetricOptions{Statistic: jsii.String(statSum), Period: seconds(minute)}),
			threshold: relayThrottleThreshold,
			periods:   relayThrottlePeriods, datapoints: relayThrottlePeriods,
		},
		{
			id:          "RelayDuration",
			description: fmt.Sprintf("Relay p99 duration above %.1f%% of its %v timeout: stops overrun the stop margin", p.Alarms.DurationPercent, p.RelayTimeout),
			metric:      in.relay.MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String(statP99), Period: seconds(fiveMinutes)}),
			threshold:   float64(p.RelayTimeout.Milliseconds()) * p.Alarms.DurationPercent / 100,
			periods:     1, datapoints: 1,
		},
		{
			id:          "ReleasesSkipped",
			description: "A relay reached its deadline without releasing its leases",
			metric:      in.emf.metric(in.relayName, outboxconf.MetricReleasesSkipped, statSum, fiveMinutes),
			periods:     1, datapoints: 1,
		},
	}
}

// enqueueAlarms watch the enqueue function's Lambda health.
func enqueueAlarms(in alarmInputs) []alarmDef {
	sum5 := &awscloudwatch.MetricOptions{Statistic: jsii.String(statSum), Period: seconds(fiveMinutes)}
	timeout := in.props.EnqueueTimeout
	return []alarmDef{
		{
			id:          "EnqueueErrors",
			description: "The enqueue function failed (infrastructure errors; refused requests are not errors)",
			metric:      in.enqueue.MetricErrors(sum5),
			periods:     1, datapoints: 1,
		},
		{
			id:          "EnqueueThrottles",
			description: "Enqueue invocations were throttled: producers got TooManyRequestsException",
			metric:      in.enqueue.MetricThrottles(sum5),
			periods:     1, datapoints: 1,
		},
		{
			id:          "EnqueueDuration",
			description: fmt.Sprintf("An enqueue took more than %d%% of its %v timeout", enqueueDurationPercent, timeout),
			metric:      in.enqueue.MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String(statMaximum), Period: seconds(fiveMinutes)}),
			threshold:   float64(timeout.Milliseconds()) * enqueueDurationPercent / 100,
			periods:     1, datapoints: 1,
		},
	}
}

func seconds(n float64) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(n))
}

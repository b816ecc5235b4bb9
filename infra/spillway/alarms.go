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
	props     OutboxProps
	emf       emf
	relay     awslambda.IFunction
	relayName *string
	table     awsdynamodb.ITable
	topic     awssns.ITopic
}

// newAlarms creates the alarms. Missing data is never breaching: the EMF
// metrics exist only while relays run, and an idle outbox is healthy.
func newAlarms(scope constructs.Construct, in alarmInputs) []awscloudwatch.Alarm {
	group := constructs.NewConstruct(scope, jsii.String("Alarms"))
	p := in.props
	timeoutMs := float64(p.RelayTimeout.Milliseconds())
	specs := []struct {
		id, description     string
		metric              awscloudwatch.IMetric
		threshold           float64
		periods, datapoints float64
	}{
		{
			id:          "OldestPendingAge",
			description: fmt.Sprintf("Oldest pending outbox message is older than %v", p.Alarms.OldestPendingAge),
			metric:      in.emf.metric(in.relayName, outboxconf.MetricOldestPendingAge, statMaximum, minute),
			threshold:   p.Alarms.OldestPendingAge.Seconds(),
			periods:     1, datapoints: 1,
		},
		{
			id:          "PublishFailures",
			description: fmt.Sprintf("More than %d Kafka publish failures in every minute for 5 minutes", p.Alarms.PublishFailures),
			metric:      in.emf.metric(in.relayName, outboxconf.MetricPublishFailures, statSum, minute),
			threshold:   float64(p.Alarms.PublishFailures),
			periods:     5, datapoints: 5,
		},
		{
			id:          "RelayErrors",
			description: "The relay function failed",
			metric:      in.relay.MetricErrors(&awscloudwatch.MetricOptions{Statistic: jsii.String(statSum), Period: seconds(fiveMinutes)}),
			periods:     1, datapoints: 1,
		},
		{
			id:          "RelayThrottles",
			description: "Relay invocations were throttled (reserved concurrency reached)",
			metric:      in.relay.MetricThrottles(&awscloudwatch.MetricOptions{Statistic: jsii.String(statSum), Period: seconds(fiveMinutes)}),
			periods:     1, datapoints: 1,
		},
		{
			id:          "RelayDuration",
			description: fmt.Sprintf("Relay p99 duration above %.1f%% of its %v timeout: stops overrun the stop margin", p.Alarms.DurationPercent, p.RelayTimeout),
			metric:      in.relay.MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String(statP99), Period: seconds(fiveMinutes)}),
			threshold:   timeoutMs * p.Alarms.DurationPercent / 100,
			periods:     1, datapoints: 1,
		},
		{
			id:          "ReleasesSkipped",
			description: "A relay reached its deadline without releasing its leases",
			metric:      in.emf.metric(in.relayName, outboxconf.MetricReleasesSkipped, statSum, fiveMinutes),
			periods:     1, datapoints: 1,
		},
		{
			id:          "TableThrottles",
			description: "DynamoDB throttled requests on the outbox table",
			metric: in.table.MetricThrottledRequestsForOperations(&awsdynamodb.OperationsMetricOptions{
				Operations: &tableOperations,
				Period:     seconds(fiveMinutes),
			}),
			periods: 1, datapoints: 1,
		},
	}
	alarms := make([]awscloudwatch.Alarm, 0, len(specs))
	for _, s := range specs {
		alarm := awscloudwatch.NewAlarm(group, jsii.String(s.id), &awscloudwatch.AlarmProps{
			Metric:             s.metric,
			AlarmDescription:   jsii.String(s.description),
			Threshold:          jsii.Number(s.threshold),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			EvaluationPeriods:  jsii.Number(s.periods),
			DatapointsToAlarm:  jsii.Number(s.datapoints),
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
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

func seconds(n float64) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(n))
}

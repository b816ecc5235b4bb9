package spillway

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

const (
	widgetWidth  = 12
	widgetHeight = 6
)

type dashboardInputs struct {
	emf                  emf
	relay, enqueue       awslambda.IFunction
	relayName, enqueueFn *string
	alarms               []awscloudwatch.Alarm
}

// newDashboard lays out backlog, throughput, latency, leases and cost per
// message over the functions' EMF metrics, then the relay's Lambda health.
func newDashboard(scope constructs.Construct, in dashboardInputs) awscloudwatch.Dashboard {
	relay := func(name, stat string) awscloudwatch.IMetric {
		return in.emf.metric(in.relayName, name, stat, minute)
	}
	enqueue := func(name, stat string) awscloudwatch.IMetric {
		return in.emf.metric(in.enqueueFn, name, stat, minute)
	}
	graph := func(title string, left, right []awscloudwatch.IMetric) awscloudwatch.IWidget {
		props := &awscloudwatch.GraphWidgetProps{
			Title:  jsii.String(title),
			Width:  jsii.Number(widgetWidth),
			Height: jsii.Number(widgetHeight),
			Left:   &left,
		}
		if len(right) > 0 {
			props.Right = &right
		}
		return awscloudwatch.NewGraphWidget(props)
	}
	published := relay(outboxconf.MetricMessagesPublished, statSum)
	// Capacity units are spent by both functions (enqueue writes, relay
	// reads, deletes and coordinates); divide their sum by what reached
	// Kafka.
	perMessage := func(label, unit string) awscloudwatch.IMetric {
		// Metric ids must be unique per graph; both expressions share
		// "published" (the same metric) and name their units apart.
		id := strings.ToLower(unit)
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(fmt.Sprintf("(%[1]s_relay + %[1]s_enqueue) / published", id)),
			Label:      jsii.String(label),
			Period:     seconds(minute),
			UsingMetrics: &map[string]awscloudwatch.IMetric{
				id + "_relay":   relay(unit, statSum),
				id + "_enqueue": enqueue(unit, statSum),
				"published":     published,
			},
		})
	}
	dashboard := awscloudwatch.NewDashboard(scope, jsii.String("Dashboard"), nil)
	dashboard.AddWidgets(
		graph("Backlog",
			[]awscloudwatch.IMetric{relay(outboxconf.MetricPendingMessages, statMaximum), relay(outboxconf.MetricStrandedMessages, statMaximum)},
			[]awscloudwatch.IMetric{relay(outboxconf.MetricOldestPendingAge, statMaximum)}),
		graph("Throughput",
			[]awscloudwatch.IMetric{published, enqueue(outboxconf.MetricMessagesEnqueued, statSum)},
			[]awscloudwatch.IMetric{relay(outboxconf.MetricPublishFailures, statSum)}),
	)
	dashboard.AddWidgets(
		graph("Publish latency (commit to ack)",
			[]awscloudwatch.IMetric{
				relay(outboxconf.MetricPublishLatency, statP50),
				relay(outboxconf.MetricPublishLatency, statP99),
			}, nil),
		graph("Leases",
			[]awscloudwatch.IMetric{
				relay(outboxconf.MetricLeaseClaims, statSum),
				relay(outboxconf.MetricLeaseReleases, statSum),
				relay(outboxconf.MetricLeaseLosses, statSum),
				relay(outboxconf.MetricRefusedConditionalWrites, statSum),
			},
			[]awscloudwatch.IMetric{relay(outboxconf.MetricOwnedBuckets, statMaximum)}),
	)
	dashboard.AddWidgets(
		graph("Cost per published message (capacity units)",
			[]awscloudwatch.IMetric{
				perMessage("Write units per message", outboxconf.MetricWriteUnits),
				perMessage("Read units per message", outboxconf.MetricReadUnits),
			}, nil),
		graph("Relay function",
			[]awscloudwatch.IMetric{
				in.relay.MetricInvocations(&awscloudwatch.MetricOptions{Statistic: jsii.String(statSum)}),
				in.relay.MetricErrors(&awscloudwatch.MetricOptions{Statistic: jsii.String(statSum)}),
				in.relay.MetricThrottles(&awscloudwatch.MetricOptions{Statistic: jsii.String(statSum)}),
			},
			[]awscloudwatch.IMetric{in.relay.MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String(statP99)})}),
	)
	sum := &awscloudwatch.MetricOptions{Statistic: jsii.String(statSum)}
	dashboard.AddWidgets(
		graph("Poison messages",
			[]awscloudwatch.IMetric{relay(outboxconf.MetricMessagesParked, statSum), relay(outboxconf.MetricMessagesReplayed, statSum), relay(outboxconf.MetricHeadRowRetries, statSum)},
			[]awscloudwatch.IMetric{relay(outboxconf.MetricParkedMessages, statMaximum)}),
		graph("Relay wake-ups and runs",
			[]awscloudwatch.IMetric{
				relay(outboxconf.MetricWakeUpsSent, statSum),
				in.relay.Metric(jsii.String("AsyncEventsDropped"), sum),
				relay(outboxconf.MetricBudgetUsed, statSampleCount),
			},
			[]awscloudwatch.IMetric{relay(outboxconf.MetricBudgetUsed, statMaximum)}),
	)
	dashboard.AddWidgets(
		graph("Enqueue function",
			[]awscloudwatch.IMetric{
				in.enqueue.MetricInvocations(sum),
				in.enqueue.MetricErrors(sum),
				in.enqueue.MetricThrottles(sum),
				enqueue(outboxconf.MetricEnqueueRejected, statSum),
			},
			[]awscloudwatch.IMetric{in.enqueue.MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String(statMaximum)})}),
		graph("DynamoDB requests and throttles",
			[]awscloudwatch.IMetric{relay(outboxconf.MetricDynamoDBRequests, statSum), enqueue(outboxconf.MetricDynamoDBRequests, statSum)},
			[]awscloudwatch.IMetric{relay(outboxconf.MetricThrottles, statSum), enqueue(outboxconf.MetricThrottles, statSum)}),
	)
	if len(in.alarms) > 0 {
		alarms := make([]interfacesawscloudwatch.IAlarmRef, len(in.alarms))
		for i, a := range in.alarms {
			alarms[i] = a
		}
		dashboard.AddWidgets(awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
			Title:  jsii.String("Alarms"),
			Alarms: &alarms,
			Width:  jsii.Number(2 * widgetWidth),
		}))
	}
	return dashboard
}

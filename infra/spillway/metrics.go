package spillway

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/jsii-runtime-go"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// Statistics used by alarms and the dashboard.
const (
	statSum     = "Sum"
	statMaximum = "Maximum"
	// statSampleCount counts the documents that carried a metric.
	statSampleCount = "SampleCount"
	statP50         = "p50"
	statP99         = "p99"
)

// emf builds metrics the functions emit in Embedded Metric Format, with
// the dimension set they use: Outbox and FunctionName.
type emf struct {
	namespace string
	outbox    string
}

func (e emf) metric(function *string, name, stat string, period float64) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:  jsii.String(e.namespace),
		MetricName: jsii.String(name),
		DimensionsMap: &map[string]*string{
			outboxconf.DimensionOutbox:   jsii.String(e.outbox),
			outboxconf.DimensionFunction: function,
		},
		Statistic: jsii.String(stat),
		Period:    awscdk.Duration_Seconds(jsii.Number(period)),
	})
}

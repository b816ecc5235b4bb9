package spillway

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// Reasons for the cdk-nag findings the construct causes on purpose. Each
// suppression names one rule, one resource and, for wildcards, the exact
// finding it covers.
const (
	reasonXRay            = "X-Ray PutTraceSegments and PutTelemetryRecords support no resource-level permissions; AWS requires Resource \"*\" for active tracing."
	reasonProviderRuntime = "CDK's own AwsCustomResource provider (writes the table's layout record and reads the MSK bootstrap brokers at deploy time); CDK picks the newest Node.js runtime it knows to exist in every region (nodejs24.x), while the rule wants the newest one in its catalogue."
	reasonWakeUpsAreHints = "Wake-ups are hints: the relay's asynchronous invocations are not retried and expire after a minute, because the schedule sweeps every bucket anyway; a failed or dropped wake-up delays messages by at most one schedule interval and loses none, so a dead-letter queue or failure destination would only collect events nobody needs to replay."
	reasonSynchronous     = "The enqueue function is invoked synchronously by producers, which receive every error in the response; it has no asynchronous events to keep."
	reasonStreamHints     = "Stream records are only wake-up hints: the handler never fails a batch and the schedule finds every message, so a failed batch needs no destination."
	reasonEmailAlarms     = "The e-mail subscription only forwards alarm notifications; the alarms' state and history stay in CloudWatch, so an undeliverable e-mail loses nothing a dead-letter queue would need to keep."
	reasonProvider        = "CDK's own AwsCustomResource provider, run at deployment to write the table's layout record and look up the MSK bootstrap brokers; its memory, runtime, tracing and error handling are CDK's, and a failed call fails the deployment."
	reasonENI             = "Lambda creates, describes and deletes the relay's VPC network interfaces before they exist; the EC2 network-interface actions (AWSLambdaVPCAccessExecutionRole's) require Resource \"*\"."
)

// AddNagPacks runs the cdk-nag packs the construct is checked against on
// every stack of app: AwsSolutions and Serverless. Call it from your app so
// your own resources are held to the same rules.
func AddNagPacks(app awscdk.App) {
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	awscdk.Aspects_Of(app).Add(cdknag.NewServerlessChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
}

// suppressNagFindings records why each wildcard the construct grants is
// needed. Only the "Resource::*" finding is suppressed, so any other
// wildcard added later still fails the checks.
func (o *outbox) suppressNagFindings() {
	relayReason := reasonXRay
	if o.props.Network != nil {
		relayReason += " " + reasonENI
	}
	suppressWildcard(o.relay.role.Node().FindChild(jsii.String("DefaultPolicy")), relayReason)
	suppressWildcard(o.enqueue.role.Node().FindChild(jsii.String("DefaultPolicy")), reasonXRay)
	suppress(o.relay.fn.Node().DefaultChild(), reasonWakeUpsAreHints, "Serverless-LambdaDLQ")
	suppress(o.relay.fn.Node().FindChild(jsii.String("EventInvokeConfig")).Node().DefaultChild(), reasonWakeUpsAreHints, "Serverless-LambdaAsyncFailureDestination")
	suppress(o.enqueue.fn.Node().DefaultChild(), reasonSynchronous, "Serverless-LambdaDLQ")
	if o.streamsTrigger != nil {
		suppress(o.streamsTrigger.Node().DefaultChild(), reasonStreamHints, "Serverless-LambdaEventSourceMappingDestination")
	}
	if topic := o.Node().TryFindChild(jsii.String("AlarmTopic")); topic != nil && o.props.Alarms.Email != "" {
		if sub := topic.Node().TryFindChild(jsii.String(o.props.Alarms.Email)); sub != nil {
			suppress(sub.Node().DefaultChild(), reasonEmailAlarms, "Serverless-SNSRedrivePolicy")
		}
	}
}

// suppress records reason for rules on one construct and its children.
func suppress(c constructs.IConstruct, reason string, rules ...string) {
	var s []*cdknag.NagPackSuppression
	for _, r := range rules {
		s = append(s, &cdknag.NagPackSuppression{Id: jsii.String(r), Reason: jsii.String(reason)})
	}
	cdknag.NagSuppressions_AddResourceSuppressions(c, &s, jsii.Bool(true))
}

// awsCustomResourceProvider is the construct id of the singleton function
// behind every AwsCustomResource in a stack (CDK's fixed provider UUID).
const awsCustomResourceProvider = "AWS679f53fac002430cb0da5b7982bd2287"

func suppressProviderRuntime(scope constructs.Construct) {
	provider := awscdk.Stack_Of(scope).Node().TryFindChild(jsii.String(awsCustomResourceProvider))
	if provider == nil {
		return
	}
	suppress(provider, reasonProviderRuntime, "AwsSolutions-L1")
	suppress(provider, reasonProvider, "Serverless-LambdaDefaultMemorySize", "Serverless-LambdaDLQ",
		"Serverless-LambdaLatestVersion", "Serverless-LambdaTracing")
}

func suppressWildcard(policy constructs.IConstruct, reason string) {
	cdknag.NagSuppressions_AddResourceSuppressions(policy, &[]*cdknag.NagPackSuppression{{
		Id:        jsii.String("AwsSolutions-IAM5"),
		Reason:    jsii.String(reason),
		AppliesTo: &[]interface{}{jsii.String("Resource::*")},
	}}, jsii.Bool(true))
}

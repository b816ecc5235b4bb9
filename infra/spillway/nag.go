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
	reasonProviderRuntime = "CDK's own AwsCustomResource provider (reads the MSK bootstrap brokers at deploy time); CDK picks the newest Node.js runtime it knows to exist in every region (nodejs24.x), while the rule wants the newest one in its catalogue."
	reasonENI             = "Lambda creates, describes and deletes the relay's VPC network interfaces before they exist; the EC2 network-interface actions (AWSLambdaVPCAccessExecutionRole's) require Resource \"*\"."
)

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
}

// awsCustomResourceProvider is the construct id of the singleton function
// behind every AwsCustomResource in a stack (CDK's fixed provider UUID).
const awsCustomResourceProvider = "AWS679f53fac002430cb0da5b7982bd2287"

func suppressProviderRuntime(scope constructs.Construct) {
	provider := awscdk.Stack_Of(scope).Node().TryFindChild(jsii.String(awsCustomResourceProvider))
	if provider == nil {
		return
	}
	cdknag.NagSuppressions_AddResourceSuppressions(provider, &[]*cdknag.NagPackSuppression{{
		Id:     jsii.String("AwsSolutions-L1"),
		Reason: jsii.String(reasonProviderRuntime),
	}}, jsii.Bool(true))
}

func suppressWildcard(policy constructs.IConstruct, reason string) {
	cdknag.NagSuppressions_AddResourceSuppressions(policy, &[]*cdknag.NagPackSuppression{{
		Id:        jsii.String("AwsSolutions-IAM5"),
		Reason:    jsii.String(reason),
		AppliesTo: &[]interface{}{jsii.String("Resource::*")},
	}}, jsii.Bool(true))
}

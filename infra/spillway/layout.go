package spillway

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/customresources"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// newLayoutRecord writes the table's layout record of the outbox's key
// prefix at every deployment (create and update), with one conditional
// UpdateItem (outboxconf.LayoutRecordCall): every Spillway writer, relay and
// command then checks its bucket count against the stack's. A deployment
// whose bucketCount differs from the record fails and rolls back: a count
// changes only through a new generation, under a new key prefix, whose
// record this writes (docs/operations.md#changing-the-bucket-count).
func newLayoutRecord(scope constructs.Construct, p OutboxProps, table awsdynamodb.ITable, calls sdkCalls) {
	by := fmt.Sprintf("CDK stack %s", *awscdk.Stack_Of(scope).StackName())
	call := &customresources.AwsSdkCall{
		Service:            jsii.String("DynamoDB"),
		Action:             jsii.String("updateItem"),
		Parameters:         outboxconf.LayoutRecordCall(*table.TableName(), p.PartitionKey, p.SortKey, p.KeyPrefix, p.BucketCount, by),
		PhysicalResourceId: customresources.PhysicalResourceId_Of(jsii.String(p.KeyPrefix + "#COORDINATION/" + outboxconf.LayoutSortKey)),
	}
	update := awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Effect:    awsiam.Effect_ALLOW,
		Actions:   jsii.Strings("dynamodb:UpdateItem"),
		Resources: &[]*string{table.TableArn()},
		Conditions: &map[string]any{"ForAllValues:StringEquals": map[string]any{
			"dynamodb:LeadingKeys": []string{p.KeyPrefix + "#COORDINATION"},
		}},
	})
	customresources.NewAwsCustomResource(scope, jsii.String("LayoutRecord"), &customresources.AwsCustomResourceProps{
		OnCreate:            call,
		OnUpdate:            call,
		Role:                calls.role,
		LogGroup:            calls.logs,
		InstallLatestAwsSdk: jsii.Bool(false),
		Policy:              customresources.AwsCustomResourcePolicy_FromStatements(&[]awsiam.PolicyStatement{update}),
	})
	suppressProviderRuntime(scope)
}

// sdkCalls is the role and log group of the stack's deploy-time AWS SDK
// calls (AwsCustomResource): every such resource in a stack runs on one
// provider function, whose role is the first one given, so all of them
// share this one.
type sdkCalls struct {
	role awsiam.Role
	logs awslogs.LogGroup
}

// newSdkCalls creates the role with logs scoped to the calls' own log
// group, which keeps AWSLambdaBasicExecutionRole (logs on *) away.
func newSdkCalls(scope constructs.Construct, retention awslogs.RetentionDays) sdkCalls {
	c := constructs.NewConstruct(scope, jsii.String("SdkCalls"))
	logs := awslogs.NewLogGroup(c, jsii.String("Logs"), &awslogs.LogGroupProps{
		Retention:     retention,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	role := awsiam.NewRole(c, jsii.String("Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("Runs the deploy-time calls: the table's layout record, the MSK bootstrap brokers"),
	})
	role.AddToPrincipalPolicy(statement([]string{"logs:CreateLogStream", "logs:PutLogEvents"}, logs.LogGroupArn()))
	return sdkCalls{role: role, logs: logs}
}

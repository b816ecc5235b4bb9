package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/spillway-dev/spillway/infra/spillway"
)

// outboxID is the construct id of the outbox inside the stack; it is part
// of the relay's default name (<stackName>-Outbox-relay).
const outboxID = "Outbox"

// SpillwayStackProps configure SpillwayStack.
type SpillwayStackProps struct {
	awscdk.StackProps
	// Outbox configures the outbox; ExistingTable is filled from the fields
	// below when they are set.
	Outbox spillway.OutboxProps
	// ExistingTableName imports a table by name instead of creating one.
	ExistingTableName string
	// ExistingTableArn imports a table by ARN instead of creating one.
	ExistingTableArn string
	// ExistingTableStreamArn is the imported table's stream (for the
	// Streams trigger).
	ExistingTableStreamArn string
}

// SpillwayStack is the deployable stack: one outbox plus its outputs.
type SpillwayStack struct {
	awscdk.Stack
	Outbox spillway.Outbox
}

// NewSpillwayStack defines the stack. It panics on invalid props, like
// spillway.NewOutbox.
func NewSpillwayStack(scope constructs.Construct, id string, props *SpillwayStackProps) SpillwayStack {
	stack := awscdk.NewStack(scope, jsii.String(id), &props.StackProps)
	op := props.Outbox
	if props.ExistingTableName != "" || props.ExistingTableArn != "" {
		attrs := &awsdynamodb.TableAttributes{}
		if props.ExistingTableName != "" {
			attrs.TableName = jsii.String(props.ExistingTableName)
		} else {
			attrs.TableArn = jsii.String(props.ExistingTableArn)
		}
		if props.ExistingTableStreamArn != "" {
			attrs.TableStreamArn = jsii.String(props.ExistingTableStreamArn)
		}
		op.ExistingTable = awsdynamodb.Table_FromTableAttributes(stack, jsii.String("ExistingTable"), attrs)
	}
	ob := spillway.NewOutbox(stack, outboxID, &op)

	output := func(id, description string, value *string) {
		awscdk.NewCfnOutput(stack, jsii.String(id), &awscdk.CfnOutputProps{
			Description: jsii.String(description),
			Value:       value,
		})
	}
	output("TableName", "Outbox table (SPILLWAY_TABLE)", ob.Table().TableName())
	output("TableArn", "Outbox table ARN", ob.Table().TableArn())
	output("RelayFunctionName", "Relay function (SPILLWAY_RELAY_FUNCTION for writers' wake-ups)", ob.Relay().FunctionName())
	output("EnqueueFunctionName", "Enqueue function for non-Go producers", ob.Enqueue().FunctionName())
	output("WritersPolicyArn", "Managed policy to attach to the roles of services that enqueue", ob.WritersPolicy().ManagedPolicyArn())
	output("DashboardName", "CloudWatch dashboard", ob.Dashboard().DashboardName())
	if topic := ob.AlarmTopic(); topic != nil {
		output("AlarmTopicArn", "SNS topic the alarms notify", topic.TopicArn())
	}
	return SpillwayStack{Stack: stack, Outbox: ob}
}

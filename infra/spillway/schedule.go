package spillway

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// ScheduleInput is the event the sweep sends the relay (design §7).
const ScheduleInput = `{"trigger":"schedule"}`

// newSchedule creates the EventBridge Scheduler sweep. The L1 resource
// keeps the target role's policy to exactly lambda:InvokeFunction on the
// relay (the L2 target also grants every version and alias, "<arn>:*").
// The flexible window is off because a heartbeat must not drift, and a
// missed tick is not retried: the next one comes within a minute and a
// stale one is worthless.
func newSchedule(scope constructs.Construct, p OutboxProps, relayArn *string) (awsscheduler.CfnSchedule, awsiam.Role) {
	group := constructs.NewConstruct(scope, jsii.String("Schedule"))
	stack := awscdk.Stack_Of(scope)
	role := awsiam.NewRole(group, jsii.String("Role"), &awsiam.RoleProps{
		// SourceAccount and SourceArn stop another account's schedules,
		// and schedules of other groups in this account, from using the
		// role (confused deputy). The schedule's own ARN would be a cycle
		// (the schedule names the role); its group, "default", is fixed.
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]interface{}{
				"StringEquals": map[string]*string{"aws:SourceAccount": stack.Account()},
				"ArnEquals":    map[string]*string{"aws:SourceArn": scheduleGroupArn(stack)},
			},
		}),
		Description: jsii.String("Lets EventBridge Scheduler invoke the Spillway relay"),
	})
	role.AddToPrincipalPolicy(statement([]string{"lambda:InvokeFunction"}, relayArn))
	schedule := awsscheduler.NewCfnSchedule(group, jsii.String("Sweep"), &awsscheduler.CfnScheduleProps{
		Description:        jsii.String("Spillway relay sweep: drains buckets no live relay holds"),
		ScheduleExpression: jsii.String(p.ScheduleRate),
		State:              jsii.String("ENABLED"),
		FlexibleTimeWindow: &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{Mode: jsii.String("OFF")},
		Target: &awsscheduler.CfnSchedule_TargetProperty{
			Arn:     relayArn,
			RoleArn: role.RoleArn(),
			Input:   jsii.String(ScheduleInput),
			RetryPolicy: &awsscheduler.CfnSchedule_RetryPolicyProperty{
				MaximumRetryAttempts:     jsii.Number(0),
				MaximumEventAgeInSeconds: jsii.Number(DefaultWakeUpMaxEventAge.Seconds()),
			},
		},
	})
	// The schedule validates its role on creation; make it wait for the
	// role's policy.
	schedule.Node().AddDependency(role)
	return schedule, role
}

// scheduleGroupArn is the ARN of the default schedule group, which the
// sweep belongs to.
func scheduleGroupArn(stack awscdk.Stack) *string {
	return stack.FormatArn(&awscdk.ArnComponents{
		Service:      jsii.String("scheduler"),
		Resource:     jsii.String("schedule-group"),
		ResourceName: jsii.String("default"),
		ArnFormat:    awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	})
}

package spillway

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// IAM actions, per facts §13 and design §7.
var (
	// RelayTableActions are what a relay does to the table: query buckets
	// and the coordination partition, write heartbeats and leases, delete
	// published messages.
	// ConditionCheckItem is a park behind a key's earlier parked message,
	// a transaction item that only checks. GetItem is what a fetch's
	// TransactGetItems needs of each row it reads: the snapshot of a
	// transaction a query showed in part (docs/protocol.md, "Fetching a
	// bucket in order").
	RelayTableActions = []string{"dynamodb:Query", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:ConditionCheckItem"}
	// WriterTableActions are what a writer does to the table: reserve a
	// sequence (UpdateItem), put the message (PutItem, alone or in a
	// transaction) and, while the bucket count changes, check the
	// generation marker in the same transaction (ConditionCheckItem).
	WriterTableActions = []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"}
	// WriterQueryAction is a writer's only read, allowed on the partitions
	// WriterQueryPartitions names: the coordination partition (to skip the
	// wake-ups a live relay covers) and the generation marker.
	WriterQueryAction = "dynamodb:Query"
	// StreamReadActions let Lambda's event source mapping read the stream.
	StreamReadActions = []string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"}
	// InvokeAction sends wake-ups to the relay.
	InvokeAction = "lambda:InvokeFunction"
)

// Outbox is a deployed Spillway outbox.
type Outbox interface {
	constructs.Construct
	// Table is the outbox table (created or imported).
	Table() awsdynamodb.ITable
	// Relay is the relay function.
	Relay() awslambda.Function
	// RelayFunctionName is the relay's physical name: OutboxProps'
	// RelayFunctionName, or else a token CloudFormation resolves to the
	// name it generates.
	RelayFunctionName() string
	// Enqueue is the enqueue function.
	Enqueue() awslambda.Function
	// WritersPolicy lets a service enqueue: PutItem and UpdateItem on the
	// table, Query of the relays' leases and wake-ups of the relay. Attach it to writers' roles.
	WritersPolicy() awsiam.ManagedPolicy
	// Schedule is the EventBridge Scheduler sweep.
	Schedule() awsscheduler.CfnSchedule
	// StreamsTrigger is the stream event source mapping, or nil when off.
	StreamsTrigger() awslambda.EventSourceMapping
	// RelaySecurityGroup is the relay's security group, or nil outside a VPC.
	RelaySecurityGroup() awsec2.ISecurityGroup
	// AlarmTopic is the topic the alarms notify, or nil.
	AlarmTopic() awssns.ITopic
	// Alarms are the outbox's alarms.
	Alarms() []awscloudwatch.Alarm
	// Dashboard is the outbox's CloudWatch dashboard.
	Dashboard() awscloudwatch.Dashboard
	// Props are the effective props, defaults applied.
	Props() OutboxProps
}

type outbox struct {
	constructs.Construct
	props          OutboxProps
	table          awsdynamodb.ITable
	relay          goFunction
	relayName      string
	enqueue        goFunction
	writers        awsiam.ManagedPolicy
	schedule       awsscheduler.CfnSchedule
	streamsTrigger awslambda.EventSourceMapping
	securityGroup  awsec2.ISecurityGroup
	topic          awssns.ITopic
	alarms         []awscloudwatch.Alarm
	dashboard      awscloudwatch.Dashboard
}

var _ Outbox = (*outbox)(nil)

// NewOutbox defines a Spillway outbox in scope. It applies the defaults
// and panics with an error wrapping ErrInvalidProps when the props are
// invalid, the way CDK constructs reject bad input at synth; call
// props.WithDefaults().Validate() first to handle the error yourself.
func NewOutbox(scope constructs.Construct, id string, props *OutboxProps) Outbox {
	p := props.WithDefaults()
	if err := p.Validate(); err != nil {
		panic(err)
	}
	o := &outbox{props: p}
	// Override registers o itself as the jsii object, so o can be passed
	// wherever a construct is expected (scopes, cdk-nag, Stack_Of).
	constructs.NewConstruct_Override(o, scope, jsii.String(id))
	o.table = newTable(o, p)
	calls := newSdkCalls(o, p.LogRetention)
	newLayoutRecord(o, p, o.table, calls)
	var streamArn *string
	if p.StreamsTrigger {
		streamArn = o.table.TableStreamArn()
		if streamArn == nil {
			panic(fmt.Errorf("%w: the streams trigger needs the existing table's stream ARN (import it with TableStreamArn)", ErrInvalidProps))
		}
	}

	var network *relayNetwork
	if p.Network != nil {
		rn := newRelayNetwork(o, *p.Network, p.Kafka)
		network = &rn
		o.securityGroup = rn.securityGroup
	}
	brokers := bootstrapBrokers(o, p.Kafka, calls)
	tracing := newFunctionTracing(o, p)
	o.relay = newGoFunction(o, "Relay", goFunctionProps{
		description: "Spillway relay: publishes outbox messages to Kafka",
		code:        p.RelayCode,
		name:        p.RelayFunctionName,
		timeoutSec:  p.RelayTimeout.Seconds(),
		memoryMB:    p.RelayMemoryMB,
		env:         relayEnv(p, o.table.TableName(), brokers),
		retention:   p.LogRetention,
		tracing:     tracing,
		configure: func(fp *awslambda.FunctionProps) {
			fp.ReservedConcurrentExecutions = jsii.Number(float64(p.ReservedConcurrency))
			fp.RecursiveLoop = recursiveLoop(p.MaxHops)
			if network != nil {
				network.configure(fp)
			}
		},
	})
	// Wake-ups are hints: no retries after a function error, and no
	// delivery later than a minute, when the schedule has swept anyway.
	o.relay.fn.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		RetryAttempts: jsii.Number(0),
		MaxEventAge:   awscdk.Duration_Seconds(jsii.Number(DefaultWakeUpMaxEventAge.Seconds())),
	})
	o.relayName = *o.relay.fn.FunctionName()
	o.grantRelay(streamArn)

	o.enqueue = newGoFunction(o, "Enqueue", goFunctionProps{
		description: "Spillway enqueue: stores messages in the outbox for non-Go producers",
		code:        p.EnqueueCode,
		timeoutSec:  p.EnqueueTimeout.Seconds(),
		memoryMB:    p.EnqueueMemoryMB,
		env:         enqueueEnv(p, o.table.TableName(), o.relay.fn.FunctionName(), brokers),
		retention:   p.LogRetention,
		tracing:     tracing,
		configure:   configureEnqueue(p, network),
	})
	o.grantDoorbell()
	for _, s := range o.writerStatements() {
		o.enqueue.role.AddToPrincipalPolicy(s)
	}
	o.writers = awsiam.NewManagedPolicy(o, jsii.String("WritersPolicy"), &awsiam.ManagedPolicyProps{
		Description: jsii.String("Lets a service enqueue into the Spillway outbox and wake its relay"),
		Statements:  ptr(o.writerStatements()),
	})

	o.schedule, _ = newSchedule(o, p, o.relay.fn.FunctionArn())
	if p.StreamsTrigger {
		o.streamsTrigger = newStreamsTrigger(o, p, o.relay.fn, streamArn)
	}
	if network != nil {
		newEndpoints(o, *p.Network, *network, o.relay.fn.FunctionArn())
	}

	metrics := emf{namespace: p.MetricsNamespace, outbox: p.OutboxName}
	o.topic = newAlarmTopic(o, p.Alarms)
	o.alarms = newAlarms(o, alarmInputs{
		props: p, emf: metrics, relay: o.relay.fn, relayName: o.relay.fn.FunctionName(),
		enqueue: o.enqueue.fn,
		table:   o.table, topic: o.topic,
	})
	o.dashboard = newDashboard(o, dashboardInputs{
		emf: metrics, relay: o.relay.fn, enqueue: o.enqueue.fn,
		relayName: o.relay.fn.FunctionName(), enqueueFn: o.enqueue.fn.FunctionName(),
		alarms: o.alarms,
	})
	o.suppressNagFindings()
	return o
}

// grantRelay gives the relay exactly what it calls.
func (o *outbox) grantRelay(streamArn *string) {
	p := o.props
	role := o.relay.role
	role.AddToPrincipalPolicy(statement(RelayTableActions, o.table.TableArn()))
	// Continuation wake-ups invoke the relay itself. The statement lives in
	// a policy of its own: the function depends on its role's default
	// policy, so naming the function there would be a cycle, while this
	// policy depends on the function. Until it exists a wake-up fails and
	// is logged; the schedule sweeps meanwhile.
	awsiam.NewPolicy(o, jsii.String("RelaySelfInvoke"), &awsiam.PolicyProps{
		Roles:      &[]awsiam.IRole{role},
		Statements: &[]awsiam.PolicyStatement{statement([]string{InvokeAction}, o.relay.fn.FunctionArn())},
	})
	switch p.Kafka.Auth {
	case outboxconf.KafkaAuthIAM:
		for _, s := range mskStatements(p.Kafka) {
			role.AddToPrincipalPolicy(s)
		}
	case outboxconf.KafkaAuthScram:
		for _, s := range scramStatements(p.Kafka) {
			role.AddToPrincipalPolicy(s)
		}
	}
	if streamArn != nil {
		role.AddToPrincipalPolicy(statement(StreamReadActions, streamArn))
	}
	if p.Network != nil {
		role.AddToPrincipalPolicy(statement(eniActions, jsii.String("*")))
	}
}

func (o *outbox) writerStatements() []awsiam.PolicyStatement {
	query := awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Effect:    awsiam.Effect_ALLOW,
		Actions:   jsii.Strings(WriterQueryAction),
		Resources: &[]*string{o.table.TableArn()},
		Conditions: &map[string]any{"ForAllValues:StringEquals": map[string]any{
			"dynamodb:LeadingKeys": WriterQueryPartitions(o.props.KeyPrefix, o.props.PreviousKeyPrefix),
		}},
	})
	return []awsiam.PolicyStatement{
		statement(WriterTableActions, o.table.TableArn()),
		query,
		statement([]string{InvokeAction}, o.relay.fn.FunctionArn()),
	}
}

// WriterQueryPartitions are the partition keys a writer may query: the
// coordination partition and the generation marker of its key prefix and,
// while the bucket count changes, of the previous one. A writer reads no
// message, so a leaked writer role cannot read the outbox's payloads.
func WriterQueryPartitions(prefix, previous string) []string {
	keys := []string{prefix + "#COORDINATION", prefix + "#GENERATION"}
	if previous != "" {
		keys = append(keys, previous+"#COORDINATION", previous+"#GENERATION")
	}
	return keys
}

func (o *outbox) Table() awsdynamodb.ITable                    { return o.table }
func (o *outbox) Relay() awslambda.Function                    { return o.relay.fn }
func (o *outbox) RelayFunctionName() string                    { return o.relayName }
func (o *outbox) Enqueue() awslambda.Function                  { return o.enqueue.fn }
func (o *outbox) WritersPolicy() awsiam.ManagedPolicy          { return o.writers }
func (o *outbox) Schedule() awsscheduler.CfnSchedule           { return o.schedule }
func (o *outbox) StreamsTrigger() awslambda.EventSourceMapping { return o.streamsTrigger }
func (o *outbox) RelaySecurityGroup() awsec2.ISecurityGroup    { return o.securityGroup }
func (o *outbox) AlarmTopic() awssns.ITopic                    { return o.topic }
func (o *outbox) Alarms() []awscloudwatch.Alarm                { return o.alarms }
func (o *outbox) Dashboard() awscloudwatch.Dashboard           { return o.dashboard }
func (o *outbox) Props() OutboxProps                           { return o.props }

func ptr[T any](v T) *T { return &v }

package spillway

import (
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// lambdaRecursionLimit is about where Lambda's recursive loop detection
// stops a chain of invocations carrying the same event: "after
// approximately 16 invocations" (AWS Lambda Developer Guide, "Use Lambda
// recursive loop detection to prevent infinite loops",
// https://docs.aws.amazon.com/lambda/latest/dg/invocation-recursion.html).
const lambdaRecursionLimit = 16

// recursiveLoop is the relay's RecursiveLoop setting. A relay that stops
// with work left wakes a successor, a deliberate self-invocation bounded by
// the hop counter (SPILLWAY_MAX_HOPS) and the reserved concurrency. A chain
// is the writer's or enqueue function's invocation, hop 0 and maxHops
// continuations: while that stays below Lambda's limit the detection never
// fires and stays on (Terminate) as a guard against a bug; only a hop limit
// that reaches it needs Allow.
func recursiveLoop(maxHops int) awslambda.RecursiveLoop {
	if maxHops+2 >= lambdaRecursionLimit {
		return awslambda.RecursiveLoop_ALLOW
	}
	return awslambda.RecursiveLoop_TERMINATE
}

// goFunction is what both functions share: provided.al2023 on arm64 with a
// prebuilt bootstrap, the stack's tracing, JSON logs into an explicit log
// group with retention, and a role of its own that gets only what the
// caller grants plus log writes to that log group.
type goFunction struct {
	fn   awslambda.Function
	role awsiam.Role
	logs awslogs.LogGroup
}

type goFunctionProps struct {
	description string
	code        awslambda.Code
	name        string
	timeoutSec  float64
	memoryMB    int
	env         map[string]*string
	retention   awslogs.RetentionDays
	tracing     functionTracing
	// configure may set the remaining FunctionProps (VPC, concurrency, ...).
	configure func(*awslambda.FunctionProps)
}

func newGoFunction(scope constructs.Construct, id string, p goFunctionProps) goFunction {
	group := constructs.NewConstruct(scope, jsii.String(id))
	logs := awslogs.NewLogGroup(group, jsii.String("Logs"), &awslogs.LogGroupProps{
		Retention:     p.retention,
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})
	// Our own role instead of CDK's default keeps AWS managed policies
	// (AWSLambdaBasicExecutionRole: logs on *) off the function.
	role := awsiam.NewRole(group, jsii.String("Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("Execution role of " + p.description),
	})
	role.AddToPrincipalPolicy(statement([]string{"logs:CreateLogStream", "logs:PutLogEvents"}, logs.LogGroupArn()))
	props := &awslambda.FunctionProps{
		Description:           jsii.String(p.description),
		Runtime:               awslambda.Runtime_PROVIDED_AL2023(),
		Architecture:          awslambda.Architecture_ARM_64(),
		Handler:               jsii.String("bootstrap"),
		Code:                  p.code,
		Role:                  role,
		Timeout:               awscdk.Duration_Seconds(jsii.Number(p.timeoutSec)),
		MemorySize:            jsii.Number(float64(p.memoryMB)),
		LoggingFormat:         awslambda.LoggingFormat_JSON,
		ApplicationLogLevelV2: awslambda.ApplicationLogLevel_INFO,
		SystemLogLevelV2:      awslambda.SystemLogLevel_WARN,
		LogGroup:              logs,
		Environment:           &p.env,
	}
	p.tracing.configure(props)
	if p.name != "" {
		props.FunctionName = jsii.String(p.name)
	}
	if p.configure != nil {
		p.configure(props)
	}
	fn := awslambda.NewFunction(group, jsii.String("Function"), props)
	return goFunction{fn: fn, role: role, logs: logs}
}

// commonEnv is the configuration both functions read: where the outbox
// lives and how its metrics are named.
func commonEnv(p OutboxProps, table *string, relayName *string) map[string]*string {
	env := map[string]*string{
		outboxconf.EnvTable:            table,
		outboxconf.EnvKeyPrefix:        jsii.String(p.KeyPrefix),
		outboxconf.EnvPartitionKey:     jsii.String(p.PartitionKey),
		outboxconf.EnvSortKey:          jsii.String(p.SortKey),
		outboxconf.EnvBucketCount:      jsii.String(strconv.Itoa(p.BucketCount)),
		outboxconf.EnvRelayFunction:    relayName,
		outboxconf.EnvOutboxName:       jsii.String(p.OutboxName),
		outboxconf.EnvMetricsNamespace: jsii.String(p.MetricsNamespace),
	}
	for k, v := range tracingEnv(p) {
		env[k] = v
	}
	// The relay publishes only to these topics (its IAM policy names
	// them), so the enqueue function refuses others up front instead of
	// storing messages no relay can deliver.
	if len(p.Kafka.Topics) > 0 {
		env[outboxconf.EnvTopics] = jsii.String(strings.Join(p.Kafka.Topics, ","))
	}
	if p.GenerationCheck {
		env[outboxconf.EnvGenerationCheck] = jsii.String("true")
	}
	// Both functions know the previous generation: the relay drains it
	// first, the enqueue function writes it until the seal.
	if p.PreviousKeyPrefix != "" {
		env[outboxconf.EnvPreviousKeyPrefix] = jsii.String(p.PreviousKeyPrefix)
		env[outboxconf.EnvPreviousBucketCount] = jsii.String(strconv.Itoa(p.PreviousBucketCount))
	}
	return env
}

// relayEnv adds what only the relay reads: Kafka and its lifetime.
// Durations are Go duration strings (time.ParseDuration). The relay wakes
// itself under the name Lambda gives it (AWS_LAMBDA_FUNCTION_NAME), so it
// gets no SPILLWAY_RELAY_FUNCTION: naming the function in its own
// definition would be a cycle.
func relayEnv(p OutboxProps, table, brokers *string) map[string]*string {
	env := commonEnv(p, table, nil)
	delete(env, outboxconf.EnvRelayFunction)
	for k, v := range kafkaEnv(p, brokers) {
		env[k] = v
	}
	if p.doorbell() {
		env[outboxconf.EnvDoorbellTopic] = jsii.String(p.Kafka.DoorbellTopic)
	}
	env[outboxconf.EnvMode] = jsii.String(p.Mode)
	env[outboxconf.EnvStopMargin] = jsii.String(p.StopMargin.String())
	env[outboxconf.EnvMaxHops] = jsii.String(strconv.Itoa(p.MaxHops))
	tuningEnv(p, env)
	return env
}

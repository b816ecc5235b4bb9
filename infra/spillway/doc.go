// Package spillway is a reusable AWS CDK construct that deploys a Spillway
// outbox: the DynamoDB table, the relay and enqueue Lambda functions, the
// EventBridge Scheduler sweep, the optional DynamoDB Streams wake-up trigger,
// least-privilege IAM (including MSK IAM scoped to the named topics), the
// relay's VPC wiring for MSK, alarms and a CloudWatch dashboard.
//
// Use it from any CDK Go app:
//
//	ob := spillway.NewOutbox(stack, "Outbox", &spillway.OutboxProps{
//		RelayCode:   awslambda.Code_FromAsset(jsii.String("dist/relay.zip"), nil),
//		EnqueueCode: awslambda.Code_FromAsset(jsii.String("dist/enqueue.zip"), nil),
//		Kafka: spillway.KafkaProps{
//			ClusterArn: "arn:aws:kafka:eu-west-1:123456789012:cluster/orders/1a2b3c4d-...",
//			Topics:     []string{"orders"},
//		},
//	})
//	ob.WritersPolicy() // attach to the roles of services that enqueue
//
// Environment variable and metric names come from package outboxconf, the
// same constants the functions read and emit, so the stack and the code
// cannot drift apart.
//
// The construct adds cdk-nag (AwsSolutions) suppressions for the findings it
// causes on purpose; each names the rule, the resource and the reason.
// Applying the AwsSolutions checks is left to the app (see infra/main.go).
package spillway

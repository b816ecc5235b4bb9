package spillway

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// newTable creates the outbox table exactly as the store expects it
// (facts §13): string PK/SK, on-demand, nothing else — no TTL (messages are
// deleted after publishing), no secondary index (every read is a Query on a
// known partition). PITR is on because the table holds committed business
// events not yet published. The stream exists only for the Streams trigger.
func newTable(scope constructs.Construct, p OutboxProps) awsdynamodb.ITable {
	if p.ExistingTable != nil {
		return p.ExistingTable
	}
	props := &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String(p.PartitionKey), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String(p.SortKey), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: p.DeletionProtection,
		RemovalPolicy:      awscdk.RemovalPolicy_RETAIN,
	}
	if p.TableName != "" {
		props.TableName = jsii.String(p.TableName)
	}
	if p.StreamsTrigger {
		// NEW_IMAGE lets the filter tell inserts apart by their new image;
		// the relay reads nothing else from the record.
		props.Stream = awsdynamodb.StreamViewType_NEW_IMAGE
	}
	return awsdynamodb.NewTable(scope, jsii.String("Table"), props)
}

// messageInsertFilter matches stream records of new message items only:
// records whose key and new image have a partition key starting with
// <prefix>#MESSAGES#. Our own deletes after publishing (REMOVE records carry
// no new image under NEW_IMAGE), sequence counters, leases and heartbeats
// never invoke the relay. The filter uses only the "dynamodb" key, not
// "eventName": "DynamoDB event source mappings only support filtering on the
// dynamodb key" (AWS Lambda Developer Guide, "Using event filtering with a
// DynamoDB event source",
// https://docs.aws.amazon.com/lambda/latest/dg/with-ddb-filtering.html).
func messageInsertFilter(p OutboxProps) *map[string]interface{} {
	messageKey := func() map[string]interface{} {
		return map[string]interface{}{
			p.PartitionKey: map[string]interface{}{
				"S": awslambda.FilterRule_BeginsWith(jsii.String(p.KeyPrefix + "#MESSAGES#")),
			},
		}
	}
	return awslambda.FilterCriteria_Filter(&map[string]interface{}{
		"dynamodb": map[string]interface{}{
			"Keys":     messageKey(),
			"NewImage": messageKey(),
		},
	})
}

// newStreamsTrigger maps the table's stream to the relay as a wake-up hint.
// The handler never fails a stream batch, so retries are 0 and bisecting is
// off: a failed hint is worth nothing once the schedule sweeps, and
// retrying would block the shard behind it. Old records are dropped after a
// minute for the same reason.
func newStreamsTrigger(scope constructs.Construct, p OutboxProps, relay awslambda.IFunction, streamArn *string) awslambda.EventSourceMapping {
	return awslambda.NewEventSourceMapping(scope, jsii.String("StreamsTrigger"), &awslambda.EventSourceMappingProps{
		Target:                relay,
		EventSourceArn:        streamArn,
		StartingPosition:      awslambda.StartingPosition_LATEST,
		BatchSize:             jsii.Number(100),
		ParallelizationFactor: jsii.Number(1),
		RetryAttempts:         jsii.Number(0),
		BisectBatchOnError:    jsii.Bool(false),
		MaxRecordAge:          awscdk.Duration_Seconds(jsii.Number(60)),
		Filters:               &[]*map[string]interface{}{messageInsertFilter(p)},
	})
}

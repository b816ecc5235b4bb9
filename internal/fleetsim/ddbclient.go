package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/internal/simtime"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// trackedClient is the relays' and writers' client of the endpoint. Its
// calls count as in flight through simtime's DynamoDBOption, set on the
// endpoint's client; it also counts the refusals of business Puts (in
// table business) inside cancelled transactions before such a call counts
// as ended, so the driver never sees the Counter's refusal without its
// explanation.
type trackedClient struct {
	*dynamodb.Client
	act      *simtime.Activity
	business string
	refused  atomic.Int64
}

var _ outboxddb.Client = (*trackedClient)(nil)

// rawClient is a client of the endpoint without the Counter and Faults:
// the harness's own checks must not appear in the figures or be faulted.
func rawClient(d *outboxlocal.DynamoDB) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(d.Endpoint),
		Region:       outboxlocal.DefaultRegion,
		Credentials:  credentials.NewStaticCredentialsProvider("spillway", "spillway", ""),
	})
}

// removeIgnored reports whether the endpoint keeps an attribute that an
// UpdateItem REMOVE named, probing with a scratch item of table. A released
// lease that kept its owner would make every release pass look unfinished,
// so the simulation refuses to run on such an endpoint.
func removeIgnored(ctx context.Context, raw *dynamodb.Client, table string) (bool, error) {
	key := map[string]types.AttributeValue{
		outboxddb.DefaultPartitionKey: &types.AttributeValueMemberS{Value: "FLEETSIM#PROBE"},
		outboxddb.DefaultSortKey:      &types.AttributeValueMemberS{Value: "REMOVE"},
	}
	item := maps.Clone(key)
	item["Probe"] = &types.AttributeValueMemberS{Value: "x"}
	if _, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		return false, fmt.Errorf("probe REMOVE: put: %w", err)
	}
	if _, err := raw.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key, UpdateExpression: aws.String("REMOVE #p"),
		ExpressionAttributeNames: map[string]string{"#p": "Probe"},
	}); err != nil {
		return false, fmt.Errorf("probe REMOVE: update: %w", err)
	}
	got, err := raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return false, fmt.Errorf("probe REMOVE: get: %w", err)
	}
	if _, err := raw.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key}); err != nil {
		return false, fmt.Errorf("probe REMOVE: delete: %w", err)
	}
	_, kept := got.Item["Probe"]
	return kept, nil
}

func (c *trackedClient) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.act.Begin()
	defer c.act.End()
	out, err := c.Client.TransactWriteItems(ctx, in, optFns...)
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for i, r := range tce.CancellationReasons {
			if aws.ToString(r.Code) == "ConditionalCheckFailed" && i < len(in.TransactItems) &&
				in.TransactItems[i].Put != nil && aws.ToString(in.TransactItems[i].Put.TableName) == c.business {
				c.refused.Add(1)
			}
		}
	}
	return out, err
}

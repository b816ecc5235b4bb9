package outboxddb

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// removeFix works around a gap of the embedded server that outboxtest does
// not compensate (yet): minidyn v0.8.2 evaluates the REMOVE action of an
// UpdateItem but never applies it to the stored item, so a released lease
// (SET #expires = :now REMOVE #owner) would keep naming its owner. After
// such an update succeeds, removeFix deletes the removed attributes with a
// PutItem conditional on the item being exactly as the update left it
// (a later write by a peer wins), through a client the Counter does not
// see, so request and refusal counts stay those of the store. It is used
// only with the embedded server; delete it once outboxtest compensates
// REMOVE.
type removeFix struct {
	*dynamodb.Client
	raw *dynamodb.Client
}

func withRemoveFix(d *outboxtest.DynamoDB) Client {
	if d.External {
		return d.Client
	}
	raw := dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(d.Endpoint),
		Region:       outboxtest.DefaultRegion,
		Credentials:  credentials.NewStaticCredentialsProvider("spillway", "spillway", ""),
	})
	return &removeFix{Client: d.Client, raw: raw}
}

func (c *removeFix) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := c.Client.UpdateItem(ctx, in, optFns...)
	_, clause, found := strings.Cut(aws.ToString(in.UpdateExpression), "REMOVE ")
	if err != nil || !found {
		return out, err
	}
	got, err := c.raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: in.TableName, Key: in.Key, ConsistentRead: aws.Bool(true)})
	if err != nil || got.Item == nil {
		return out, err
	}
	names := map[string]string{}
	values := map[string]types.AttributeValue{}
	var conds []string
	for name, v := range got.Item {
		if _, isKey := in.Key[name]; isKey {
			continue
		}
		i := len(conds)
		names[fmt.Sprintf("#a%d", i)] = name
		values[fmt.Sprintf(":v%d", i)] = v
		conds = append(conds, fmt.Sprintf("#a%d = :v%d", i, i))
	}
	item := maps.Clone(got.Item)
	for _, path := range strings.Split(clause, ",") {
		name := strings.TrimSpace(path)
		if alias, ok := in.ExpressionAttributeNames[name]; ok {
			name = alias
		}
		delete(item, name)
	}
	put := &dynamodb.PutItemInput{TableName: in.TableName, Item: item}
	if len(conds) > 0 {
		put.ConditionExpression = aws.String(strings.Join(conds, " AND "))
		put.ExpressionAttributeNames, put.ExpressionAttributeValues = names, values
	}
	if _, err := c.raw.PutItem(ctx, put); err != nil && !isConditionFailed(err) {
		return out, fmt.Errorf("embedded REMOVE compensation: %w", err)
	}
	return out, nil
}

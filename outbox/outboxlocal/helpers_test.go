package outboxlocal

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/outbox/internal/ddblimits"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/twmb/franz-go/pkg/kgo"
)

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func num(v int) types.AttributeValue    { return &types.AttributeValueMemberN{Value: strconv.Itoa(v)} }
func bin(v []byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: v} }
func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{DefaultPartitionKey: str(pk), DefaultSortKey: str(sk)}
}

// itemOfSize returns an item under (pk, sk) whose DynamoDB size is exactly
// size bytes: the padding attribute "Data" makes up the difference.
func itemOfSize(t testing.TB, pk, sk string, size int) map[string]types.AttributeValue {
	t.Helper()
	item := key(pk, sk)
	pad := size - ddblimits.ItemSize(item) - len("Data")
	if pad < 0 {
		t.Fatalf("item of %d bytes cannot hold its key", size)
	}
	item["Data"] = str(strings.Repeat("x", pad))
	if got := ddblimits.ItemSize(item); got != size {
		t.Fatalf("item size %d, want %d", got, size)
	}
	return item
}

func put(t testing.TB, c *dynamodb.Client, table string, item map[string]types.AttributeValue) {
	t.Helper()
	if _, err := c.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
}

func get(t testing.TB, c *dynamodb.Client, table, pk, sk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := c.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(pk, sk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func query(ctx context.Context, c *dynamodb.Client, table, pk string, consistent bool) (*dynamodb.QueryOutput, error) {
	return c.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(table),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": DefaultPartitionKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk)},
		ConsistentRead:            aws.Bool(consistent),
	})
}

// sortKeys lists the sort keys of items in order.
func sortKeys(items []map[string]types.AttributeValue) []string {
	out := make([]string, 0, len(items))
	for _, item := range items {
		out = append(out, scalarText(item[DefaultSortKey]))
	}
	return out
}

// The test forms of the backends live in outboxtest, which imports this
// package; these are the same forms for this package's own tests.

func newDynamoDB(t testing.TB, opts ...DynamoOption) *DynamoDB {
	t.Helper()
	d, err := StartDynamoDB(t.Context(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOrFail(t, d.Close) })
	return d
}

func createTable(t testing.TB, d *DynamoDB) string {
	t.Helper()
	table := d.NewTableName()
	if err := d.CreateTable(t.Context(), table); err != nil {
		t.Fatal(err)
	}
	return table
}

func newKafka(t testing.TB, topics ...string) *Kafka {
	t.Helper()
	return newKafkaWith(t, KafkaConfig{Topics: topics})
}

func newKafkaWith(t testing.TB, cfg KafkaConfig) *Kafka {
	t.Helper()
	k, err := StartKafka(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeOrFail(t, k.Close) })
	return k
}

func closeOrFail(t testing.TB, close func() error) {
	if err := close(); err != nil {
		t.Error(err)
	}
}

func consume(t testing.TB, k *Kafka, topic string, n int) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), DefaultConsumeTimeout)
	defer cancel()
	recs, err := k.Consume(ctx, topic, n)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func consumeAll(t testing.TB, k *Kafka, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), DefaultConsumeTimeout)
	defer cancel()
	recs, err := k.ConsumeAll(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

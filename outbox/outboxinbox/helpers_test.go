package outboxinbox_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// env is one table on the embedded DynamoDB holding the business items
// and the markers.
type env struct {
	ddb   *outboxlocal.DynamoDB
	table string
}

func newEnv(t testing.TB, opts ...outboxlocal.DynamoOption) *env {
	t.Helper()
	d := outboxtest.NewDynamoDB(t, opts...)
	return &env{ddb: d, table: outboxtest.CreateTable(t, d)}
}

// inbox returns an inbox of consumer on the env's table over client (the
// env's client when nil).
func (e *env) inbox(t testing.TB, consumer string, client outboxinbox.Client, tweak ...func(*outboxinbox.Options)) *outboxinbox.Inbox {
	t.Helper()
	if client == nil {
		client = e.ddb.Client
	}
	o := outboxinbox.Options{TableName: e.table, Consumer: consumer, Logger: quiet()}
	for _, fn := range tweak {
		fn(&o)
	}
	in, err := outboxinbox.New(client, o)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// record builds a record as the relay publishes it: the id header last.
func record(topic string, partition int32, offset int64, key, value string, id outbox.MessageID) outboxinbox.Record {
	return outboxinbox.Record{
		Topic: topic, Partition: partition, Offset: offset, Key: []byte(key), Value: []byte(value),
		Headers: []outbox.Header{{Key: "content-type", Value: []byte("text/plain")}, {Key: outbox.DefaultMessageIDHeaderName, Value: []byte(id.String())}},
	}
}

// effect is the business write the tests' handlers make: it adds one to
// the message's effect counter (so a second application shows as 2) and
// appends the record's value to its key's log (so the order of effects per
// key is visible).
func (e *env) effect(rec outboxinbox.Record, tx *outboxinbox.Tx) {
	id := headerID(rec)
	tx.Add(
		types.TransactWriteItem{Update: &types.Update{
			TableName:                 aws.String(e.table),
			Key:                       key("EFFECT#"+id, "EFFECT"),
			UpdateExpression:          aws.String("ADD #n :one"),
			ExpressionAttributeNames:  map[string]string{"#n": "Applied"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
		}},
		types.TransactWriteItem{Update: &types.Update{
			TableName: aws.String(e.table),
			Key:       key("KEY#"+string(rec.Key), "LOG"),
			// The log starts with a "^" entry: the embedded server cannot
			// append to an empty list.
			UpdateExpression:         aws.String("SET #log = list_append(if_not_exists(#log, :start), :v)"),
			ExpressionAttributeNames: map[string]string{"#log": "Log"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":start": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "^"}}},
				":v":     &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: string(rec.Value)}}},
			},
		}},
	)
}

func (e *env) handler() outboxinbox.Handler {
	return func(_ context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
		e.effect(rec, tx)
		return nil
	}
}

func headerID(rec outboxinbox.Record) string {
	for _, h := range rec.Headers {
		if h.Key == outbox.DefaultMessageIDHeaderName {
			return string(h.Value)
		}
	}
	return ""
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		outboxlocal.DefaultPartitionKey: &types.AttributeValueMemberS{Value: pk},
		outboxlocal.DefaultSortKey:      &types.AttributeValueMemberS{Value: sk},
	}
}

// applied returns how many times the message's effect was applied.
func (e *env) applied(t testing.TB, id string) int {
	t.Helper()
	out, err := e.ddb.Client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(e.table), Key: key("EFFECT#"+id, "EFFECT"), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	n, ok := out.Item["Applied"].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	v, err := strconv.Atoi(n.Value)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// log returns the values applied for key, in the order they were applied.
func (e *env) log(t testing.TB, k string) []string {
	t.Helper()
	out, err := e.ddb.Client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(e.table), Key: key("KEY#"+k, "LOG"), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := out.Item["Log"].(*types.AttributeValueMemberL)
	if l == nil {
		return nil
	}
	var vals []string
	for _, v := range l.Value[1:] {
		vals = append(vals, v.(*types.AttributeValueMemberS).Value)
	}
	return vals
}

// count returns the items whose partition key starts with prefix.
func (e *env) count(t testing.TB, prefix string) int {
	t.Helper()
	out, err := e.ddb.Client.Scan(t.Context(), &dynamodb.ScanInput{
		TableName:                 aws.String(e.table),
		FilterExpression:          aws.String("begins_with(#pk, :p)"),
		ExpressionAttributeNames:  map[string]string{"#pk": outboxlocal.DefaultPartitionKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: prefix}},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	return int(out.Count)
}

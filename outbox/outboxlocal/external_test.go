package outboxlocal

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway-dev/spillway/outbox/outboxobs/ddbusage"
)

func TestExternal(t *testing.T) {
	t.Parallel()
	// The external-endpoint mode, exercised against another embedded server:
	// the middleware faults and the Counter work there too, and Close deletes
	// the tables it created.
	t.Run("DynamoDBCleansUp", func(t *testing.T) {
		t.Parallel()
		host := newDynamoDB(t, WithoutEnvironment())
		ext, err := StartDynamoDB(t.Context(), WithEndpoint(host.Endpoint), WithMaxAttempts(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ext.Close() })
		if !ext.External || ext.Endpoint != host.Endpoint {
			t.Fatalf("external %v at %s", ext.External, ext.Endpoint)
		}
		table := createTable(t, ext)
		other := ext.NewTableName()
		if err := host.CreateTable(t.Context(), other); err != nil {
			t.Fatal(err)
		}
		ext.DeleteOnClose(other)

		ext.Faults.ThrottleNext("PutItem", 1)
		_, err = ext.Client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: key("P", "S")})
		var exceeded *types.ProvisionedThroughputExceededException
		if !errors.As(err, &exceeded) || ext.Counter.Snapshot().Throttles != 1 {
			t.Fatalf("fault on an external endpoint: %v", err)
		}
		if err := ext.Close(); err != nil {
			t.Fatal(err)
		}
		list, err := host.Client.ListTables(t.Context(), &dynamodb.ListTablesInput{})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(list.TableNames, table) || slices.Contains(list.TableNames, other) {
			t.Fatalf("tables left after Close: %v", list.TableNames)
		}
	})

	t.Run("KafkaUsesUniqueTopics", func(t *testing.T) {
		t.Parallel()
		host := newKafka(t)
		ext, err := StartKafka(t.Context(), KafkaConfig{Endpoint: strings.Join(host.Brokers, ","), Topics: []string{"orders"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ext.Close() })
		topic := ext.Topic("orders")
		if !ext.External || ext.Cluster != nil || topic == "orders" || !strings.HasPrefix(topic, "orders-") {
			t.Fatalf("external %v, topic %q", ext.External, topic)
		}
		cl, err := kgo.NewClient(ext.ClientOpts()...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if got := consume(t, ext, topic, 1); string(got[0].Value) != "v" {
			t.Fatalf("consumed %q", got[0].Value)
		}
		if err := ext.Close(); err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, mt)
		resp, err := req.RequestWith(t.Context(), host.admin)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) != 1 || !errors.Is(kerr.ErrorForCode(resp.Topics[0].ErrorCode), kerr.UnknownTopicOrPartition) {
			t.Fatalf("topic %s still exists after Close", topic)
		}
	})

	t.Run("ReportedCapacity", func(t *testing.T) {
		t.Parallel()
		in := &dynamodb.PutItemInput{TableName: aws.String("t"), Item: key("P", "S")}
		sent, ok := ddbusage.WithTotalCapacity(in).(*dynamodb.PutItemInput)
		if !ok || sent == in || sent.ReturnConsumedCapacity != types.ReturnConsumedCapacityTotal || in.ReturnConsumedCapacity != "" {
			t.Fatal("the input must be copied with ReturnConsumedCapacity TOTAL, the caller's left as it was")
		}
		c := newCounter(newSchemaBook())
		c.record("PutItem", sent, &dynamodb.PutItemOutput{ConsumedCapacity: &types.ConsumedCapacity{CapacityUnits: aws.Float64(2)}}, nil)
		c.record("Query", &dynamodb.QueryInput{TableName: aws.String("t")}, &dynamodb.QueryOutput{ConsumedCapacity: &types.ConsumedCapacity{CapacityUnits: aws.Float64(0.5)}}, nil)
		got := c.Snapshot()
		if got.ReportedWriteUnits != 2 || got.ReportedReadUnits != 0.5 || got.WriteUnits != 1 || got.ReadUnits != 0.5 {
			t.Fatalf("counts %+v", got)
		}
	})
}

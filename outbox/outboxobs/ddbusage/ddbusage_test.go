package ddbusage_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/spillway-dev/spillway/outbox/outboxobs/ddbusage"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

type sink struct {
	mu          sync.Mutex
	requests    int
	read, write float64
}

func (s *sink) AddDynamoDB(n int, r, w float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests += n
	s.read += r
	s.write += w
}

func TestDDBUsage(t *testing.T) {
	t.Run("ConsumedReadsWhatDynamoDBReports", func(t *testing.T) {
		for _, c := range []struct {
			name        string
			out         any
			read, write float64
		}{
			{"put", &dynamodb.PutItemOutput{ConsumedCapacity: &types.ConsumedCapacity{CapacityUnits: aws.Float64(2)}}, 0, 2},
			{"query", &dynamodb.QueryOutput{ConsumedCapacity: &types.ConsumedCapacity{CapacityUnits: aws.Float64(0.5)}}, 0.5, 0},
			{"transaction", &dynamodb.TransactWriteItemsOutput{ConsumedCapacity: []types.ConsumedCapacity{
				{CapacityUnits: aws.Float64(4), WriteCapacityUnits: aws.Float64(4)}, {CapacityUnits: aws.Float64(2)}}}, 0, 6},
			{"split", &dynamodb.UpdateItemOutput{ConsumedCapacity: &types.ConsumedCapacity{ReadCapacityUnits: aws.Float64(1), WriteCapacityUnits: aws.Float64(3), CapacityUnits: aws.Float64(4)}}, 1, 3},
			{"none", &dynamodb.DeleteItemOutput{}, 0, 0},
			{"other", "not an output", 0, 0},
		} {
			r, w := ddbusage.Consumed(c.out)
			if r != c.read || w != c.write {
				t.Errorf("%s: consumed (%v, %v), want (%v, %v)", c.name, r, w, c.read, c.write)
			}
		}
	})

	t.Run("WithTotalCapacityCopiesAndKeepsAnExplicitChoice", func(t *testing.T) {
		in := &dynamodb.QueryInput{TableName: aws.String("t")}
		got := ddbusage.WithTotalCapacity(in).(*dynamodb.QueryInput)
		if got == in || got.ReturnConsumedCapacity != types.ReturnConsumedCapacityTotal || in.ReturnConsumedCapacity != "" {
			t.Fatalf("copy %+v, original %+v", got, in)
		}
		explicit := &dynamodb.PutItemInput{ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes}
		if ddbusage.WithTotalCapacity(explicit) != any(explicit) {
			t.Fatal("an explicit ReturnConsumedCapacity was replaced")
		}
	})

	// The middleware counts every request and charges a refused conditional
	// write its minimum unit (the embedded server reports no capacity, so only
	// requests and refusals show here).
	t.Run("InstrumentCountsRequestsAndRefusals", func(t *testing.T) {
		ddb := outboxtest.NewDynamoDB(t)
		table := outboxtest.CreateTable(t, ddb)
		s := &sink{}
		client := ddb.NewClient(func(o *dynamodb.Options) { ddbusage.Instrument(&o.APIOptions, s) })
		put := func() error {
			_, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{
				TableName:           aws.String(table),
				Item:                map[string]types.AttributeValue{"PK": &types.AttributeValueMemberS{Value: "a"}, "SK": &types.AttributeValueMemberS{Value: "b"}},
				ConditionExpression: aws.String("attribute_not_exists(PK)"),
			})
			return err
		}
		if err := put(); err != nil {
			t.Fatal(err)
		}
		var ccf *types.ConditionalCheckFailedException
		if err := put(); !errors.As(err, &ccf) {
			t.Fatalf("second put: %v, want a refusal", err)
		}
		if s.requests != 2 || s.write < 1 {
			t.Fatalf("counted %d requests, %v write units; want 2 and at least the refusal's unit", s.requests, s.write)
		}
		var none []func(*middleware.Stack) error
		if ddbusage.Instrument(&none, nil); len(none) != 0 {
			t.Fatal("a nil sink added middleware")
		}
	})
}

package outboxinbox_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// applyOrder is a consumer's handler: it adds the record's business write
// to the transaction the inbox commits with the message's marker.
func applyOrder(ctx context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
	tx.Add(types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String("orders"),
		Key: map[string]types.AttributeValue{
			"PK": &types.AttributeValueMemberS{Value: "ORDER#" + string(rec.Key)},
			"SK": &types.AttributeValueMemberS{Value: "ORDER"},
		},
		UpdateExpression:          aws.String("SET #state = :v ADD #events :one"),
		ExpressionAttributeNames:  map[string]string{"#state": "State", "#events": "Events"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: string(rec.Value)}, ":one": &types.AttributeValueMemberN{Value: "1"}},
	}})
	return nil
}

// A Kafka consumer group applies every message once, whatever the relay
// published twice.
func ExampleConsumer() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	inbox, err := outboxinbox.New(dynamodb.NewFromConfig(cfg), outboxinbox.Options{TableName: "orders", Consumer: "billing"})
	if err != nil {
		log.Fatal(err)
	}
	consumer, err := outboxinbox.NewConsumer(outboxinbox.ConsumerConfig{
		Inbox: inbox, Handler: applyOrder,
		Group: "billing", Topics: []string{"orders"}, Brokers: []string{"localhost:9092"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close()
	if err := consumer.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// A Lambda function behind an MSK (or self-managed Kafka) event source
// mapping applies every message once, also when Lambda retries a batch.
func ExampleLambdaHandler() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	inbox, err := outboxinbox.New(dynamodb.NewFromConfig(cfg), outboxinbox.Options{TableName: "orders", Consumer: "billing"})
	if err != nil {
		log.Fatal(err)
	}
	h, err := outboxinbox.NewLambdaHandler(inbox, applyOrder)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(h.Handle)
}

// The same message delivered twice is applied once.
func ExampleInbox_Process() {
	ctx := context.Background()
	db, err := outboxlocal.StartDynamoDB(ctx, outboxlocal.WithoutEnvironment())
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := outboxddb.CreateIfNotExists(ctx, db.Client, outboxddb.Options{TableName: "orders"}); err != nil {
		log.Fatal(err)
	}
	inbox, err := outboxinbox.New(db.Client, outboxinbox.Options{TableName: "orders", Consumer: "billing"})
	if err != nil {
		log.Fatal(err)
	}
	id := outbox.NewMessageID()
	rec := outboxinbox.Record{Topic: "orders", Key: []byte("1"), Value: []byte("paid"),
		Headers: []outbox.Header{{Key: outbox.DefaultMessageIDHeaderName, Value: []byte(id.String())}}}
	for range 2 {
		out, err := inbox.Process(ctx, rec, applyOrder)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(out)
	}
	// Output:
	// applied
	// duplicate
}

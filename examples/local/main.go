// Command local commits an order and its message with the one-call writer,
// then applies the message exactly once with the inbox when a relay has
// published it: the program of docs/local.md and the source of the
// README's two samples, against `spillway run --serve` or any DynamoDB and
// Kafka the SPILLWAY_* variables name.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
	"github.com/spillway-dev/spillway/outbox/outboxwake"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, os.Getenv); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	// Region and credentials come from AWS_REGION, AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY; a local endpoint accepts any.
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(getenv("SPILLWAY_DYNAMODB_ENDPOINT"))
	})
	// The service's own table, for its orders and the inbox's markers.
	if err := outboxddb.CreateIfNotExists(ctx, db, outboxddb.Options{TableName: "orders"}); err != nil {
		return err
	}

	// The outbox table, bucket count and topics from the SPILLWAY_*
	// variables the stack sets; SPILLWAY_RELAY_FUNCTION makes every commit
	// wake a relay.
	writer, err := outboxwake.WriterFromEnv(cfg, getenv, nil)
	if err != nil {
		return err
	}
	order := "order-" + outbox.NewMessageID().String()[:8]
	if err := commitOrder(ctx, writer, order); err != nil {
		return err
	}
	fmt.Printf("committed %s; relay it with: spillway drain\n", order)

	consumer, err := newConsumer(db, strings.Split(getenv("SPILLWAY_KAFKA_BROKERS"), ","))
	if err != nil {
		return err
	}
	defer consumer.Close()
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- consumer.Run(cctx) }()
	for {
		item, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("orders"), Key: orderKey(order)})
		if err != nil {
			return err
		}
		if s, ok := item.Item["Status"].(*types.AttributeValueMemberS); ok {
			fmt.Printf("%s is %s: applied once through the inbox\n", order, s.Value)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not consumed (did a relay run?): %w", order, ctx.Err())
		case err := <-ran: // a missing topic, refused credentials
			return fmt.Errorf("consumer stopped: %w", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// commitOrder writes the order and its message in one transaction.
func commitOrder(ctx context.Context, writer *outboxddb.Writer, order string) error {
	msg, err := outbox.NewMessage("orders", []byte(order), []byte("paid"), outbox.MessageOptions{})
	if err != nil {
		return err
	}
	_, err = writer.Commit(ctx, func(ctx context.Context, tx *outboxddb.Tx) error {
		tx.Put(types.Put{TableName: aws.String("orders"), Item: orderKey(order),
			ConditionExpression: aws.String("attribute_not_exists(PK)")})
		return tx.Enqueue(msg) // the same transaction: both commit, or neither
	})
	return err
}

// newConsumer consumes the orders topic in the consumer group billing:
// each record's effect commits with the inbox's marker, so a record
// published twice is applied once.
func newConsumer(db *dynamodb.Client, brokers []string) (*outboxinbox.Consumer, error) {
	inbox, err := outboxinbox.New(db, outboxinbox.Options{TableName: "orders", Consumer: "billing"})
	if err != nil {
		return nil, err
	}
	return outboxinbox.NewConsumer(outboxinbox.ConsumerConfig{
		Inbox: inbox, Handler: setStatus, Group: "billing", Topics: []string{"orders"}, Brokers: brokers,
	})
}

// setStatus is the consumer's effect: the order's status, written in the
// transaction that records the message as applied.
func setStatus(ctx context.Context, rec outboxinbox.Record, tx *outboxinbox.Tx) error {
	tx.Add(types.TransactWriteItem{Update: &types.Update{
		TableName:                 aws.String("orders"),
		Key:                       orderKey(string(rec.Key)),
		UpdateExpression:          aws.String("SET #s = :s"),
		ExpressionAttributeNames:  map[string]string{"#s": "Status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": &types.AttributeValueMemberS{Value: string(rec.Value)}},
	}})
	return nil
}

func orderKey(order string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"PK": &types.AttributeValueMemberS{Value: "ORDER#" + order},
		"SK": &types.AttributeValueMemberS{Value: "ORDER"},
	}
}

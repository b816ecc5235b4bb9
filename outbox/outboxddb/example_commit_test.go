package outboxddb_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// An order item in the service's own table and its message in the outbox
// commit in one call: both, or neither.
func ExampleWriter_Commit() {
	ctx := context.Background()
	db, err := outboxlocal.StartDynamoDB(ctx, outboxlocal.WithoutEnvironment())
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	for _, table := range []string{"orders", "orders-outbox"} {
		if err := outboxddb.CreateIfNotExists(ctx, db.Client, outboxddb.Options{TableName: table}); err != nil {
			log.Fatal(err)
		}
	}

	writer, err := outboxddb.NewWriter(db.Client, outboxddb.WriterOptions{
		Options: outboxddb.Options{TableName: "orders-outbox"},
		// The topics the relay publishes to: a typo is refused here, not
		// stored where the relay could never publish it.
		Topics: []string{"orders"},
	})
	if err != nil {
		log.Fatal(err)
	}
	msg, err := outbox.NewMessage("orders", []byte("order-1"), []byte(`{"total":42}`), outbox.MessageOptions{})
	if err != nil {
		log.Fatal(err)
	}
	stored, err := writer.Commit(ctx, func(ctx context.Context, tx *outboxddb.Tx) error {
		tx.Put(types.Put{TableName: aws.String("orders"), Item: map[string]types.AttributeValue{
			"PK": &types.AttributeValueMemberS{Value: "ORDER#1"},
			"SK": &types.AttributeValueMemberS{Value: "ORDER"},
		}, ConditionExpression: aws.String("attribute_not_exists(PK)")})
		return tx.Enqueue(msg)
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("committed order 1 with message %d of bucket %d\n", stored[0].Sequence(), stored[0].Bucket())
	// Output: committed order 1 with message 1 of bucket 6
}

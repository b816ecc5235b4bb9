package outboxddb_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// A caller that sends its own TransactWriteItems prepares the messages,
// includes the prepared items, explains a refusal with Explain and wakes
// the relay with Committed; Writer.Commit does all of it in one call.
func ExampleWriter_Prepare() {
	ctx := context.Background()
	db, err := outboxlocal.StartDynamoDB(ctx, outboxlocal.WithoutEnvironment())
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	table := outboxddb.Options{TableName: "orders-outbox"}
	if err := outboxddb.CreateIfNotExists(ctx, db.Client, table); err != nil {
		log.Fatal(err)
	}
	writer, err := outboxddb.NewWriter(db.Client, outboxddb.WriterOptions{
		Options: table,
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
	// Inside the retry loop: a rebuilt transaction reserves again.
	prepared, err := writer.Prepare(ctx, msg)
	if err != nil {
		log.Fatal(err)
	}
	items := append([]types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String("orders-outbox"), Item: map[string]types.AttributeValue{
			"PK": &types.AttributeValueMemberS{Value: "ORDER#1"},
			"SK": &types.AttributeValueMemberS{Value: "ORDER"},
		}}},
	}, prepared.Items()...)
	if _, err := db.Client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}); err != nil {
		log.Fatal(prepared.Explain(err))
	}
	prepared.Committed(ctx)
	msg = prepared.Messages()[0]

	store, err := outboxddb.NewStore(db.Client, outboxddb.StoreOptions{Options: table})
	if err != nil {
		log.Fatal(err)
	}
	batch, err := store.FetchBatch(ctx, msg.Bucket(), 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("bucket %d: message %d, key %s\n", msg.Bucket(), batch[0].Sequence(), batch[0].Key)
	// Output: bucket 6: message 1, key order-1
}

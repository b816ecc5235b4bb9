package outboxinbox

import (
	"context"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// explaining applies outboxddb.ExplainErrors to every request of the
// inbox's client: a missing marker table or missing credentials say what
// to fix, as the outbox's own requests do.
type explaining struct{ Client }

func (c explaining) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return c.Client.GetItem(ctx, in, append(slices.Clip(optFns), outboxddb.ExplainErrors)...)
}

func (c explaining) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return c.Client.TransactWriteItems(ctx, in, append(slices.Clip(optFns), outboxddb.ExplainErrors)...)
}

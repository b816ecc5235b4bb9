package outboxddb

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox/internal/ddblimits"
)

// DynamoDB's limits on what one write may carry.
const (
	// MaxItemSize is DynamoDB's item size limit (400 KB) in bytes.
	MaxItemSize = ddblimits.MaxItemSize
	// MaxTransactionSize is DynamoDB's limit on the items of one
	// transaction (4 MB) in bytes.
	MaxTransactionSize = ddblimits.MaxTransactionSize
	// MaxTransactionItems is DynamoDB's limit on the actions of one
	// transaction, and so on the messages of one EnqueueBatch.
	MaxTransactionItems = ddblimits.MaxTransactionItems
)

// ItemSize is an item's size in bytes as DynamoDB counts it against the
// 400 KB item and 4 MB transaction limits (see MaxItemSize), for callers
// that check their own transaction items before sending them.
func ItemSize(item map[string]types.AttributeValue) int { return ddblimits.ItemSize(item) }

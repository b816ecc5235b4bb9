package outboxddb

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB's limits on what one write may carry.
const (
	// MaxItemSize is DynamoDB's item size limit (400 KB) in bytes.
	MaxItemSize = 400 * 1024
	// MaxTransactionSize is DynamoDB's limit on the items of one
	// transaction (4 MB) in bytes.
	MaxTransactionSize = 4 * 1024 * 1024
	// MaxTransactionItems is DynamoDB's limit on the actions of one
	// transaction, and so on the messages of one EnqueueBatch.
	MaxTransactionItems = 100
)

// itemSize is an item's size as DynamoDB counts it against its limits:
// every attribute name plus its value, strings as UTF-8 bytes, binaries as
// their bytes, numbers as one byte per two significant digits plus one.
// Numbers are approximate by DynamoDB's own account, so an item within a few
// bytes of the limit may be judged differently by the service.
func itemSize(item map[string]types.AttributeValue) int {
	size := 0
	for name, v := range item {
		size += len(name)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			size += len(v.Value)
		case *types.AttributeValueMemberB:
			size += len(v.Value)
		case *types.AttributeValueMemberN:
			size += numberSize(v.Value)
		}
	}
	return size
}

func numberSize(n string) int {
	size := 1
	if strings.HasPrefix(n, "-") {
		size++
	}
	digits := strings.Trim(strings.ReplaceAll(strings.TrimLeft(n, "+-"), ".", ""), "0")
	return size + (len(digits)+1)/2
}

// ItemSize is an item's size in bytes as DynamoDB counts it against the
// 400 KB item and 4 MB transaction limits (see MaxItemSize), for callers
// that check their own transaction items before sending them.
func ItemSize(item map[string]types.AttributeValue) int { return itemSize(item) }

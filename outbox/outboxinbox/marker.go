package outboxinbox

import (
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
)

// Marker layout: one item per (consumer, message id), alone in its
// partition, so markers spread over the table's partitions like the random
// ids themselves and no partition gets hot.
const (
	// MarkerSortKey is every marker's sort key.
	MarkerSortKey = "INBOX"
	// markerInfix separates the key prefix from the message id.
	markerInfix = "#INBOX#"

	attrMessageID   = "MessageId"
	attrConsumer    = "Consumer"
	attrProcessedAt = "ProcessedAt"
	// AttrExpiresAt is the TTL attribute (epoch seconds): enable
	// DynamoDB's TTL on it to have expired markers deleted for free.
	AttrExpiresAt = "ExpiresAt"
)

// MarkerKey returns the partition key of the marker for id.
func (in *Inbox) MarkerKey(id outbox.MessageID) string {
	return in.opts.KeyPrefix + markerInfix + id.String()
}

// marker builds the conditional Put of the marker for id processed at now.
func (in *Inbox) marker(id outbox.MessageID, now time.Time) types.TransactWriteItem {
	o := in.opts
	return types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(o.TableName),
		Item: map[string]types.AttributeValue{
			o.PartitionKey:  &types.AttributeValueMemberS{Value: in.MarkerKey(id)},
			o.SortKey:       &types.AttributeValueMemberS{Value: MarkerSortKey},
			attrMessageID:   &types.AttributeValueMemberS{Value: id.String()},
			attrConsumer:    &types.AttributeValueMemberS{Value: o.Consumer},
			attrProcessedAt: &types.AttributeValueMemberN{Value: strconv.FormatInt(outbox.Ticks(now), 10)},
			AttrExpiresAt:   &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(o.TTL).Unix(), 10)},
		},
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": o.PartitionKey},
	}}
}

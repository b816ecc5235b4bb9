package outboxconf

import "strconv"

// The layout record of a key prefix: the item LayoutSortKey of the prefix's
// coordination partition ({prefix}#COORDINATION), stating the bucket count
// every writer and relay of that prefix checks theirs against. outboxddb
// reads and writes it; the CDK stack writes it at deployment. Both use
// these names, so the record the stack writes is the one the library reads.
const (
	LayoutSortKey     = "LAYOUT"
	LayoutBucketCount = "BucketCount"
	LayoutRecordedAt  = "RecordedAtUtc"
	LayoutRecordedBy  = "RecordedBy"
	// LayoutUpdate sets each attribute only where it is absent, so
	// recording never changes a record.
	LayoutUpdate = "SET #count = if_not_exists(#count, :count), #at = if_not_exists(#at, :now), #by = if_not_exists(#by, :by)"
	// LayoutUpdateUndated is LayoutUpdate for a writer without a clock
	// value (a deployment's parameters are fixed at synthesis).
	LayoutUpdateUndated = "SET #count = if_not_exists(#count, :count), #by = if_not_exists(#by, :by)"
	// LayoutFits accepts no record, or one stating the same count.
	LayoutFits = "attribute_not_exists(#count) OR #count = :count"
)

// LayoutRecordCall is the stack's UpdateItem of the layout record of
// keyPrefix in table, in the parameter form of the AWS SDK for JavaScript
// (a CDK AwsCustomResource): it records bucketCount, by, when there is no
// record, and is refused (ConditionalCheckFailedException, which fails the
// deployment) when the record states another count.
func LayoutRecordCall(table, partitionKey, sortKey, keyPrefix string, bucketCount int, by string) map[string]any {
	return map[string]any{
		"TableName": table,
		"Key": map[string]any{
			partitionKey: map[string]any{"S": keyPrefix + "#COORDINATION"},
			sortKey:      map[string]any{"S": LayoutSortKey},
		},
		"UpdateExpression":         LayoutUpdateUndated,
		"ConditionExpression":      LayoutFits,
		"ExpressionAttributeNames": map[string]any{"#count": LayoutBucketCount, "#by": LayoutRecordedBy},
		"ExpressionAttributeValues": map[string]any{
			":count": map[string]any{"N": strconv.Itoa(bucketCount)},
			":by":    map[string]any{"S": by},
		},
	}
}

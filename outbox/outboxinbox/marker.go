package outboxinbox

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// Marker layout: one item per (consumer, message id), alone in its
// partition, so markers spread over the table's partitions like the random
// ids themselves and no partition gets hot. The consumer is part of the
// key, so services sharing a key prefix never find each other's markers.
const (
	// MarkerSortKey is every marker's sort key.
	MarkerSortKey = "INBOX"
	// markerInfix separates the key prefix from the consumer.
	markerInfix = "#INBOX#"

	attrMessageID   = "MessageId"
	attrConsumer    = "Consumer"
	attrProcessedAt = "ProcessedAt"
	attrFingerprint = "Fingerprint"
	attrOutcome     = "Outcome"
	// AttrExpiresAt is the TTL attribute (epoch seconds): enable
	// DynamoDB's TTL on it to have expired markers deleted for free.
	AttrExpiresAt = "ExpiresAt"
)

// MarkerKey returns the partition key of this consumer's marker for id:
// "{KeyPrefix}#INBOX#{Consumer}#{id}".
func (in *Inbox) MarkerKey(id outbox.MessageID) string {
	return in.opts.KeyPrefix + markerInfix + in.opts.Consumer + "#" + id.String()
}

// marker is what a marker item says about an earlier verdict.
type marker struct {
	fingerprint string
	outcome     Outcome
}

// fingerprint is the hex SHA-256 of the record's topic, key and value, each
// preceded by its length as 8 bytes big-endian so no two different
// records share an input. These three are what the effect was computed
// from and what the relay publishes unchanged every time; headers (trace
// context, bridge additions), timestamp, partition and offset legitimately
// differ between two deliveries of one message and are left out.
func fingerprint(rec Record) string {
	h := sha256.New()
	var n [8]byte
	for _, part := range [][]byte{[]byte(rec.Topic), rec.Key, rec.Value} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// markerPut builds the conditional Put of the marker for id, recording
// rec's fingerprint and the outcome. On a refusal DynamoDB returns the
// stored marker, so a duplicate is judged without another read.
func (in *Inbox) markerPut(rec Record, id outbox.MessageID, out Outcome, now time.Time) types.TransactWriteItem {
	o := in.opts
	return types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(o.TableName),
		Item: map[string]types.AttributeValue{
			o.PartitionKey:  &types.AttributeValueMemberS{Value: in.MarkerKey(id)},
			o.SortKey:       &types.AttributeValueMemberS{Value: MarkerSortKey},
			attrMessageID:   &types.AttributeValueMemberS{Value: id.String()},
			attrConsumer:    &types.AttributeValueMemberS{Value: o.Consumer},
			attrProcessedAt: &types.AttributeValueMemberN{Value: strconv.FormatInt(lease.Ticks(now), 10)},
			attrFingerprint: &types.AttributeValueMemberS{Value: fingerprint(rec)},
			attrOutcome:     &types.AttributeValueMemberS{Value: out.String()},
			AttrExpiresAt:   &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(o.TTL).Unix(), 10)},
		},
		ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:            map[string]string{"#pk": o.PartitionKey},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// lookup reads the marker of id with one consistent read; nil when there
// is none.
func (in *Inbox) lookup(ctx context.Context, id outbox.MessageID) (*marker, error) {
	o := in.opts
	out, err := in.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(o.TableName),
		Key: map[string]types.AttributeValue{
			o.PartitionKey: &types.AttributeValueMemberS{Value: in.MarkerKey(id)},
			o.SortKey:      &types.AttributeValueMemberS{Value: MarkerSortKey},
		},
		ExpressionAttributeNames: map[string]string{"#fp": attrFingerprint, "#out": attrOutcome},
		ProjectionExpression:     aws.String("#fp, #out"),
		ConsistentRead:           aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("outboxinbox: read marker of message %s: %w", id, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return markerOf(out.Item), nil
}

// markerOf reads a stored marker's verdict attributes.
func markerOf(item map[string]types.AttributeValue) *marker {
	m := &marker{outcome: Applied}
	if v, ok := item[attrFingerprint].(*types.AttributeValueMemberS); ok {
		m.fingerprint = v.Value
	}
	if v, ok := item[attrOutcome].(*types.AttributeValueMemberS); ok && v.Value == DeadLettered.String() {
		m.outcome = DeadLettered
	}
	return m
}

// judge turns an existing marker into rec's verdict: a duplicate when the
// fingerprints agree, a *FingerprintError when the id was used for another
// record.
func (in *Inbox) judge(rec Record, id outbox.MessageID, m *marker) (Outcome, error) {
	if fp := fingerprint(rec); m.fingerprint != fp {
		return 0, &FingerprintError{MessageID: id.String(), Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Stored: m.fingerprint, Received: fp}
	}
	return Duplicate, nil
}

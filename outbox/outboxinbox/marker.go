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
	attrAttempts    = "Attempts"
	attrSource      = "Source"
	attrLastError   = "LastError"
	// AttrExpiresAt is the TTL attribute (epoch seconds): enable
	// DynamoDB's TTL on it to have expired markers deleted for free.
	AttrExpiresAt = "ExpiresAt"

	// stateFailed is the Outcome of a marker that only counts failed runs
	// of a record (Consumer); it proves nothing was applied.
	stateFailed = "failed"
	// maxLastError bounds the error a marker keeps, so a failed or
	// dead-lettered marker stays under 1 KB: one write unit per failed
	// run, and no extra unit for the success that replaces it.
	maxLastError = 256
)

// MarkerKey returns the partition key of this consumer's marker for id:
// "{KeyPrefix}#INBOX#{Consumer}#{id}".
func (in *Inbox) MarkerKey(id outbox.MessageID) string {
	return in.opts.KeyPrefix + markerInfix + in.opts.Consumer + "#" + id.String()
}

// marker is what a marker item says about earlier runs of a message.
type marker struct {
	fingerprint string
	// state is the stored Outcome: "applied", "dead-lettered" or
	// stateFailed.
	state string
	// attempts counts the failed runs of the delivery source names (a
	// Consumer's failed and dead-lettered markers).
	attempts int
	// source is "topic/partition@offset" of the delivery the failed runs
	// or the dead-lettering were of; empty on applied markers.
	source    string
	lastError string
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

// sourceOf names the delivery rec is: "topic/partition@offset". Two
// deliveries of one message (a duplicate publish, a re-drive) have two.
func sourceOf(rec Record) string {
	return fmt.Sprintf("%s/%d@%d", rec.Topic, rec.Partition, rec.Offset)
}

// markerPut builds the conditional Put of the applied marker for id,
// recording rec's fingerprint. It replaces only a marker that proves
// nothing was applied (failed runs, or a dead-lettering: a re-drive) for
// the same fingerprint; on a refusal DynamoDB returns the stored marker,
// so a duplicate is judged without another read.
func (in *Inbox) markerPut(rec Record, id outbox.MessageID, now time.Time) types.TransactWriteItem {
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
			attrOutcome:     &types.AttributeValueMemberS{Value: Applied.String()},
			AttrExpiresAt:   &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(o.TTL).Unix(), 10)},
		},
		ConditionExpression:      aws.String(replaceableMarker),
		ExpressionAttributeNames: map[string]string{"#pk": o.PartitionKey, "#out": attrOutcome, "#fp": attrFingerprint},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":applied": &types.AttributeValueMemberS{Value: Applied.String()},
			":fp":      &types.AttributeValueMemberS{Value: fingerprint(rec)},
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// replaceableMarker is the condition of every marker write: no marker, or
// one of the same record that proves nothing was applied.
const replaceableMarker = "attribute_not_exists(#pk) OR (#out <> :applied AND #fp = :fp)"

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
		ExpressionAttributeNames: map[string]string{"#fp": attrFingerprint, "#out": attrOutcome, "#att": attrAttempts, "#src": attrSource, "#err": attrLastError},
		ProjectionExpression:     aws.String("#fp, #out, #att, #src, #err"),
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

// markerOf reads a stored marker's attributes; a marker without an Outcome
// (written before outcomes were) is an applied one.
func markerOf(item map[string]types.AttributeValue) *marker {
	m := &marker{state: Applied.String()}
	str := func(name string) string {
		v, _ := item[name].(*types.AttributeValueMemberS)
		if v == nil {
			return ""
		}
		return v.Value
	}
	m.fingerprint, m.source, m.lastError = str(attrFingerprint), str(attrSource), str(attrLastError)
	if s := str(attrOutcome); s != "" {
		m.state = s
	}
	if v, ok := item[attrAttempts].(*types.AttributeValueMemberN); ok {
		m.attempts, _ = strconv.Atoi(v.Value)
	}
	return m
}

// judge turns an existing marker into rec's verdict, or says the handler
// must run:
//   - another fingerprint: a *FingerprintError, the id was used for
//     another record;
//   - applied: a duplicate;
//   - dead-lettered by this very delivery (read again after a crash before
//     its offset commit): a duplicate, so the dead-letter topic does not
//     get it again;
//   - dead-lettered by another delivery (a re-drive from the dead-letter
//     topic, or a copy published again), or failed runs only: run, since
//     nothing was applied; its commit replaces the marker, once.
func (in *Inbox) judge(rec Record, id outbox.MessageID, m *marker) (out Outcome, run bool, err error) {
	if fp := fingerprint(rec); m.fingerprint != fp {
		return 0, false, &FingerprintError{MessageID: id.String(), Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Stored: m.fingerprint, Received: fp}
	}
	switch {
	case m.state == Applied.String():
		return Duplicate, false, nil
	case m.state == DeadLettered.String() && m.source == sourceOf(rec):
		return Duplicate, false, nil
	}
	return 0, true, nil
}

// failedRuns returns the failed runs the marker counted for rec's
// delivery: 0 for another delivery or none.
func (m *marker) failedRuns(rec Record) int {
	if m == nil || m.state != stateFailed || m.source != sourceOf(rec) {
		return 0
	}
	return m.attempts
}

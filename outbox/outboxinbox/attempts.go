package outboxinbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// A Consumer keeps the failed runs of a record on the record's marker, so
// a restart, or another member of the group after a rebalance, continues
// the count: MaxAttempts bounds the runs of a poison record however often
// its consumer dies. Each failed run costs one UpdateItem of the marker (1
// write unit: a failed marker stays under 1 KB); a success costs nothing
// more than before, since the applied marker replaces the failed one in the
// transaction that writes it anyway. Records without a message id, and
// records refused for another record's marker, have no marker of their
// own: their count stays in the consumer's memory.

// countFailure records a failed run of rec on its marker and returns the
// failed runs of this delivery so far. prior is the marker the run read
// (nil: none). A refusal (the marker changed since: another process
// applied or counted the record) is an error, and the caller counts in
// memory.
func (in *Inbox) countFailure(ctx context.Context, rec Record, id outbox.MessageID, prior *marker, cause error) (int, error) {
	n := prior.failedRuns(rec)
	// The first failed run of a delivery (re)starts the count; later ones
	// add to it, whoever runs them.
	out, err := in.writeMarker(ctx, rec, id, stateFailed, cause, 1, n > 0)
	if err != nil {
		return 0, fmt.Errorf("outboxinbox: count failed run %d of message %s (%s): %w", n+1, id, sourceOf(rec), err)
	}
	if v, ok := out.Attributes[attrAttempts].(*types.AttributeValueMemberN); ok {
		if got, err := strconv.Atoi(v.Value); err == nil {
			return got, nil
		}
	}
	return n + 1, nil
}

// markDeadLettered records on rec's marker that its failure policy took
// it after attempts failed runs: a later read of the same delivery is a
// duplicate, another delivery of the message (a re-drive) runs again. A
// record without a message id has no marker; a marker of an applied
// record, or of another record under the same id, is left as it is.
func (in *Inbox) markDeadLettered(ctx context.Context, rec Record, attempts int, cause error) error {
	id, _, present, err := rec.messageID(in.opts.MessageIDHeader)
	if !present || err != nil {
		return nil
	}
	_, err = in.writeMarker(ctx, rec, id, DeadLettered.String(), cause, attempts, false)
	var ccf *types.ConditionalCheckFailedException
	if err == nil || errors.As(err, &ccf) {
		return nil
	}
	return fmt.Errorf("outboxinbox: mark message %s (%s) dead-lettered: %w", id, sourceOf(rec), err)
}

// writeMarker sends one conditional UpdateItem of rec's marker: state,
// the error, and n attempts, or n more than the stored count of the same
// delivery when add is set. It returns the new attempts.
func (in *Inbox) writeMarker(ctx context.Context, rec Record, id outbox.MessageID, state string, cause error, n int, add bool) (*dynamodb.UpdateItemOutput, error) {
	o := in.opts
	now := o.Clock.Now()
	names := map[string]string{"#out": attrOutcome, "#att": attrAttempts, "#src": attrSource, "#err": attrLastError, "#at": attrProcessedAt, "#exp": AttrExpiresAt}
	values := map[string]types.AttributeValue{
		":state": &types.AttributeValueMemberS{Value: state},
		":n":     &types.AttributeValueMemberN{Value: strconv.Itoa(n)},
		":src":   &types.AttributeValueMemberS{Value: sourceOf(rec)},
		":err":   &types.AttributeValueMemberS{Value: truncate(cause.Error(), maxLastError)},
		":now":   &types.AttributeValueMemberN{Value: strconv.FormatInt(lease.Ticks(now), 10)},
		":exp":   &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(o.TTL).Unix(), 10)},
	}
	update := "SET #out = :state, #err = :err, #at = :now, #exp = :exp ADD #att :n"
	cond := "#out = :state AND #src = :src"
	if !add {
		update = "SET #msg = :id, #cons = :cons, #fp = :fp, #out = :state, #att = :n, #src = :src, #err = :err, #at = :now, #exp = :exp"
		cond = replaceableMarker
		names["#pk"], names["#msg"], names["#cons"], names["#fp"] = o.PartitionKey, attrMessageID, attrConsumer, attrFingerprint
		values[":id"] = &types.AttributeValueMemberS{Value: id.String()}
		values[":cons"] = &types.AttributeValueMemberS{Value: o.Consumer}
		values[":fp"] = &types.AttributeValueMemberS{Value: fingerprint(rec)}
		values[":applied"] = &types.AttributeValueMemberS{Value: Applied.String()}
	}
	return in.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(o.TableName),
		Key: map[string]types.AttributeValue{
			o.PartitionKey: &types.AttributeValueMemberS{Value: in.MarkerKey(id)},
			o.SortKey:      &types.AttributeValueMemberS{Value: MarkerSortKey},
		},
		UpdateExpression: aws.String(update), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		ReturnValues: types.ReturnValueUpdatedNew,
	})
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

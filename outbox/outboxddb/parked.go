package outboxddb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// Attributes a parked item carries besides every attribute of the original
// message item.
const (
	attrParkedReason  = "ParkedReason"
	attrParkedError   = "ParkedError"
	attrAttempts      = "Attempts"
	attrFirstFailedAt = "FirstFailedAt"
	attrParkedAt      = "ParkedAt"
	// attrReplayRequested (N, ticks) marks a parked message an operator
	// asked to replay; attrReplayTopic (S) replaces its topic then.
	attrReplayRequested = "ReplayRequested"
	attrReplayTopic     = "ReplayTopic"
)

// Operation names of the parking requests, for telemetry.
const (
	OpParkedKeys = "parked_keys"
	OpPark       = "park"
	OpParkedList = "parked_list"
	OpReplay     = "replay"
	OpDrop       = "drop"
)

// maxParkedErrorBytes bounds the stored error text, so a parked copy of an
// item near DynamoDB's 400 KB limit still fits.
const maxParkedErrorBytes = 512

const (
	exprRowExists    = "attribute_exists(#pk)"
	exprMessageIDIs  = "#mid = :mid"
	exprNoMessageID  = "attribute_not_exists(#mid)"
	exprBehindParked = "attribute_exists(#pk) AND attribute_not_exists(#rr)"
	exprLeaseHeld    = "#owner = :me AND #expires > :beyond"
)

// parkedPartition is {P}#PARKED#{b}. Relays of other languages read only the
// MESSAGES, SEQUENCE and COORDINATION partitions, so parked items are
// invisible to them.
func (k keys) parkedPartition(bucket int) string {
	return k.prefix + "#PARKED#" + strconv.Itoa(bucket)
}

var _ outbox.Quarantine = (*Store)(nil)

// ParkedKeys reads the bucket's parked partition with one strongly
// consistent query (all pages) and returns, for every key with parked
// messages, their sequences ascending, and the messages marked for replay,
// decoded with their replay topic (or the reason one does not decode).
// Keyless items quarantine nothing. The query reads whole items: DynamoDB
// bills a query by the size of the items it reads whatever it projects, and
// a marked item is published from what it holds.
func (s *Store) ParkedKeys(ctx context.Context, bucket int) (outbox.ParkedSet, error) {
	items, err := s.queryAll(ctx, OpParkedKeys, &dynamodb.QueryInput{
		TableName:                 aws.String(s.opts.TableName),
		KeyConditionExpression:    aws.String(exprPartitionIs),
		ExpressionAttributeNames:  names("#pk", s.opts.PartitionKey),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(s.keys.parkedPartition(bucket))},
		ConsistentRead:            aws.Bool(true),
		ScanIndexForward:          aws.Bool(true),
	})
	if err != nil {
		return outbox.ParkedSet{}, fmt.Errorf("outboxddb: read the parked keys of bucket %d: %w", bucket, err)
	}
	set := outbox.ParkedSet{Keys: map[string][]int64{}}
	for _, item := range items {
		sk, _ := stringAttr(item, s.opts.SortKey)
		seq, digits := parseDigits(sk)
		if !digits {
			continue
		}
		if key, ok := item[attrKey].(*types.AttributeValueMemberB); ok {
			set.Keys[string(key.Value)] = append(set.Keys[string(key.Value)], seq)
		}
		if _, marked := item[attrReplayRequested]; !marked {
			continue
		}
		topic, _ := stringAttr(item, attrReplayTopic)
		m, err := replayMessage(s.keys, item, bucket, topic)
		if err != nil {
			if set.Unreplayable == nil {
				set.Unreplayable = map[int64]string{}
			}
			set.Unreplayable[seq] = err.Error()
			continue
		}
		set.Replays = append(set.Replays, m)
	}
	return set, nil
}

// Park moves the row (p.Bucket, p.Sequence) to the bucket's parked partition
// under its original sort key, keeping every attribute and adding
// ParkedReason, ParkedError, Attempts, FirstFailedAt and ParkedAt: one
// strongly consistent read of the row, then one TransactWriteItems with a
// Put conditioned on attribute_not_exists and a Delete of the original
// conditioned on its MessageId (or on its absence), plus, when p.Behind is
// set, a check that that parked item still exists and is not marked for
// replay (a marked key is replayed before it takes more), and, when
// p.Lease names an owner, a check that the bucket's lease item still names
// it and expires after p.Lease.Beyond. A refused lease check is
// outbox.ErrLeaseLost; any other refused condition, or a row already gone,
// is outbox.ErrParkConflict.
//
// Cost: the read (one unit for an item up to 4 KB) and 2 write units per
// KB of each transaction item: the Put and the Delete of the row, 2 each
// for the Behind check and for the lease check (both small items). The
// lease check adds 2 units to a park of a 1 KB row (4, or 6 behind a
// parked message, before it).
//
// The transaction's ClientRequestToken is derived from the row (bucket,
// sequence, message id) and the park's time, so the SDK's retries of one
// call are idempotent: a retry after a response was lost is answered as
// the applied request it repeats, not refused by the row it moved.
func (s *Store) Park(ctx context.Context, p outbox.Parking) error {
	item, err := s.readRow(ctx, s.keys.messagePartition(p.Bucket), p.Sequence)
	if err != nil {
		return err
	}
	if item == nil {
		return fmt.Errorf("outboxddb: park bucket %d row %d: the row is gone: %w", p.Bucket, p.Sequence, outbox.ErrParkConflict)
	}
	parked := maps.Clone(item)
	parked[s.opts.PartitionKey] = str(s.keys.parkedPartition(p.Bucket))
	parked[attrParkedReason] = str(string(p.Reason))
	if p.Error != "" {
		parked[attrParkedError] = str(truncateUTF8(p.Error, maxParkedErrorBytes))
	}
	parked[attrAttempts] = num(int64(p.Attempts))
	if !p.FirstFailedAt.IsZero() {
		parked[attrFirstFailedAt] = num(lease.Ticks(p.FirstFailedAt))
	}
	parked[attrParkedAt] = num(s.now())
	del := &types.Delete{
		TableName:                aws.String(s.opts.TableName),
		Key:                      s.keys.messageKey(p.Bucket, p.Sequence),
		ConditionExpression:      aws.String(exprNoMessageID),
		ExpressionAttributeNames: names("#mid", attrMessageID),
	}
	if id, ok := item[attrMessageID].(*types.AttributeValueMemberS); ok {
		del.ConditionExpression = aws.String(exprMessageIDIs)
		del.ExpressionAttributeValues = map[string]types.AttributeValue{":mid": str(id.Value)}
	} else if _, present := item[attrMessageID]; present {
		// A MessageId of another type cannot be compared: require the
		// row to still exist, which the Put's condition cannot see.
		del.ConditionExpression = aws.String(exprRowExists)
		del.ExpressionAttributeNames = names("#pk", s.opts.PartitionKey)
	}
	actions := []types.TransactWriteItem{
		{Put: &types.Put{TableName: aws.String(s.opts.TableName), Item: parked,
			ConditionExpression: aws.String(exprMessageIsNew), ExpressionAttributeNames: names("#pk", s.opts.PartitionKey)}},
		{Delete: del},
	}
	if p.Behind > 0 {
		actions = append(actions, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: aws.String(s.opts.TableName), Key: s.keys.key(s.keys.parkedPartition(p.Bucket), sequenceSortKeyOf(p.Behind)),
			ConditionExpression:      aws.String(exprBehindParked),
			ExpressionAttributeNames: names("#pk", s.opts.PartitionKey, "#rr", attrReplayRequested)}})
	}
	leaseCheck := -1
	if p.Lease.Owner != "" {
		leaseCheck = len(actions)
		actions = append(actions, types.TransactWriteItem{ConditionCheck: s.leaseCheck(p.Bucket, p.Lease)})
	}
	id, _ := stringAttr(item, attrMessageID)
	token := parkToken(s.opts.TableName, s.keys.messagePartition(p.Bucket), p, id, parked[attrParkedAt])
	_, err = s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: actions, ClientRequestToken: aws.String(token)})
	if refusedAt(err, leaseCheck) {
		s.tel.refused("", OpPark, p.Bucket)
		return fmt.Errorf("outboxddb: park bucket %d row %d: the lease of %s ran out or passed to another relay: %w",
			p.Bucket, p.Sequence, p.Lease.Owner, outbox.ErrLeaseLost)
	}
	if conditionFailed(err) {
		s.tel.refused("", OpPark, p.Bucket)
		return fmt.Errorf("outboxddb: park bucket %d row %d: %w: %v", p.Bucket, p.Sequence, outbox.ErrParkConflict, err)
	}
	if err != nil {
		s.tel.failed("", OpPark, p.Bucket, err)
		return fmt.Errorf("outboxddb: park bucket %d row %d: %w", p.Bucket, p.Sequence, err)
	}
	return nil
}

// parkToken derives a park's ClientRequestToken (at most 36 characters)
// from the row (table, partition, sequence, message id) and what the park
// writes: the same call always sends the same token, and another park of
// the same row, which may carry other attributes, another one. DynamoDB
// keeps tokens per account and region, not per table, and refuses one
// reused with other parameters for ten minutes: the table and partition
// keep the parks of two outboxes apart.
func parkToken(table, partition string, p outbox.Parking, id string, parkedAt types.AttributeValue) string {
	at := ""
	if n, ok := parkedAt.(*types.AttributeValueMemberN); ok {
		at = n.Value
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "park|%s|%s|%d|%d|%s|%s|%s|%d|%d|%d|%s|%s|%d", table, partition, p.Bucket, p.Sequence, id, at,
		p.Reason, p.Attempts, p.Behind, p.FirstFailedAt.UnixNano(), p.Error, p.Lease.Owner, p.Lease.Beyond.UnixNano()))
	return hex.EncodeToString(sum[:16])
}

// readRow reads one item of partition pk by sequence, strongly consistent;
// nil when absent.
func (s *Store) readRow(ctx context.Context, pk string, seq int64) (map[string]types.AttributeValue, error) {
	sk := sequenceSortKeyOf(seq)
	out, err := s.client.Query(ctx, &dynamodb.QueryInput{
		TableName:                aws.String(s.opts.TableName),
		KeyConditionExpression:   aws.String(exprPartitionBetween),
		ExpressionAttributeNames: names("#pk", s.opts.PartitionKey, "#sk", s.opts.SortKey),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(pk), ":first": str(sk), ":last": str(sk),
		},
		ConsistentRead: aws.Bool(true),
		Limit:          aws.Int32(1),
	})
	if err != nil {
		s.tel.failed("", OpPark, noBucket, err)
		return nil, fmt.Errorf("outboxddb: read %s row %d: %w", pk, seq, err)
	}
	if len(out.Items) == 0 {
		return nil, nil
	}
	return out.Items[0], nil
}

// leaseCheck is the transaction item that carries a bucket's lease into a
// write (outbox.LeaseCheck).
func (s *Store) leaseCheck(bucket int, l outbox.LeaseCheck) *types.ConditionCheck {
	return &types.ConditionCheck{
		TableName:                aws.String(s.opts.TableName),
		Key:                      s.keys.leaseKey(bucket),
		ConditionExpression:      aws.String(exprLeaseHeld),
		ExpressionAttributeNames: names("#owner", attrOwner, "#expires", attrExpiresAt),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":me": str(l.Owner), ":beyond": num(lease.Ticks(l.Beyond)),
		},
	}
}

// refusedAt reports a transaction cancelled because its action i failed
// its condition; false for i < 0.
func refusedAt(err error, i int) bool {
	var tce *types.TransactionCanceledException
	if i < 0 || !errors.As(err, &tce) || i >= len(tce.CancellationReasons) {
		return false
	}
	return aws.ToString(tce.CancellationReasons[i].Code) == "ConditionalCheckFailed"
}

// conditionFailed reports a refused condition of a single write or of any
// action of a transaction.
func conditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return true
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false
	}
	for _, r := range tce.CancellationReasons {
		if aws.ToString(r.Code) == "ConditionalCheckFailed" {
			return true
		}
	}
	return false
}

// truncateUTF8 cuts s to at most n bytes on a rune boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// timeOfTicks converts an optional ticks attribute; zero when absent.
func timeOfTicks(item map[string]types.AttributeValue, name string) time.Time {
	t, ok := intAttr(item, name)
	if !ok {
		return time.Time{}
	}
	return timeOf(t)
}

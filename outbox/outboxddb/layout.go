package outboxddb

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/generation"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// The layout record states the bucket count of one key prefix (one
// generation) of a table. It is the item LAYOUT of the prefix's
// coordination partition, so the strongly consistent query every full
// lease round already sends reads it at no extra request; relays of other
// languages read that partition too but take only sort keys starting with
// LEASE# and RELAY#, so they skip it. It is written once and never changed:
// a new count is a new generation, under a new key prefix, with a record
// of its own.
const (
	layoutSortKey  = outboxconf.LayoutSortKey
	attrRecordedAt = outboxconf.LayoutRecordedAt
	attrRecordedBy = outboxconf.LayoutRecordedBy
	// exprRecordLayout sets each attribute only where it is absent, so
	// recording never changes an existing record and is never refused:
	// the caller compares the returned count with its own.
	exprRecordLayout = outboxconf.LayoutUpdate
	// exprLayoutFits accepts no record or one with the same count.
	exprLayoutFits = outboxconf.LayoutFits
)

// Operation names of the layout requests, for telemetry.
const (
	OpLayoutRead   = "layout_read"
	OpLayoutRecord = "layout_record"
)

// Who records a layout (Layout.RecordedBy).
const (
	RecordedByCreateTable = "outboxddb.CreateIfNotExists"
	RecordedByGeneration  = "generation open"
)

// Layout is what a table's layout record states for one key prefix.
type Layout struct {
	// KeyPrefix is the generation's key prefix, the record's partition.
	KeyPrefix string
	// BucketCount is the generation's bucket count.
	BucketCount int
	// RecordedAt is when the record was written; zero when it does not
	// say (a record written by the CDK stack).
	RecordedAt time.Time
	// RecordedBy names what wrote it: RecordedByCreateTable,
	// RecordedByGeneration, "spillway layout record", the CDK stack.
	RecordedBy string
}

// LayoutError reports a bucket count that differs from the one the table's
// layout record states. Nothing was written. It matches
// outbox.ErrMisconfigured, so a relay ends its run instead of retrying.
type LayoutError struct {
	// Table and KeyPrefix locate the record.
	Table, KeyPrefix string
	// Recorded is the table's bucket count, Configured the caller's.
	Recorded, Configured int
	// Role names the caller: "writer", "relay", a CLI command.
	Role string
	// Setting names what sets the caller's count. Default
	// "Options.BucketCount or SPILLWAY_BUCKET_COUNT".
	Setting string
}

// Error implements error: one sentence with both counts, the table and the
// fix.
func (e *LayoutError) Error() string {
	setting := e.Setting
	if setting == "" {
		setting = "Options.BucketCount or SPILLWAY_BUCKET_COUNT"
	}
	return fmt.Sprintf("outboxddb: table %s records bucket count %d for key prefix %s but this %s uses %d, so nothing was written: "+
		"set %s to %d (a new count needs a new generation: docs/operations.md#changing-the-bucket-count)",
		e.Table, e.Recorded, e.KeyPrefix, e.Role, e.Configured, setting, e.Recorded)
}

// Is reports whether target is outbox.ErrMisconfigured.
func (e *LayoutError) Is(target error) bool { return target == outbox.ErrMisconfigured }

// Check returns a *LayoutError when count is not the recorded one.
func (l Layout) Check(table, role string, count int) error {
	if l.BucketCount == count {
		return nil
	}
	return &LayoutError{Table: table, KeyPrefix: l.KeyPrefix, Recorded: l.BucketCount, Configured: count, Role: role}
}

func (k keys) layoutKey() map[string]types.AttributeValue {
	return k.key(k.coordinationPartition(), layoutSortKey)
}

// isLayout reports whether a coordination item is the layout record.
func (k keys) isLayout(item map[string]types.AttributeValue) bool {
	sk, _ := stringAttr(item, k.sk)
	return sk == layoutSortKey
}

// decodeLayout reads a layout record. A record without an integer
// BucketCount of at least 1 is an *InvalidItemError: nobody can check
// against it, and nothing may write until it is repaired.
func (k keys) decodeLayout(item map[string]types.AttributeValue) (Layout, error) {
	count, ok := intAttr(item, attrBucketCount)
	if !ok || count < 1 || count > maxInt32 {
		return Layout{}, &InvalidItemError{PartitionKey: k.coordinationPartition(), SortKey: layoutSortKey,
			Reason: fmt.Sprintf("the layout record needs %s, an integer >= 1", attrBucketCount)}
	}
	by, _ := stringAttr(item, attrRecordedBy)
	return Layout{KeyPrefix: k.prefix, BucketCount: int(count), RecordedAt: timeOfTicks(item, attrRecordedAt), RecordedBy: by}, nil
}

// layoutIn finds the layout record among coordination items and checks
// count against it: nil when there is none or it agrees.
func (k keys) layoutIn(items []map[string]types.AttributeValue, table, role string, count int) error {
	for _, item := range items {
		if !k.isLayout(item) {
			continue
		}
		l, err := k.decodeLayout(item)
		if err != nil {
			return err
		}
		return l.Check(table, role, count)
	}
	return nil
}

// ReadLayout reads the layout record of opts' key prefix with one strongly
// consistent Query of its key (one read unit). found is false for a table
// without one: created before the record existed, or by other tooling
// (see RecordLayout).
func ReadLayout(ctx context.Context, client Client, opts Options) (l Layout, found bool, err error) {
	opts, err = opts.resolve()
	if err != nil {
		return Layout{}, false, err
	}
	k := newKeys(opts)
	item, err := readItem(ctx, client, opts, newTelemetry(opts.Hooks), OpLayoutRead, k.coordinationPartition(), layoutSortKey)
	if err != nil || item == nil {
		return Layout{}, false, err
	}
	l, err = k.decodeLayout(item)
	return l, err == nil, err
}

// RecordLayout records opts' key prefix and bucket count unless the table
// already records one for the prefix, with one UpdateItem that sets only
// absent attributes (one write unit, never refused), and returns the record
// as stored. A record with another count is a *LayoutError naming role.
// by says who records (Layout.RecordedBy).
//
// CreateIfNotExists calls it for a table it creates and OpenGeneration for
// the new generation; for a table created before the record existed, an
// operator states the count with `spillway layout record`.
func RecordLayout(ctx context.Context, client Client, opts Options, by, role string) (Layout, error) {
	opts, err := opts.resolve()
	if err != nil {
		return Layout{}, err
	}
	k := newKeys(opts)
	out, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(opts.TableName),
		Key:                      k.layoutKey(),
		UpdateExpression:         aws.String(exprRecordLayout),
		ExpressionAttributeNames: names("#count", attrBucketCount, "#at", attrRecordedAt, "#by", attrRecordedBy),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":count": num(int64(opts.BucketCount)), ":now": num(lease.Ticks(opts.Clock.Now())), ":by": str(by),
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if err != nil {
		newTelemetry(opts.Hooks).failed("", OpLayoutRecord, noBucket, err)
		return Layout{}, fmt.Errorf("outboxddb: record the layout of key prefix %s in table %s: %w", opts.KeyPrefix, opts.TableName, err)
	}
	l, err := k.decodeLayout(out.Attributes)
	if err != nil {
		return Layout{}, err
	}
	return l, l.Check(opts.TableName, role, opts.BucketCount)
}

// successorLayout is the update recording successor's layout, part of
// OpenGeneration's transaction: RecordLayout's update, refused when the
// successor already records another count.
func (s *Store) successorLayout(successor generation.Generation, now int64) *types.Update {
	return &types.Update{
		TableName:                aws.String(s.opts.TableName),
		Key:                      s.keysOf(successor.KeyPrefix).layoutKey(),
		UpdateExpression:         aws.String(exprRecordLayout),
		ConditionExpression:      aws.String(exprLayoutFits),
		ExpressionAttributeNames: names("#count", attrBucketCount, "#at", attrRecordedAt, "#by", attrRecordedBy),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":count": num(int64(successor.BucketCount)), ":now": num(now), ":by": str(RecordedByGeneration + " after " + s.Generation().String()),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// readItem reads one item by its key with one strongly consistent Query
// (a writer's role may query, not get); nil when absent.
func readItem(ctx context.Context, client Client, opts Options, tel telemetry, op, pk, sk string) (map[string]types.AttributeValue, error) {
	out, err := client.Query(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(opts.TableName),
		KeyConditionExpression:    aws.String(exprItemKey),
		ExpressionAttributeNames:  names("#pk", opts.PartitionKey, "#sk", opts.SortKey),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pk), ":sk": str(sk)},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		tel.failed("", op, noBucket, err)
		return nil, fmt.Errorf("outboxddb: read %s of %q: %w", sk, pk, err)
	}
	if len(out.Items) == 0 {
		return nil, nil
	}
	return out.Items[0], nil
}

package outboxddb

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/internal/sleep"
)

// tablePollInterval is how often CreateIfNotExists asks whether the table
// is active.
const tablePollInterval = 250 * time.Millisecond

// CreateTableInput returns the table the outbox needs: a string partition
// key and a string sort key named as in opts, billed on demand, and nothing
// else (no secondary index, stream or time to live). Adjust it before
// creating if you must; do not add time to live on outbox items.
func CreateTableInput(opts Options) (*dynamodb.CreateTableInput, error) {
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(opts.TableName),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(opts.PartitionKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(opts.SortKey), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(opts.PartitionKey), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(opts.SortKey), KeyType: types.KeyTypeRange},
		},
	}, nil
}

// CreateIfNotExists creates the table of CreateTableInput unless it exists,
// waits until it is active (asking every 250 ms, for as long
// as ctx allows), and verifies its key schema. Several instances may call it
// at once. A table whose keys differ from opts is a misconfiguration.
//
// It also keeps the table's layout record (RecordLayout): a table it
// creates, or finds being created, gets a record of opts' key prefix and
// bucket count; an existing table's record is checked, and one stating
// another count is a *LayoutError. An existing table without a record
// (created before the record existed) is left as it is: stating its
// count is an operator's step, `spillway layout record`.
//
// For development, tests and samples; provision production tables with your
// infrastructure code (the CDK stack records the layout itself).
func CreateIfNotExists(ctx context.Context, client Client, opts Options) error {
	in, err := CreateTableInput(opts)
	if err != nil {
		return err
	}
	opts = opts.WithDefaults()
	_, err = client.CreateTable(ctx, in)
	if err != nil && !isResourceInUse(err) {
		return fmt.Errorf("outboxddb: create table %q: %w", opts.TableName, err)
	}
	created := err == nil
	for {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: in.TableName})
		switch {
		case err == nil && out.Table != nil && out.Table.TableStatus == types.TableStatusActive:
			if err := checkKeySchema(opts, out.Table); err != nil {
				return err
			}
			return keepLayout(ctx, client, opts, created)
		case err == nil && out.Table != nil && out.Table.TableStatus == types.TableStatusCreating:
			// Another instance is creating it: record as its creator does.
			created = true
		case err != nil && !isResourceNotFound(err):
			return fmt.Errorf("outboxddb: describe table %q: %w", opts.TableName, err)
		}
		// Not active yet, or the creation is not visible yet.
		if !sleep.For(tablePollInterval, ctx.Done()) {
			return fmt.Errorf("outboxddb: wait for table %q to become active: %w", opts.TableName, context.Cause(ctx))
		}
	}
}

// keepLayout records the layout of a new table, or checks the record of
// an existing one.
func keepLayout(ctx context.Context, client Client, opts Options, created bool) error {
	const role = "CreateIfNotExists call"
	if created {
		_, err := RecordLayout(ctx, client, opts, RecordedByCreateTable, role)
		return err
	}
	l, found, err := ReadLayout(ctx, client, opts)
	if err != nil || !found {
		return err
	}
	return l.Check(opts.TableName, role, opts.BucketCount)
}

// checkKeySchema verifies that the table's hash and range keys are the
// string attributes opts names.
func checkKeySchema(opts Options, table *types.TableDescription) error {
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, d := range table.AttributeDefinitions {
		attrTypes[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	var hash, rng string
	var actual []string
	for _, k := range table.KeySchema {
		name := aws.ToString(k.AttributeName)
		actual = append(actual, fmt.Sprintf("%s (%s, %s)", name, k.KeyType, attrTypes[name]))
		switch k.KeyType {
		case types.KeyTypeHash:
			hash = name
		case types.KeyTypeRange:
			rng = name
		}
	}
	if hash == opts.PartitionKey && rng == opts.SortKey && attrTypes[hash] == types.ScalarAttributeTypeS && attrTypes[rng] == types.ScalarAttributeTypeS {
		return nil
	}
	return outbox.Misconfigured("create table",
		"table %q has key schema [%s] but the outbox needs %s (HASH, S) and %s (RANGE, S); use another table, or set PartitionKey and SortKey to the table's string key attributes",
		opts.TableName, strings.Join(actual, ", "), opts.PartitionKey, opts.SortKey)
}

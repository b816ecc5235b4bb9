package outboxddb

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func table(status types.TableStatus, keys ...string) *dynamodb.DescribeTableOutput {
	desc := &types.TableDescription{TableStatus: status}
	for i := 0; i+3 <= len(keys); i += 3 {
		desc.KeySchema = append(desc.KeySchema, types.KeySchemaElement{AttributeName: aws.String(keys[i]), KeyType: types.KeyType(keys[i+1])})
		desc.AttributeDefinitions = append(desc.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(keys[i]), AttributeType: types.ScalarAttributeType(keys[i+2])})
	}
	return &dynamodb.DescribeTableOutput{Table: desc}
}

func TestTable(t *testing.T) {
	t.Run("CreateIfNotExists_WaitsUntilTheTableIsActive", func(t *testing.T) {
		synctest.Test(t, testCreateIfNotExistsWaits)
	})

	t.Run("CreateIfNotExists_Errors", func(t *testing.T) {
		boom := errors.New("access denied")
		for name, c := range map[string]struct {
			create   error
			describe func() (*dynamodb.DescribeTableOutput, error)
			ctx      func() context.Context
			check    func(error) bool
		}{
			"create fails": {
				create: boom, check: func(err error) bool { return errors.Is(err, boom) },
			},
			"describe fails": {
				describe: func() (*dynamodb.DescribeTableOutput, error) { return nil, boom },
				check:    func(err error) bool { return errors.Is(err, boom) },
			},
			"never active, context ends": {
				describe: func() (*dynamodb.DescribeTableOutput, error) { return table(types.TableStatusCreating), nil },
				ctx: func() context.Context {
					ctx, cancel := context.WithCancel(context.Background())
					cancel()
					return ctx
				},
				check: func(err error) bool { return errors.Is(err, context.Canceled) },
			},
			"other key schema": {
				describe: func() (*dynamodb.DescribeTableOutput, error) {
					return table(types.TableStatusActive, "id", "HASH", "S", "SK", "RANGE", "N"), nil
				},
				check: func(err error) bool {
					return errors.Is(err, outbox.ErrMisconfigured) && strings.Contains(err.Error(), "[id (HASH, S), SK (RANGE, N)]")
				},
			},
			"no sort key": {
				describe: func() (*dynamodb.DescribeTableOutput, error) {
					return table(types.TableStatusActive, "PK", "HASH", "S"), nil
				},
				check: func(err error) bool { return errors.Is(err, outbox.ErrMisconfigured) },
			},
		} {
			t.Run(name, func(t *testing.T) {
				f := &fakeDB{}
				if c.create != nil {
					f.create = func(*dynamodb.CreateTableInput) (*dynamodb.CreateTableOutput, error) { return nil, c.create }
				}
				if c.describe != nil {
					f.describe = func(*dynamodb.DescribeTableInput) (*dynamodb.DescribeTableOutput, error) { return c.describe() }
				}
				ctx := context.Background()
				if c.ctx != nil {
					ctx = c.ctx()
				}
				if err := CreateIfNotExists(ctx, f, Options{TableName: "outbox", Clock: newStepClock(t0)}); !c.check(err) {
					t.Fatalf("CreateIfNotExists = %v", err)
				}
			})
		}
	})

	t.Run("CreateIfNotExists_OnTheEndpoint_IsIdempotent_AndChecksTheKeys", func(t *testing.T) {
		d := outboxtest.NewDynamoDB(t)
		opts := Options{TableName: d.NewTableName()}
		createTable(t, d, opts)
		// A second instance, at once: the table exists.
		if err := CreateIfNotExists(t.Context(), d.Client, opts); err != nil {
			t.Fatal(err)
		}
		// An outbox configured for other key names.
		opts.PartitionKey, opts.SortKey = "pk", "sk"
		err := CreateIfNotExists(t.Context(), d.Client, opts)
		if !errors.Is(err, outbox.ErrMisconfigured) || !strings.Contains(err.Error(), "PK (HASH, S), SK (RANGE, S)") {
			t.Fatalf("mismatched keys = %v", err)
		}
	})
}

func testCreateIfNotExistsWaits(t *testing.T) {
	var describedAt []time.Time
	answers := []func() (*dynamodb.DescribeTableOutput, error){
		func() (*dynamodb.DescribeTableOutput, error) {
			return nil, &types.ResourceNotFoundException{Message: aws.String("not yet")}
		},
		func() (*dynamodb.DescribeTableOutput, error) {
			return table(types.TableStatusCreating, "PK", "HASH", "S", "SK", "RANGE", "S"), nil
		},
		func() (*dynamodb.DescribeTableOutput, error) {
			return table(types.TableStatusActive, "PK", "HASH", "S", "SK", "RANGE", "S"), nil
		},
	}
	f := &fakeDB{
		create: func(*dynamodb.CreateTableInput) (*dynamodb.CreateTableOutput, error) {
			return nil, &types.ResourceInUseException{Message: aws.String("another instance creates it")}
		},
		// The record as the other instance's update left it.
		update: func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			return &dynamodb.UpdateItemOutput{Attributes: map[string]types.AttributeValue{attrBucketCount: in.ExpressionAttributeValues[":count"]}}, nil
		},
	}
	f.describe = func(*dynamodb.DescribeTableInput) (*dynamodb.DescribeTableOutput, error) {
		describedAt = append(describedAt, time.Now())
		next := answers[0]
		answers = answers[1:]
		return next()
	}
	if err := CreateIfNotExists(context.Background(), f, Options{TableName: "outbox", Clock: newStepClock(t0)}); err != nil {
		t.Fatal(err)
	}
	// A table seen being created gets the layout record, as its creator
	// writes it.
	wantOps(t, f, "CreateTable", "DescribeTable", "DescribeTable", "DescribeTable", "UpdateItem")
	describe := &dynamodb.DescribeTableInput{TableName: aws.String("outbox")}
	wantShapes(t, f, "DescribeTable", describe, describe, describe)
	create, err := CreateTableInput(Options{TableName: "outbox"})
	if err != nil {
		t.Fatal(err)
	}
	wantShapes(t, f, "CreateTable", create)
	var waits []time.Duration
	for i := 1; i < len(describedAt); i++ {
		waits = append(waits, describedAt[i].Sub(describedAt[i-1]))
	}
	if !slices.Equal(waits, []time.Duration{250 * time.Millisecond, 250 * time.Millisecond}) {
		t.Fatalf("waits %v between the describes, want 250ms twice", waits)
	}
}

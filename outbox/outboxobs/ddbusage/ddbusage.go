// Package ddbusage counts the DynamoDB requests a client sends and the
// capacity DynamoDB reports they consumed, for the DynamoDBRequests,
// ReadUnits and WriteUnits metrics: the cost of the outbox per message is
// what operators watch. It asks DynamoDB for the TOTAL consumed capacity on
// every request that can report it.
//
// A refused conditional write is billed like an accepted one, but its error
// carries no consumed capacity: it is counted as one write unit, the minimum
// charge, which is exact for the lease and heartbeat items (all under 1 KB).
package ddbusage

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// Sink receives the counts of every request as it completes; it must be
// safe for concurrent use (*emf.Recorder is one).
type Sink interface {
	AddDynamoDB(requests int, readUnits, writeUnits float64)
}

// Instrument adds the counting middleware to a DynamoDB client's options:
// dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { ddbusage.Instrument(&o.APIOptions, sink) }).
// A nil sink adds nothing.
func Instrument(apiOptions *[]func(*middleware.Stack) error, sink Sink) {
	if sink == nil {
		return
	}
	*apiOptions = append(*apiOptions, func(stack *middleware.Stack) error {
		ask := middleware.InitializeMiddlewareFunc("spillway:ReturnConsumedCapacity", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			in.Parameters = WithTotalCapacity(in.Parameters)
			return next.HandleInitialize(ctx, in)
		})
		if err := stack.Initialize.Add(ask, middleware.After); err != nil {
			return err
		}
		count := middleware.InitializeMiddlewareFunc("spillway:CountUsage", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			read, write := Consumed(out.Result)
			if err != nil && isRefusedWrite(err) {
				write = max(write, 1)
			}
			sink.AddDynamoDB(1, read, write)
			return out, md, err
		})
		return stack.Initialize.Add(count, middleware.Before)
	})
}

func isRefusedWrite(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	var tce *types.TransactionCanceledException
	return errors.As(err, &ccf) || errors.As(err, &tce)
}

// Consumed returns the read and write units an operation's output reports.
// A write reports its units as CapacityUnits only; a read likewise.
func Consumed(result any) (read, write float64) {
	var caps []types.ConsumedCapacity
	isWrite := true
	switch out := result.(type) {
	case *dynamodb.PutItemOutput:
		caps = one(out.ConsumedCapacity)
	case *dynamodb.UpdateItemOutput:
		caps = one(out.ConsumedCapacity)
	case *dynamodb.DeleteItemOutput:
		caps = one(out.ConsumedCapacity)
	case *dynamodb.BatchWriteItemOutput:
		caps = out.ConsumedCapacity
	case *dynamodb.TransactWriteItemsOutput:
		caps = out.ConsumedCapacity
	case *dynamodb.QueryOutput:
		caps, isWrite = one(out.ConsumedCapacity), false
	case *dynamodb.GetItemOutput:
		caps, isWrite = one(out.ConsumedCapacity), false
	case *dynamodb.ScanOutput:
		caps, isWrite = one(out.ConsumedCapacity), false
	case *dynamodb.BatchGetItemOutput:
		caps, isWrite = out.ConsumedCapacity, false
	case *dynamodb.TransactGetItemsOutput:
		caps, isWrite = out.ConsumedCapacity, false
	}
	for _, c := range caps {
		r, w := aws.ToFloat64(c.ReadCapacityUnits), aws.ToFloat64(c.WriteCapacityUnits)
		if r == 0 && w == 0 {
			if isWrite {
				w = aws.ToFloat64(c.CapacityUnits)
			} else {
				r = aws.ToFloat64(c.CapacityUnits)
			}
		}
		read += r
		write += w
	}
	return read, write
}

func one(c *types.ConsumedCapacity) []types.ConsumedCapacity {
	if c == nil {
		return nil
	}
	return []types.ConsumedCapacity{*c}
}

// WithTotalCapacity returns a copy of an operation's input that asks for
// the TOTAL consumed capacity, unless it already asks for some; other
// inputs come back unchanged. The caller's input is never modified.
func WithTotalCapacity(params any) any {
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		return withTotal(in, func(v *dynamodb.PutItemInput) *types.ReturnConsumedCapacity { return &v.ReturnConsumedCapacity })
	case *dynamodb.UpdateItemInput:
		return withTotal(in, func(v *dynamodb.UpdateItemInput) *types.ReturnConsumedCapacity { return &v.ReturnConsumedCapacity })
	case *dynamodb.DeleteItemInput:
		return withTotal(in, func(v *dynamodb.DeleteItemInput) *types.ReturnConsumedCapacity { return &v.ReturnConsumedCapacity })
	case *dynamodb.GetItemInput:
		return withTotal(in, func(v *dynamodb.GetItemInput) *types.ReturnConsumedCapacity { return &v.ReturnConsumedCapacity })
	case *dynamodb.QueryInput:
		return withTotal(in, func(v *dynamodb.QueryInput) *types.ReturnConsumedCapacity { return &v.ReturnConsumedCapacity })
	case *dynamodb.ScanInput:
		return withTotal(in, func(v *dynamodb.ScanInput) *types.ReturnConsumedCapacity { return &v.ReturnConsumedCapacity })
	case *dynamodb.BatchWriteItemInput:
		return withTotal(in, func(v *dynamodb.BatchWriteItemInput) *types.ReturnConsumedCapacity { return &v.ReturnConsumedCapacity })
	case *dynamodb.BatchGetItemInput:
		return withTotal(in, func(v *dynamodb.BatchGetItemInput) *types.ReturnConsumedCapacity { return &v.ReturnConsumedCapacity })
	case *dynamodb.TransactWriteItemsInput:
		return withTotal(in, func(v *dynamodb.TransactWriteItemsInput) *types.ReturnConsumedCapacity {
			return &v.ReturnConsumedCapacity
		})
	case *dynamodb.TransactGetItemsInput:
		return withTotal(in, func(v *dynamodb.TransactGetItemsInput) *types.ReturnConsumedCapacity {
			return &v.ReturnConsumedCapacity
		})
	default:
		return params
	}
}

// withTotal copies in with its ReturnConsumedCapacity field set to TOTAL.
func withTotal[T any](in *T, field func(*T) *types.ReturnConsumedCapacity) any {
	if *field(in) != "" {
		return in
	}
	cp := *in
	*field(&cp) = types.ReturnConsumedCapacityTotal
	return &cp
}

package outboxtest

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// inputKey carries an operation's input to the per-attempt Counter.
type inputKey struct{}

// attachMiddleware adds, outermost first: the operation-level faults, the
// input capture (after the faults, so the Counter sees what was sent), the
// per-attempt Counter outside the deserializers (it sees typed results and
// errors), and the transport faults inside them (they answer in HTTP).
func attachMiddleware(stack *middleware.Stack, counter *Counter, faults *Faults, reportCapacity bool) error {
	if err := stack.Initialize.Add(faults.operations(), middleware.Before); err != nil {
		return err
	}
	capture := middleware.InitializeMiddlewareFunc("spillway:CaptureInput", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		if reportCapacity {
			in.Parameters = withTotalCapacity(in.Parameters)
		}
		ctx = middleware.WithStackValue(ctx, inputKey{}, in.Parameters)
		return next.HandleInitialize(ctx, in)
	})
	if err := stack.Initialize.Add(capture, middleware.After); err != nil {
		return err
	}
	count := middleware.DeserializeMiddlewareFunc("spillway:Counter", func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
		out, md, err := next.HandleDeserialize(ctx, in)
		counter.record(middleware.GetOperationName(ctx), middleware.GetStackValue(ctx, inputKey{}), out.Result, err)
		return out, md, err
	})
	if err := stack.Deserialize.Add(count, middleware.Before); err != nil {
		return err
	}
	return stack.Deserialize.Add(faults.transport(), middleware.After)
}

// withTotalCapacity returns a copy of an input that asks for the consumed
// capacity, unless it already asks for some.
func withTotalCapacity(params any) any {
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

// withTotal copies in with its ReturnConsumedCapacity field set to TOTAL,
// leaving the caller's input untouched.
func withTotal[T any](in *T, field func(*T) *types.ReturnConsumedCapacity) any {
	if *field(in) != "" {
		return in
	}
	cp := *in
	*field(&cp) = types.ReturnConsumedCapacityTotal
	return &cp
}

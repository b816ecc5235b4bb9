package outboxlocal

import (
	"context"

	"github.com/aws/smithy-go/middleware"

	"github.com/spillway-dev/spillway/outbox/outboxobs/ddbusage"
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
			in.Parameters = ddbusage.WithTotalCapacity(in.Parameters)
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

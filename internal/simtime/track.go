package simtime

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// DynamoDBOption makes every operation of a DynamoDB client one call in
// flight, from before its first attempt to after its answer is decoded
// (retries and their backoff included).
func (a *Activity) DynamoDBOption() func(*dynamodb.Options) {
	inFlight := middleware.InitializeMiddlewareFunc("SimulationCallInFlight", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		a.Begin()
		defer a.End()
		return next.HandleInitialize(ctx, in)
	})
	return func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(inFlight, middleware.Before)
		})
	}
}

package xray

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-xray-sdk-go/instrumentation/awsv2"
	"github.com/aws/aws-xray-sdk-go/strategy/ctxmissing"
	awsxray "github.com/aws/aws-xray-sdk-go/xray"
	"github.com/aws/smithy-go/middleware"
)

// InstrumentAWS makes every client built from cfg record a subsegment per
// AWS call (service, operation, request id, HTTP status) under the span in
// the call's ctx, and send the X-Ray trace header downstream. Calls made
// while tracing is off (see Active) are not recorded and, unlike the bare
// SDK instrumentor, log no "segment cannot be found" error.
func InstrumentAWS(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, quietWhenInactive)
	awsv2.AWSV2Instrumentor(&cfg.APIOptions)
}

// ignoreMissing is the recorder handed to calls made while tracing is off.
var ignoreMissing = &awsxray.Config{ContextMissingStrategy: ctxmissing.NewDefaultIgnoreErrorStrategy()}

// quietWhenInactive runs before the X-Ray middleware and, when ctx has
// neither a segment nor a Lambda trace header, scopes the ignore strategy to
// this call's ctx; the process-wide strategy stays as configured.
func quietWhenInactive(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("SpillwayXRayQuietWhenInactive", func(
		ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler,
	) (middleware.InitializeOutput, middleware.Metadata, error) {
		if !Active(ctx) && awsxray.GetRecorder(ctx) == nil {
			ctx = context.WithValue(ctx, awsxray.RecorderContextKey{}, ignoreMissing)
		}
		return next.HandleInitialize(ctx, in)
	}), middleware.Before)
}

package otel

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"go.opentelemetry.io/contrib/propagators/aws/xray"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// rpcSystemAWS is the rpc.system.name of a call to an AWS API.
var rpcSystemAWS = semconv.RPCSystemNameKey.String("aws-api")

// InstrumentAWS makes every client built from cfg record one client span
// per AWS operation (retries included) under the span in the call's ctx:
// named Service.Operation (DynamoDB.Query), with rpc.system.name aws-api,
// rpc.method Service/Operation, cloud.region, the last attempt's
// http.response.status_code and aws.request_id, and the error as the
// span's status. Every attempt sends that span's X-Ray trace header to the
// service. Calls outside a root span record nothing and send no header.
//
// The middleware is this package's own: the OpenTelemetry contrib
// instrumentation of the AWS SDK for Go v2 is deprecated without a
// successor.
func (p *Provider) InstrumentAWS(cfg *aws.Config) {
	tracer := p.scoped.Tracer(ScopeName)
	cfg.APIOptions = append(cfg.APIOptions, func(stack *middleware.Stack) error {
		// After the SDK's own initialize steps, which register the
		// service, operation and region this span is named by.
		if err := stack.Initialize.Add(awsSpan{tracer}, middleware.After); err != nil {
			return err
		}
		// After signing is fine: the header is not among the signed ones.
		if err := stack.Finalize.Add(traceHeader, middleware.After); err != nil {
			return err
		}
		return stack.Deserialize.Add(responseAttributes, middleware.Before)
	})
}

// awsSpan opens the operation's span around everything after it.
type awsSpan struct{ tracer trace.Tracer }

func (awsSpan) ID() string { return "SpillwayOTelAWSSpan" }

func (m awsSpan) HandleInitialize(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	service, operation := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
	ctx, span := m.tracer.Start(ctx, service+"."+operation, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(rpcSystemAWS, semconv.RPCMethod(service+"/"+operation), semconv.CloudRegion(awsmiddleware.GetRegion(ctx))))
	defer span.End()
	out, md, err := next.HandleInitialize(ctx, in)
	if err != nil {
		span.SetAttributes(semconv.ErrorType(err))
		span.SetStatus(codes.Error, err.Error())
	}
	return out, md, err
}

// traceHeader sends the span's X-Ray trace header with each attempt.
var traceHeader = middleware.FinalizeMiddlewareFunc("SpillwayOTelAWSTraceHeader", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	if req, ok := in.Request.(*smithyhttp.Request); ok {
		xray.Propagator{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	}
	return next.HandleFinalize(ctx, in)
})

// responseAttributes records each attempt's answer; the last one stays.
var responseAttributes = middleware.DeserializeMiddlewareFunc("SpillwayOTelAWSResponse", func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleDeserialize(ctx, in)
	span := trace.SpanFromContext(ctx)
	if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && span.IsRecording() {
		attrs := []attribute.KeyValue{semconv.HTTPResponseStatusCode(resp.StatusCode)}
		if id, ok := awsmiddleware.GetRequestIDMetadata(md); ok {
			attrs = append(attrs, semconv.AWSRequestID(id))
		}
		span.SetAttributes(attrs...)
	}
	return out, md, err
})

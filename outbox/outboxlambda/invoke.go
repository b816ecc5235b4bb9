package outboxlambda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/aws/smithy-go"

	"github.com/spillway-dev/spillway/outbox"
)

// MaxPayloadBytes is the largest event the functions read: Lambda's limit
// for a synchronous invocation's payload (6 MB), above an asynchronous
// one's and an event source mapping's batch. A larger body gets the
// function's answer for a bad request without being parsed.
const MaxPayloadBytes = 6 << 20

// Invoke is the relay function's entry point for aws-lambda-go
// (lambda.Handler): Handle on the raw payload, the response as JSON. The
// functions' handlers decode the raw payload themselves, so every body,
// however malformed, gets the function's documented answer rather than
// the runtime library's decoding error. A
// payload that is not a relay event fails with errorType
// InvalidEventError; other failures as FunctionErrorType names them.
func (h *RelayHandler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	resp, err := h.Handle(ctx, payload)
	if err != nil {
		return nil, functionError(err, "RelayError")
	}
	return json.Marshal(resp)
}

// Invoke is the enqueue function's entry point for aws-lambda-go
// (lambda.Handler): Handle on the raw payload, the response as JSON. Every
// refused request, an unparsable body included, is an answer with Error
// and Field; only a failed write is a function error, named by
// FunctionErrorType.
func (h *EnqueueHandler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	resp, err := h.Handle(ctx, payload)
	if err != nil {
		return nil, functionError(err, "EnqueueError")
	}
	return json.Marshal(resp)
}

// KafkaHandler is the entry point of a Lambda function consuming an Amazon
// MSK or self-managed Apache Kafka event source mapping (lambda.Handler):
// it decodes the raw payload with DecodeKafkaEvent and runs Handle under
// the invocation's root span. Its result is Handle's, whatever the span
// export does: a failed batch fails the invocation, so Lambda retries it
// and does not commit its offsets.
type KafkaHandler struct {
	// Handle applies a batch (required): outboxinbox.LambdaHandler.Handle.
	Handle func(context.Context, events.KafkaEvent) error
	// Tracing opens the invocation's root span, named Name (default
	// "consumer"). Optional.
	Tracing Tracing
	Name    string
	// Logger receives a refused payload and a failed span export.
	// Default slog.Default().
	Logger *slog.Logger
}

// Invoke decodes the payload and applies the batch. A payload that is not
// a Kafka batch fails with errorType InvalidEventError and applies
// nothing; Handle's error fails the invocation, named by
// FunctionErrorType; success answers null.
func (k KafkaHandler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	log := k.Logger
	if log == nil {
		log = slog.Default()
	}
	ev, err := DecodeKafkaEvent(payload)
	if err != nil {
		log.ErrorContext(ctx, "Kafka event refused", "error", err)
		return nil, functionError(err, "ConsumeError")
	}
	name := k.Name
	if name == "" {
		name = "consumer"
	}
	_, err = traced(ctx, invocationTrace{tracing: k.Tracing, name: name}, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, k.Handle(ctx, ev)
	})
	if err != nil {
		return nil, functionError(err, "ConsumeError")
	}
	return []byte("null"), nil
}

// Kafka event sources, the eventSource of a batch.
const (
	kafkaSourceMSK         = "aws:kafka"
	kafkaSourceSelfManaged = "SelfManagedKafka"
)

// DecodeKafkaEvent decodes the payload of an Amazon MSK ("aws:kafka") or
// self-managed Apache Kafka ("SelfManagedKafka") event source mapping. Any
// other payload (another trigger's event, null, a body that is not JSON)
// is an *InvalidEventError naming what is wrong, so a consumer never
// takes it for an empty batch.
func DecodeKafkaEvent(payload []byte) (events.KafkaEvent, error) {
	if problem := payloadProblem(payload); problem != "" {
		return events.KafkaEvent{}, invalidKafkaEvent("%s", problem)
	}
	var head struct {
		EventSource *string          `json:"eventSource"`
		Records     *json.RawMessage `json:"records"`
	}
	if err := json.Unmarshal(payload, &head); err != nil || bytes.Equal(bytes.TrimSpace(payload), []byte("null")) {
		return events.KafkaEvent{}, invalidKafkaEvent("the payload is not a JSON object")
	}
	switch {
	case head.EventSource == nil:
		return events.KafkaEvent{}, invalidKafkaEvent("the payload has no eventSource; want %q or %q", kafkaSourceMSK, kafkaSourceSelfManaged)
	case *head.EventSource != kafkaSourceMSK && *head.EventSource != kafkaSourceSelfManaged:
		return events.KafkaEvent{}, invalidKafkaEvent("eventSource %q; want %q or %q", *head.EventSource, kafkaSourceMSK, kafkaSourceSelfManaged)
	case head.Records == nil || bytes.Equal(*head.Records, []byte("null")):
		return events.KafkaEvent{}, invalidKafkaEvent("the batch has no records object")
	}
	var ev events.KafkaEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return events.KafkaEvent{}, invalidKafkaEvent("%v", err)
	}
	return ev, nil
}

func invalidKafkaEvent(format string, args ...any) error {
	return &InvalidEventError{Event: "Kafka", Reason: fmt.Sprintf(format, args...)}
}

// payloadProblem says what makes payload unreadable as JSON (empty, over
// MaxPayloadBytes, malformed, nested too deep), or "" when it parses.
func payloadProblem(payload []byte) string {
	switch {
	case len(bytes.TrimSpace(payload)) == 0:
		return "the payload is empty"
	case len(payload) > MaxPayloadBytes:
		return fmt.Sprintf("the payload is %d bytes, over the %d-byte limit of a Lambda invocation", len(payload), MaxPayloadBytes)
	}
	var v json.RawMessage
	err := json.Unmarshal(payload, &v)
	var syntax *json.SyntaxError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &syntax):
		return fmt.Sprintf("the payload is not valid JSON: %v (at byte %d)", syntax, syntax.Offset)
	}
	return fmt.Sprintf("the payload is not valid JSON: %v", err)
}

// FunctionErrorType is the errorType Lambda reports for a function error
// err (aws-lambda-go otherwise names the Go type, so every wrapped error
// would read "wrapError"): InvalidEventError for a refused payload; the AWS
// service and error code for a failed AWS call
// ("DynamoDB.ResourceNotFoundException",
// "DynamoDB.ProvisionedThroughputExceededException"), or
// "DynamoDB.RequestFailed" when no answer came; "Misconfigured";
// "DeadlineExceeded"; the error's own type when it is not a wrapper of the
// fmt or errors packages; otherwise fallback.
func FunctionErrorType(err error, fallback string) string {
	var invalid *InvalidEventError
	var api smithy.APIError
	var op *smithy.OperationError
	switch {
	case errors.As(err, &invalid):
		return "InvalidEventError"
	case errors.As(err, &api):
		if errors.As(err, &op) {
			return op.ServiceID + "." + api.ErrorCode()
		}
		return api.ErrorCode()
	case errors.Is(err, outbox.ErrMisconfigured):
		return "Misconfigured"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	case errors.As(err, &op):
		return op.ServiceID + ".RequestFailed"
	}
	t := reflect.TypeOf(err)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if p := t.PkgPath(); t.Name() != "" && p != "fmt" && p != "errors" {
		return t.Name()
	}
	return fallback
}

// functionError is err as the runtime reports it: its message, with
// FunctionErrorType as errorType.
func functionError(err error, fallback string) error {
	return messages.InvokeResponse_Error{Message: err.Error(), Type: FunctionErrorType(err, fallback)}
}

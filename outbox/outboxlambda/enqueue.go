package outboxlambda

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// MessageWriter stores messages that have no business write of their own.
// *outboxddb.Writer satisfies it; its Notifier wakes the relay after the
// commit.
type MessageWriter interface {
	Enqueue(ctx context.Context, msg outbox.Message) (outbox.Message, error)
	EnqueueBatch(ctx context.Context, msgs []outbox.Message) ([]outbox.Message, error)
}

var _ MessageWriter = (*outboxddb.Writer)(nil)

// EnvTraceID is the environment variable the Lambda runtime sets to the
// invocation's X-Ray trace header.
const EnvTraceID = "_X_AMZN_TRACE_ID"

// EnqueueHandlerConfig wires an EnqueueHandler.
type EnqueueHandlerConfig struct {
	// Config is the loaded environment configuration (required).
	Config Config
	// Writer stores the messages (required).
	Writer MessageWriter
	// Clock stamps CreatedAt. Default outbox.SystemClock.
	Clock outbox.Clock
	// Hooks each implement HookEnqueue and hear of every request's
	// outcome. Default none.
	Hooks []outbox.Hook
	// Logger receives one line per request. Default slog.Default().
	Logger *slog.Logger
	// Getenv reads _X_AMZN_TRACE_ID when ctx carries no trace header.
	// Default os.Getenv.
	Getenv func(string) string
	// Metrics, when set, is flushed to MetricsOutput (default os.Stdout)
	// at the end of every invocation.
	Metrics       MetricsFlusher
	MetricsOutput io.Writer
	// Tracing opens each invocation's root span and an enqueue span, puts
	// that span's trace context on the messages, and exports the spans
	// before Handle returns. Optional.
	Tracing Tracing
	// FunctionName names the invocation's root span. Default "enqueue".
	FunctionName string
}

// HookEnqueue receives the enqueue function's outcomes. It is called
// synchronously and must be safe for concurrent use and fast; a panic in it
// is not recovered. outboxobs/emf.Recorder implements it.
type HookEnqueue interface {
	// OnEnqueue: enqueued messages of one request were committed.
	OnEnqueue(enqueued int)
	// OnEnqueueRejected: a request's rejected messages (at least 1) were
	// refused before any write, for err (a *FieldError).
	OnEnqueueRejected(rejected int, err error)
}

// EnqueueHandler is the enqueue function: it validates a request, stores
// its messages all or nothing, and wakes the relay.
type EnqueueHandler struct {
	cfg     Config
	writer  MessageWriter
	clock   outbox.Clock
	hooks   []HookEnqueue
	log     *slog.Logger
	getenv  func(string) string
	metrics metricsSink
	tracing Tracing
	tracer  outbox.Tracer
	invoke  invocationTrace
}

// NewEnqueueHandler validates cfg.
func NewEnqueueHandler(cfg EnqueueHandlerConfig) (*EnqueueHandler, error) {
	if cfg.Writer == nil {
		return nil, outbox.Misconfigured("new enqueue handler", "a writer is required")
	}
	if cfg.Config.BucketCount < 1 {
		return nil, outbox.Misconfigured("new enqueue handler", "bucket count %d; load the configuration with LoadConfig", cfg.Config.BucketCount)
	}
	h := &EnqueueHandler{cfg: cfg.Config, writer: cfg.Writer, clock: cfg.Clock, log: cfg.Logger, getenv: cfg.Getenv}
	for i, x := range cfg.Hooks {
		k, ok := x.(HookEnqueue)
		if !ok {
			return nil, outbox.Misconfigured("new enqueue handler", "Hooks[%d] (%T) does not implement outboxlambda.HookEnqueue", i, x)
		}
		h.hooks = append(h.hooks, k)
	}
	if h.clock == nil {
		h.clock = outbox.SystemClock{}
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.getenv == nil {
		h.getenv = os.Getenv
	}
	h.metrics = newMetricsSink(cfg.Metrics, cfg.MetricsOutput, h.clock)
	if cfg.Tracing != nil {
		h.tracing, h.tracer = cfg.Tracing, cfg.Tracing.Tracer()
		h.invoke = invocationTrace{tracing: cfg.Tracing, name: cmp.Or(cfg.FunctionName, "enqueue")}
	}
	return h, nil
}

// EnqueueResponse is the enqueue function's answer: the stored messages,
// or a validation error naming the field. Validation errors are answers,
// not function errors, so a caller reads them like any response.
type EnqueueResponse struct {
	// Messages lists the stored messages in request order.
	Messages []EnqueuedMessage `json:"messages,omitempty"`
	// Error says why the request was refused; nothing was written.
	Error string `json:"error,omitempty"`
	// Field locates the refused value, e.g. "messages[3].key".
	Field string `json:"field,omitempty"`
}

// EnqueuedMessage is one stored message.
type EnqueuedMessage struct {
	MessageID string `json:"messageId"`
	Topic     string `json:"topic"`
	Bucket    int    `json:"bucket"`
	Sequence  int64  `json:"sequence"`
}

// Handle validates the request and stores its messages: one PutItem for a
// single message, one TransactWriteItems for several. Message ids given in
// the request are kept, so a retry by Lambda after an ambiguous failure
// stores a copy under the same id, which consumers deduplicate. The
// writer's notifier then wakes the relay for the messages' buckets.
//
// A refused request comes back as a response with Error and Field and no
// function error; a DynamoDB failure is a function error.
func (h *EnqueueHandler) Handle(ctx context.Context, payload json.RawMessage) (EnqueueResponse, error) {
	return traced(ctx, h.invoke, func(ctx context.Context) (EnqueueResponse, error) {
		sctx, span := outbox.StartSpan(ctx, h.tracer, outbox.SpanEnqueue)
		resp, err := h.handle(sctx, payload)
		outcome := "ok"
		switch {
		case err != nil:
			outcome = "error"
		case resp.Error != "":
			outcome = "refused"
		}
		span.Annotate(outbox.AnnotationMessages, len(resp.Messages))
		span.Annotate(outbox.AnnotationOutcome, outcome)
		span.End(err)
		return resp, err
	})
}

func (h *EnqueueHandler) handle(ctx context.Context, payload json.RawMessage) (EnqueueResponse, error) {
	defer h.metrics.flush(ctx, h.log)
	msgs, err := ParseEnqueueRequest(payload, RequestOptions{
		Topics:    h.cfg.Topics,
		Trace:     h.trace(ctx),
		CreatedAt: h.clock.Now(),
	})
	if err != nil {
		return h.refuse(ctx, err, countMessages(payload))
	}
	var stored []outbox.Message
	if len(msgs) == 1 {
		var m outbox.Message
		m, err = h.writer.Enqueue(ctx, msgs[0])
		stored = []outbox.Message{m}
	} else {
		stored, err = h.writer.EnqueueBatch(ctx, msgs)
	}
	if err != nil {
		if fe := writerFieldError(err, msgs, isBatchRequest(payload)); fe != nil {
			return h.refuse(ctx, fe, len(msgs))
		}
		h.log.ErrorContext(ctx, "enqueue failed", "messages", len(msgs), "error", err)
		return EnqueueResponse{}, fmt.Errorf("outboxlambda: enqueue %d message(s): %w", len(msgs), err)
	}
	resp := EnqueueResponse{Messages: make([]EnqueuedMessage, len(stored))}
	buckets := make([]int, 0, len(stored))
	for i, m := range stored {
		resp.Messages[i] = EnqueuedMessage{MessageID: m.ID.String(), Topic: m.Topic, Bucket: m.Bucket(), Sequence: m.Sequence()}
		buckets = append(buckets, m.Bucket())
	}
	slices.Sort(buckets)
	buckets = slices.Compact(buckets)
	for _, k := range h.hooks {
		k.OnEnqueue(len(stored))
	}
	h.log.InfoContext(ctx, "enqueued", "messages", len(stored), "buckets", buckets)
	return resp, nil
}

func (h *EnqueueHandler) refuse(ctx context.Context, err error, n int) (EnqueueResponse, error) {
	fe, ok := asFieldError(err)
	if !ok {
		fe = &FieldError{Problem: err.Error()}
	}
	for _, k := range h.hooks {
		k.OnEnqueueRejected(max(n, 1), fe)
	}
	h.log.WarnContext(ctx, "enqueue request refused", "field", fe.Field, "problem", fe.Problem)
	return EnqueueResponse{Error: fe.Problem, Field: fe.Field}, nil
}

// trace returns the invocation's trace context: what ctx carries
// (outbox.WithTraceContext), completed from the tracing's span in ctx, then
// with the X-Ray header aws-lambda-go stores in the handler's ctx, or else
// the runtime's environment variable.
func (h *EnqueueHandler) trace(ctx context.Context) outbox.TraceContext {
	if h.tracing != nil {
		ctx = outbox.WithTraceContext(ctx, h.tracing.TraceContext(ctx))
	}
	return outbox.InvocationTraceContext(ctx, h.getenv)
}

// writerFieldError turns the writer's refusal of a request that passed
// validation (an item over DynamoDB's size limits, checked before any
// request) into a FieldError; nil for any other error.
func writerFieldError(err error, msgs []outbox.Message, batch bool) *FieldError {
	var tooLarge *outboxddb.ItemTooLargeError
	if !errors.As(err, &tooLarge) {
		return nil
	}
	if tooLarge.MessageID.IsZero() {
		return &FieldError{Field: "messages", Problem: fmt.Sprintf("the messages' items total %d bytes, over DynamoDB's %d-byte transaction limit; send fewer per request", tooLarge.Size, tooLarge.Limit)}
	}
	field := ""
	for i, m := range msgs {
		if m.ID == tooLarge.MessageID {
			if batch {
				field = fmt.Sprintf("messages[%d]", i)
			}
			break
		}
	}
	return &FieldError{Field: field, Problem: fmt.Sprintf("the message is a %d-byte DynamoDB item, over the %d-byte item limit (key, value, headers and attributes together); keep large payloads elsewhere and send a reference", tooLarge.Size, tooLarge.Limit)}
}

// isBatchRequest reports a {"messages":…} request, as opposed to the
// single-message shorthand.
func isBatchRequest(payload []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(payload, &top) != nil {
		return false
	}
	_, ok := top["messages"]
	return ok
}

// countMessages estimates how many messages a refused request carried, for
// the rejected-messages metric.
func countMessages(payload []byte) int {
	var top struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(payload, &top) != nil || top.Messages == nil {
		return 1
	}
	return len(top.Messages)
}

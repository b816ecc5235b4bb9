// Package outboxobs holds the observability adapters shared by the Lambda
// functions and the CLI: JSON logging with the Lambda request id and a log
// observer for relay and writer events. The CloudWatch metrics encoder lives
// in outboxobs/emf and X-Ray tracing in outboxobs/xray.
package outboxobs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/spillway-dev/spillway/outbox"
)

// RequestIDKey is the log key of the Lambda request id, the key
// aws-lambda-go's own lambdacontext handler uses.
const RequestIDKey = "requestId"

// NewLambdaLogger returns a JSON logger writing to w at level and above,
// with the keys of Lambda's JSON log format ("timestamp", "level",
// "message") and, on every record logged with a ctx from a Lambda handler,
// the invocation's request id under RequestIDKey.
//
// aws-lambda-go v1.55.1 ships such a handler (lambdacontext.NewLogHandler),
// but it always writes to os.Stdout and takes its format and level from
// AWS_LAMBDA_LOG_FORMAT and AWS_LAMBDA_LOG_LEVEL read at package init, so
// neither the writer nor the level can be chosen; this logger reuses its
// key mapping (lambdacontext.ReplaceAttr) and its request id key.
func NewLambdaLogger(w io.Writer, level slog.Level) *slog.Logger {
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: lambdacontext.ReplaceAttr})
	return slog.New(requestIDHandler{h})
}

// requestIDHandler adds the Lambda request id of the record's ctx.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		r.AddAttrs(slog.String(RequestIDKey, lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}

// Log keys of LogObserver records, shared with the relay's own logs.
const (
	KeyEvent    = "event"
	KeyRelayID  = "relay_id"
	KeyBucket   = "bucket"
	KeyCount    = "count"
	KeyDuration = "duration"
	KeyOp       = "op"
	KeyError    = "error"
	// KeyLatencyMax is the slowest created-to-acknowledged latency of a
	// published batch.
	KeyLatencyMax = "latency_max"
	// KeyOrigins lists the origin trace ids of a published batch.
	KeyOrigins = "origins"
)

// LogObserver is an outbox.Observer that logs events: Warn for refused
// conditional writes, throttles, lease losses, skipped releases, rejected
// enqueues and work abandoned on a lost lease; Error for other failures
// (publish, acquisition round, wake-up); Debug for everything else,
// including backoffs (their cause was already logged) and cancellations at
// shutdown. It never logs at Info, so nothing is logged per message in
// production. The message of each record is the event kind (e.g.
// "lease_lost").
type LogObserver struct {
	logger *slog.Logger
	ctx    atomic.Pointer[context.Context]
}

var _ outbox.Observer = (*LogObserver)(nil)

// NewLogObserver returns a LogObserver writing to logger; nil means
// slog.Default().
func NewLogObserver(logger *slog.Logger) *LogObserver {
	if logger == nil {
		logger = slog.Default()
	}
	return &LogObserver{logger: logger}
}

// Bind makes later records use ctx, so a handler that binds its invocation
// ctx gets the request id on the events of that invocation (events carry no
// ctx of their own). Unbound, records use context.Background().
func (o *LogObserver) Bind(ctx context.Context) { o.ctx.Store(&ctx) }

// Observe implements outbox.Observer.
func (o *LogObserver) Observe(e outbox.Event) {
	ctx := context.Background()
	if p := o.ctx.Load(); p != nil {
		ctx = *p
	}
	level := eventLevel(e)
	if !o.logger.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 9)
	attrs = append(attrs, slog.String(KeyEvent, e.Kind.String()))
	if e.RelayID != "" {
		attrs = append(attrs, slog.String(KeyRelayID, e.RelayID))
	}
	if e.Bucket >= 0 {
		attrs = append(attrs, slog.Int(KeyBucket, e.Bucket))
	}
	attrs = append(attrs, slog.Int(KeyCount, e.Count))
	if e.Duration != 0 {
		attrs = append(attrs, slog.Duration(KeyDuration, e.Duration))
	}
	if len(e.Latencies) > 0 {
		attrs = append(attrs, slog.Duration(KeyLatencyMax, slices.Max(e.Latencies)))
	}
	if e.Op != "" {
		attrs = append(attrs, slog.String(KeyOp, e.Op))
	}
	if len(e.Origins) > 0 {
		attrs = append(attrs, slog.Any(KeyOrigins, e.Origins))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String(KeyError, e.Err.Error()))
	}
	o.logger.LogAttrs(ctx, level, e.Kind.String(), attrs...)
}

func eventLevel(e outbox.Event) slog.Level {
	switch e.Kind {
	case outbox.EventRefusedWrite, outbox.EventThrottle, outbox.EventLeaseLost,
		outbox.EventReleaseSkipped, outbox.EventEnqueueRejected:
		return slog.LevelWarn
	case outbox.EventBackoff:
		return slog.LevelDebug
	}
	switch {
	case e.Err == nil, errors.Is(e.Err, context.Canceled):
		return slog.LevelDebug
	case errors.Is(e.Err, outbox.ErrLeaseLost), e.Kind == outbox.EventBacklog:
		// Abandoned work stays for the next owner; a missed backlog sample
		// only delays a gauge.
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

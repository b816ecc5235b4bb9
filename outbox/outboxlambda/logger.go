package outboxlambda

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// EnvLogLevel is the variable Lambda sets from the function's application
// log level (DEBUG, INFO, WARN, ERROR; TRACE and FATAL map to the nearest).
const EnvLogLevel = "AWS_LAMBDA_LOG_LEVEL"

// NewLogger returns a JSON slog logger writing to w, in Lambda's log shape
// ("timestamp", "level", "message") with the invocation's "requestId" on
// every line logged with a handler ctx. The level comes from
// AWS_LAMBDA_LOG_LEVEL through getenv; default INFO. Unlike
// lambdacontext.NewLogger it writes JSON whatever AWS_LAMBDA_LOG_FORMAT
// says, so local runs log what CloudWatch receives.
func NewLogger(w io.Writer, getenv func(string) string) *slog.Logger {
	level := slog.LevelInfo
	switch strings.ToUpper(getenv(EnvLogLevel)) {
	case "TRACE", "DEBUG":
		level = slog.LevelDebug
	case "WARN":
		level = slog.LevelWarn
	case "ERROR", "FATAL":
		level = slog.LevelError
	}
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: lambdacontext.ReplaceAttr})
	return slog.New(requestIDHandler{h})
}

// requestIDHandler adds the Lambda request id found in the record's ctx.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		r.AddAttrs(slog.String("requestId", lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}

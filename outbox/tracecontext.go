package outbox

import (
	"context"
	"slices"
	"strings"
)

// Header keys that carry a writer's trace context on a message, so the
// published record links back to the business request that enqueued it.
const (
	// HeaderAmznTraceID is the X-Ray trace header
	// ("Root=1-…;Parent=…;Sampled=…").
	HeaderAmznTraceID = "X-Amzn-Trace-Id"
	// HeaderTraceParent is the W3C Trace Context traceparent header.
	HeaderTraceParent = "traceparent"
	// HeaderTraceState is the W3C Trace Context tracestate header; it is
	// only meaningful next to the traceparent it came with.
	HeaderTraceState = "tracestate"
)

// TraceContext is the trace context of the request that enqueues messages.
// The zero value carries nothing.
type TraceContext struct {
	// TraceParent is a W3C traceparent, e.g.
	// "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".
	TraceParent string
	// TraceState is the W3C tracestate sent with TraceParent.
	TraceState string
	// AmznTraceID is an X-Ray trace header, e.g.
	// "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1".
	AmznTraceID string
}

// IsZero reports whether tc carries no value at all.
func (tc TraceContext) IsZero() bool { return tc == TraceContext{} }

// ctxKey is not an empty struct: distinct keys of a zero-sized type may
// compare equal.
type ctxKey uint8

const traceContextKey ctxKey = 1

// WithTraceContext returns a ctx carrying tc; writers read it with
// TraceContextFrom and store it on the messages they enqueue.
func WithTraceContext(ctx context.Context, tc TraceContext) context.Context {
	return context.WithValue(ctx, traceContextKey, tc)
}

// TraceContextFrom returns the trace context stored by WithTraceContext, or
// the zero TraceContext when there is none.
func TraceContextFrom(ctx context.Context) TraceContext {
	tc, _ := ctx.Value(traceContextKey).(TraceContext)
	return tc
}

// envAmznTraceID is the environment variable the Lambda runtime sets to the
// current invocation's X-Ray trace header.
const envAmznTraceID = "_X_AMZN_TRACE_ID"

// lambdaTraceKey is the context key under which aws-lambda-go stores the
// invocation's X-Ray trace header; the plain string is its choice, not ours.
const lambdaTraceKey = "x-amzn-trace-id"

// InvocationTraceContext returns TraceContextFrom(ctx) with its X-Ray header
// completed, when it has none, from the Lambda invocation that ctx belongs
// to: the header aws-lambda-go stores in the handler's ctx, or else the
// runtime's _X_AMZN_TRACE_ID read through getenv (nil means no fallback).
// Outside Lambda neither is set and the result is TraceContextFrom(ctx).
func InvocationTraceContext(ctx context.Context, getenv func(string) string) TraceContext {
	tc := TraceContextFrom(ctx)
	if tc.AmznTraceID != "" {
		return tc
	}
	if v, _ := ctx.Value(lambdaTraceKey).(string); v != "" {
		tc.AmznTraceID = v
	} else if getenv != nil {
		tc.AmznTraceID = getenv(envAmznTraceID)
	}
	return tc
}

// Headers returns tc as message headers: traceparent (with tracestate when
// both are present), then X-Amzn-Trace-Id. Malformed values are left out, so
// a consumer never receives a trace header it cannot parse; a tracestate
// without a well-formed traceparent is left out too. It returns nil when no
// value is usable.
func (tc TraceContext) Headers() []Header { return MergeTraceHeaders(nil, tc) }

// MergeTraceHeaders appends tc's headers to existing, keeping every trace
// header the caller already set: a caller-supplied traceparent wins over
// tc's (and tc's tracestate is then dropped, since it belongs to the other
// trace), and a caller-supplied X-Amzn-Trace-Id wins likewise. Keys are
// compared case-insensitively, as HTTP does for these headers. existing is
// never modified; the result shares no backing array with it once a header
// is added.
func MergeTraceHeaders(existing []Header, tc TraceContext) []Header {
	var hasParent, hasState, hasAmzn bool
	for _, h := range existing {
		switch {
		case strings.EqualFold(h.Key, HeaderTraceParent):
			hasParent = true
		case strings.EqualFold(h.Key, HeaderTraceState):
			hasState = true
		case strings.EqualFold(h.Key, HeaderAmznTraceID):
			hasAmzn = true
		}
	}
	out := slices.Clip(existing)
	if !hasParent {
		if _, ok := traceParentID(tc.TraceParent); ok {
			out = append(out, Header{Key: HeaderTraceParent, Value: []byte(tc.TraceParent)})
			if !hasState && tc.TraceState != "" {
				out = append(out, Header{Key: HeaderTraceState, Value: []byte(tc.TraceState)})
			}
		}
	}
	if !hasAmzn {
		if _, ok := amznTraceRoot(tc.AmznTraceID); ok {
			out = append(out, Header{Key: HeaderAmznTraceID, Value: []byte(tc.AmznTraceID)})
		}
	}
	return out
}

// originTraces returns the distinct trace ids carried by msgs' headers, in
// first-seen order, for linking a publish span to the requests that enqueued
// the batch. Ids are in X-Ray form ("1-5759e988-bd862e3fe1be46a994272793");
// a W3C trace id maps to it losslessly (the first 8 hex digits, then the
// other 24), so a message carrying both headers for one trace yields one id.
// Messages whose header blob does not decode are skipped: telemetry never
// fails a publish. It returns nil when no message carries a trace.
func originTraces(msgs []Message) []string {
	var ids []string
	add := func(id string) {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for i := range msgs {
		if len(msgs[i].Headers) == 0 {
			continue
		}
		headers, err := msgs[i].DecodedHeaders()
		if err != nil {
			continue
		}
		for _, h := range headers {
			switch {
			case strings.EqualFold(h.Key, HeaderTraceParent):
				if id, ok := traceParentID(string(h.Value)); ok {
					add("1-" + id[:8] + "-" + id[8:])
				}
			case strings.EqualFold(h.Key, HeaderAmznTraceID):
				if root, ok := amznTraceRoot(string(h.Value)); ok {
					add(root)
				}
			}
		}
	}
	return ids
}

// traceParentID validates a W3C traceparent and returns its 32-digit trace
// id. Version 00 is exactly four fields; a later version may append fields,
// which a version-00 reader must ignore; version ff is invalid. All-zero
// trace and parent ids are invalid.
func traceParentID(s string) (string, bool) {
	const v0Len = 55 // 2 + 1 + 32 + 1 + 16 + 1 + 2
	if len(s) < v0Len || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return "", false
	}
	version, traceID, parentID, flags := s[:2], s[3:35], s[36:52], s[53:55]
	if !isLowerHex(version) || version == "ff" || !isLowerHex(flags) {
		return "", false
	}
	if (version == "00" && len(s) != v0Len) || (len(s) > v0Len && s[v0Len] != '-') {
		return "", false
	}
	if !isLowerHex(traceID) || isZeroHex(traceID) || !isLowerHex(parentID) || isZeroHex(parentID) {
		return "", false
	}
	return traceID, true
}

// amznTraceRoot validates an X-Ray trace header and returns its Root trace
// id ("1-<8 hex>-<24 hex>", lower-cased). Fields are ';'-separated in any
// order, with optional spaces.
func amznTraceRoot(s string) (string, bool) {
	for field := range strings.SplitSeq(s, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(field), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "Root") {
			continue
		}
		root := strings.ToLower(strings.TrimSpace(v))
		if len(root) != 35 || root[:2] != "1-" || root[10] != '-' ||
			!isLowerHex(root[2:10]) || !isLowerHex(root[11:]) || isZeroHex(root[2:10]+root[11:]) {
			return "", false
		}
		return root, true
	}
	return "", false
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return s != ""
}

func isZeroHex(s string) bool { return strings.Trim(s, "0") == "" }

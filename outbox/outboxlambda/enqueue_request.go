package outboxlambda

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// MaxEnqueueMessages bounds the messages of one enqueue request: one
// DynamoDB transaction holds at most 100 actions.
const MaxEnqueueMessages = 100

// Payload encodings of the enqueue request.
const (
	EncodingUTF8   = "utf8"
	EncodingBase64 = "base64"
	EncodingJSON   = "json"
)

// FieldError is a refused enqueue request: Field locates the offending
// value ("messages[3].key", or "key" in the single-message shorthand) and
// Problem says what is wrong. It matches outbox.ErrInvalidMessage.
type FieldError struct {
	Field   string
	Problem string
}

// Error implements error.
func (e *FieldError) Error() string {
	if e.Field == "" {
		return "outboxlambda: invalid enqueue request: " + e.Problem
	}
	return fmt.Sprintf("outboxlambda: invalid enqueue request: %s: %s", e.Field, e.Problem)
}

// Is reports whether target is outbox.ErrInvalidMessage.
func (e *FieldError) Is(target error) bool { return target == outbox.ErrInvalidMessage }

// RequestOptions say how ParseEnqueueRequest builds messages.
type RequestOptions struct {
	// Topics, when non-empty, are the only topics accepted.
	Topics []string
	// Trace is the caller's trace context (X-Ray header of the
	// invocation, W3C values of the transport); the request's own
	// "traceparent"/"tracestate" replace its W3C values, and headers a
	// message sets itself win over both.
	Trace outbox.TraceContext
	// CreatedAt stamps every message. Default time.Now().UTC().
	CreatedAt time.Time
}

// requestKeys and messageKeys are the accepted members of the request and
// of one message; anything else is refused so a misspelt "vaule" does not
// silently become a tombstone.
var (
	requestKeys = []string{"messages", "traceparent", "tracestate"}
	messageKeys = []string{"topic", "key", "keyEncoding", "value", "valueEncoding", "headers", "partition", "messageId"}
)

// ParseEnqueueRequest validates an enqueue request and builds its messages,
// in request order, each with its bucket and id. Nothing is written. The
// request is {"messages":[…]} or a single message object; docs/operations.md
// ("Enqueue", under "Lambda functions") lists the fields. The error is a
// *FieldError for the first problem found.
//
// Strings must be valid UTF-8 without lone surrogate escapes, and a member
// may appear once per request and message (header names may repeat), so
// nothing the JSON parser would silently replace or drop is accepted.
//
// Item sizes are not checked here: the writer checks them against
// DynamoDB's limits before any request (EnqueueHandler turns its error into
// a FieldError).
func ParseEnqueueRequest(payload []byte, opts RequestOptions) ([]outbox.Message, error) {
	if problem := payloadProblem(payload); problem != "" {
		return nil, &FieldError{Problem: problem + `; send {"messages":[…]} or a single message object`}
	}
	if err := checkStrictJSON(payload); err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(payload, &top); err != nil || top == nil {
		return nil, &FieldError{Problem: "the request is not a JSON object"}
	}
	var (
		raws   []json.RawMessage
		prefix func(i int) string
	)
	if rawMessages, ok := top["messages"]; ok {
		if field := unknownKey(top, requestKeys); field != "" {
			return nil, &FieldError{Field: field, Problem: "unknown field (a request holds messages, traceparent and tracestate)"}
		}
		if err := json.Unmarshal(rawMessages, &raws); err != nil || raws == nil {
			return nil, &FieldError{Field: "messages", Problem: "must be an array of message objects"}
		}
		prefix = func(i int) string { return "messages[" + strconv.Itoa(i) + "]." }
	} else {
		raws = []json.RawMessage{payload}
		prefix = func(int) string { return "" }
	}
	switch n := len(raws); {
	case n == 0:
		return nil, &FieldError{Field: "messages", Problem: "is empty"}
	case n > MaxEnqueueMessages:
		return nil, &FieldError{Field: "messages", Problem: fmt.Sprintf("holds %d messages, at most %d per request (one DynamoDB transaction)", n, MaxEnqueueMessages)}
	}
	trace, err := requestTrace(top, opts.Trace)
	if err != nil {
		return nil, err
	}
	createdAt := opts.CreatedAt
	if createdAt.IsZero() {
		createdAt = time.Now().UTC()
	}
	msgs := make([]outbox.Message, len(raws))
	seen := make(map[outbox.MessageID]int, len(raws))
	for i, raw := range raws {
		p := prefix(i)
		m, err := parseMessage(raw, p, opts, trace, createdAt)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[m.ID]; dup {
			return nil, &FieldError{Field: p + "messageId", Problem: fmt.Sprintf("%s repeats the id of %smessageId", m.ID, prefix(first))}
		}
		seen[m.ID] = i
		msgs[i] = m
	}
	return msgs, nil
}

// requestTrace reads the request's W3C trace context.
func requestTrace(top map[string]json.RawMessage, tc outbox.TraceContext) (outbox.TraceContext, error) {
	parent, err := optionalString(top, "traceparent", "")
	if err != nil {
		return tc, err
	}
	state, err := optionalString(top, "tracestate", "")
	if err != nil {
		return tc, err
	}
	if parent == nil {
		if state != nil {
			return tc, &FieldError{Field: "tracestate", Problem: "given without a traceparent"}
		}
		return tc, nil
	}
	if len((outbox.TraceContext{TraceParent: *parent}).Headers()) == 0 {
		return tc, &FieldError{Field: "traceparent", Problem: fmt.Sprintf("%q is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)", *parent)}
	}
	tc.TraceParent, tc.TraceState = *parent, ""
	if state != nil {
		tc.TraceState = *state
	}
	return tc, nil
}

func parseMessage(raw json.RawMessage, p string, opts RequestOptions, trace outbox.TraceContext, createdAt time.Time) (outbox.Message, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return outbox.Message{}, &FieldError{Field: trimDot(p), Problem: "must be a message object"}
	}
	allowed := messageKeys
	if p == "" {
		// The single-message shorthand also carries the request's trace.
		allowed = append(slices.Clone(messageKeys), "traceparent", "tracestate")
	}
	if field := unknownKey(obj, allowed); field != "" {
		return outbox.Message{}, &FieldError{Field: p + field, Problem: "unknown field (a message holds " + joinKeys(messageKeys) + ")"}
	}

	topic, err := optionalString(obj, "topic", p)
	if err != nil {
		return outbox.Message{}, err
	}
	if topic == nil || *topic == "" {
		return outbox.Message{}, &FieldError{Field: p + "topic", Problem: "is required"}
	}
	if problem := outboxconf.TopicProblem(*topic); problem != "" {
		return outbox.Message{}, &FieldError{Field: p + "topic", Problem: fmt.Sprintf("%q %s", *topic, problem)}
	}
	if len(opts.Topics) > 0 && !slices.Contains(opts.Topics, *topic) {
		return outbox.Message{}, &FieldError{Field: p + "topic", Problem: fmt.Sprintf("%q is not one of the relay's topics %v", *topic, opts.Topics)}
	}

	key, err := parseKey(obj, p)
	if err != nil {
		return outbox.Message{}, err
	}
	value, err := parseValue(obj, p)
	if err != nil {
		return outbox.Message{}, err
	}
	headers, err := parseHeaders(obj["headers"], p+"headers")
	if err != nil {
		return outbox.Message{}, err
	}
	partition, err := parsePartition(obj["partition"], p+"partition")
	if err != nil {
		return outbox.Message{}, err
	}
	id, err := parseID(obj, p)
	if err != nil {
		return outbox.Message{}, err
	}
	m, err := outbox.NewMessage(*topic, key, value, outbox.MessageOptions{
		Headers:   outbox.MergeTraceHeaders(headers, trace),
		Partition: partition,
		ID:        id,
		CreatedAt: createdAt,
	})
	if err != nil {
		return outbox.Message{}, &FieldError{Field: trimDot(p), Problem: err.Error()}
	}
	return m, nil
}

// parseKey reads key and keyEncoding: absent or null is keyless (nil); a
// string is decoded per keyEncoding, and "" is an empty, real key.
func parseKey(obj map[string]json.RawMessage, p string) ([]byte, error) {
	enc, err := encoding(obj, "keyEncoding", p, EncodingUTF8, EncodingUTF8, EncodingBase64)
	if err != nil {
		return nil, err
	}
	s, err := optionalString(obj, "key", p)
	if err != nil || s == nil {
		return nil, err
	}
	return decodeText(*s, enc, p+"key")
}

// parseValue reads value and valueEncoding: absent or null is a tombstone
// (nil). utf8 and base64 take a string; json takes any JSON value and
// stores its compacted text. The default encoding is utf8 for a string and
// json for anything else.
func parseValue(obj map[string]json.RawMessage, p string) ([]byte, error) {
	raw, present := obj["value"]
	isNull := !present || isJSONNull(raw)
	def := EncodingUTF8
	if !isNull && bytes.TrimSpace(raw)[0] != '"' {
		def = EncodingJSON
	}
	enc, err := encoding(obj, "valueEncoding", p, def, EncodingUTF8, EncodingBase64, EncodingJSON)
	if err != nil || isNull {
		return nil, err
	}
	if enc == EncodingJSON {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, &FieldError{Field: p + "value", Problem: "is not valid JSON"}
		}
		return append([]byte{}, buf.Bytes()...), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, &FieldError{Field: p + "value", Problem: fmt.Sprintf("must be a string with valueEncoding %s (use valueEncoding json for a JSON value)", enc)}
	}
	return decodeText(s, enc, p+"value")
}

func decodeText(s, enc, field string) ([]byte, error) {
	if enc == EncodingBase64 {
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil {
			return nil, &FieldError{Field: field, Problem: "is not valid base64 (standard alphabet with padding)"}
		}
		return append([]byte{}, b...), nil
	}
	return append([]byte{}, s...), nil
}

// parseHeaders reads {"name": "value" | null, …} keeping the members'
// order, which Kafka preserves; a null value is a header without a value.
func parseHeaders(raw json.RawMessage, field string) ([]outbox.Header, error) {
	if raw == nil || isJSONNull(raw) {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, &FieldError{Field: field, Problem: "must be an object of string or null values"}
	}
	var headers []outbox.Header
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, &FieldError{Field: field, Problem: "is not a valid JSON object"}
		}
		name := tok.(string) // object keys are always strings
		var v *string
		if err := dec.Decode(&v); err != nil {
			return nil, &FieldError{Field: field + "." + name, Problem: "must be a string or null"}
		}
		h := outbox.Header{Key: name}
		if v != nil {
			h.Value = append([]byte{}, *v...)
		}
		headers = append(headers, h)
	}
	return headers, nil
}

func parsePartition(raw json.RawMessage, field string) (*int32, error) {
	if raw == nil || isJSONNull(raw) {
		return nil, nil
	}
	var num json.Number
	// json.Number also takes a quoted number; a partition must be a bare one.
	if first := bytes.TrimSpace(raw)[0]; first == '"' || json.Unmarshal(raw, &num) != nil {
		return nil, &FieldError{Field: field, Problem: "must be an integer or null"}
	}
	n, err := strconv.ParseInt(num.String(), 10, 64)
	if err != nil {
		return nil, &FieldError{Field: field, Problem: fmt.Sprintf("%s is not an integer", num)}
	}
	if n < 0 || n > math.MaxInt32 {
		return nil, &FieldError{Field: field, Problem: fmt.Sprintf("%d is outside [0, %d]", n, math.MaxInt32)}
	}
	p := int32(n)
	return &p, nil
}

// parseID reads messageId: absent or null means a new random id.
func parseID(obj map[string]json.RawMessage, p string) (outbox.MessageID, error) {
	s, err := optionalString(obj, "messageId", p)
	if err != nil || s == nil {
		return outbox.MessageID{}, err
	}
	id, err := outbox.ParseMessageID(*s)
	if err != nil {
		return outbox.MessageID{}, &FieldError{Field: p + "messageId", Problem: fmt.Sprintf("%q is not a UUID", *s)}
	}
	if id.IsZero() {
		return outbox.MessageID{}, &FieldError{Field: p + "messageId", Problem: "is the nil UUID; omit it for a random id"}
	}
	return id, nil
}

func encoding(obj map[string]json.RawMessage, name, p, def string, allowed ...string) (string, error) {
	s, err := optionalString(obj, name, p)
	if err != nil {
		return "", err
	}
	if s == nil {
		return def, nil
	}
	if !slices.Contains(allowed, *s) {
		return "", &FieldError{Field: p + name, Problem: fmt.Sprintf("unknown encoding %q; want %s", *s, joinKeys(allowed))}
	}
	return *s, nil
}

// optionalString reads a string member; nil when absent or null.
func optionalString(obj map[string]json.RawMessage, name, p string) (*string, error) {
	raw, ok := obj[name]
	if !ok || isJSONNull(raw) {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, &FieldError{Field: p + name, Problem: "must be a string or null"}
	}
	return &s, nil
}

func isJSONNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// unknownKey returns the first member of obj (in sorted order, for a
// stable error) that is not allowed; empty when all are.
func unknownKey(obj map[string]json.RawMessage, allowed []string) string {
	var bad []string
	for k := range obj {
		if !slices.Contains(allowed, k) {
			bad = append(bad, k)
		}
	}
	slices.Sort(bad)
	if len(bad) == 0 {
		return ""
	}
	return bad[0]
}

func joinKeys(keys []string) string { return strings.Join(keys, ", ") }

func trimDot(p string) string {
	if p == "" {
		return ""
	}
	return p[:len(p)-1]
}

// asFieldError returns err as a *FieldError if it is one.
func asFieldError(err error) (*FieldError, bool) {
	var fe *FieldError
	ok := errors.As(err, &fe)
	return fe, ok
}

package outboxlambda

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

var testCreatedAt = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func parseRequest(t *testing.T, payload string, trace outbox.TraceContext) []outbox.Message {
	t.Helper()
	msgs, err := ParseEnqueueRequest([]byte(payload), RequestOptions{Trace: trace, CreatedAt: testCreatedAt})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func decodedHeaders(t *testing.T, m outbox.Message) []outbox.Header {
	t.Helper()
	hs, err := outbox.DecodeHeaders(m.Headers)
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

func TestEnqueueRequest(t *testing.T) {
	t.Parallel()
	t.Run("ParseKeysAndValues", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			name       string
			message    string
			key, value []byte
		}{
			{"absent key is keyless", `{"topic":"t","value":"v"}`, nil, []byte("v")},
			{"null key is keyless", `{"topic":"t","key":null,"value":"v"}`, nil, []byte("v")},
			{"empty utf8 key is a real key", `{"topic":"t","key":"","value":"v"}`, []byte{}, []byte("v")},
			{"empty base64 key is a real key", `{"topic":"t","key":"","keyEncoding":"base64","value":"v"}`, []byte{}, []byte("v")},
			{"base64 key", `{"topic":"t","key":"AP8=","keyEncoding":"base64"}`, []byte{0x00, 0xff}, nil},
			{"absent value is a tombstone", `{"topic":"t","key":"k"}`, []byte("k"), nil},
			{"null value is a tombstone", `{"topic":"t","key":"k","value":null,"valueEncoding":"json"}`, []byte("k"), nil},
			{"empty utf8 value", `{"topic":"t","value":""}`, nil, []byte{}},
			{"utf8 value", `{"topic":"t","value":"héllo"}`, nil, []byte("héllo")},
			{"base64 value", `{"topic":"t","value":"AAECAwQ=","valueEncoding":"base64"}`, nil, []byte{0, 1, 2, 3, 4}},
			{"object value defaults to json, compacted", `{"topic":"t","value":{ "a" : [1, 2.50 ,"x"] }}`, nil, []byte(`{"a":[1,2.50,"x"]}`)},
			{"number value defaults to json", `{"topic":"t","value":42}`, nil, []byte(`42`)},
			{"json string value keeps its quotes", `{"topic":"t","value":"hi","valueEncoding":"json"}`, nil, []byte(`"hi"`)},
			{"json value keeps escapes", `{"topic":"t","value":{"s":"a\u00e9\n"},"valueEncoding":"json"}`, nil, []byte(`{"s":"a\u00e9\n"}`)},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				m := parseRequest(t, c.message, outbox.TraceContext{})[0]
				if !reflect.DeepEqual(m.Key, c.key) || (m.Key == nil) != (c.key == nil) {
					t.Errorf("key %q (nil %v), want %q (nil %v)", m.Key, m.Key == nil, c.key, c.key == nil)
				}
				if !reflect.DeepEqual(m.Value, c.value) || (m.Value == nil) != (c.value == nil) {
					t.Errorf("value %q (nil %v), want %q (nil %v)", m.Value, m.Value == nil, c.value, c.value == nil)
				}
			})
		}
	})

	t.Run("ParseMessageFields", func(t *testing.T) {
		t.Parallel()
		msgs := parseRequest(t, `{"messages":[
		{"topic":"orders","key":"order-8","value":"v","headers":{"z":"1","a":null,"m":"3","a":"again"},"partition":2,
		 "messageId":"{5C3E9F10-7B2A-4D6E-8F41-A2B3C4D5E6F7}"},
		{"topic":"orders","key":"order-8","value":"w"}]}`, outbox.TraceContext{})
		m := msgs[0]
		if m.ID.String() != "5c3e9f10-7b2a-4d6e-8f41-a2b3c4d5e6f7" {
			t.Errorf("id %s: the request's id must pass through", m.ID)
		}
		if m.Partition == nil || *m.Partition != 2 {
			t.Errorf("partition %v, want 2", m.Partition)
		}
		if !m.CreatedAt.Equal(testCreatedAt) || m.Topic != "orders" {
			t.Errorf("created %v topic %q", m.CreatedAt, m.Topic)
		}
		want := []outbox.Header{{Key: "z", Value: []byte("1")}, {Key: "a"}, {Key: "m", Value: []byte("3")}, {Key: "a", Value: []byte("again")}}
		if got := decodedHeaders(t, m); !reflect.DeepEqual(got, want) {
			t.Errorf("headers %+v, want %+v in request order", got, want)
		}
		if msgs[1].ID.IsZero() || msgs[1].ID == m.ID || msgs[1].Headers != nil {
			t.Errorf("second message %+v: want a fresh id and no headers", msgs[1])
		}
	})

	t.Run("ParseTraceContext", func(t *testing.T) {
		t.Parallel()
		const (
			amzn       = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
			reqParent  = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
			msgParent  = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
			ctxParent  = "00-11111111111111111111111111111111-2222222222222222-01"
			reqState   = "congo=t61rcWkgMzE"
			traceTopic = `"topic":"t","value":"v"`
		)
		invocation := outbox.TraceContext{AmznTraceID: amzn, TraceParent: ctxParent, TraceState: "ctx=1"}
		msgs := parseRequest(t, `{"traceparent":"`+reqParent+`","tracestate":"`+reqState+`","messages":[
		{`+traceTopic+`},
		{`+traceTopic+`,"headers":{"traceparent":"`+msgParent+`","X-Amzn-Trace-Id":"Root=1-00000001-000000000000000000000001"}}]}`, invocation)
		want0 := []outbox.Header{
			{Key: outbox.HeaderTraceParent, Value: []byte(reqParent)},
			{Key: outbox.HeaderTraceState, Value: []byte(reqState)},
			{Key: outbox.HeaderAmznTraceID, Value: []byte(amzn)},
		}
		if got := decodedHeaders(t, msgs[0]); !reflect.DeepEqual(got, want0) {
			t.Errorf("request trace: headers %q, want %q", got, want0)
		}
		// The message's own trace headers win; the request's tracestate
		// belongs to another trace and is dropped.
		want1 := []outbox.Header{
			{Key: outbox.HeaderTraceParent, Value: []byte(msgParent)},
			{Key: outbox.HeaderAmznTraceID, Value: []byte("Root=1-00000001-000000000000000000000001")},
		}
		if got := decodedHeaders(t, msgs[1]); !reflect.DeepEqual(got, want1) {
			t.Errorf("message trace: headers %q, want %q", got, want1)
		}
		// Without a request traceparent the invocation's W3C context is used.
		single := parseRequest(t, `{`+traceTopic+`}`, invocation)[0]
		wantSingle := []outbox.Header{
			{Key: outbox.HeaderTraceParent, Value: []byte(ctxParent)},
			{Key: outbox.HeaderTraceState, Value: []byte("ctx=1")},
			{Key: outbox.HeaderAmznTraceID, Value: []byte(amzn)},
		}
		if got := decodedHeaders(t, single); !reflect.DeepEqual(got, wantSingle) {
			t.Errorf("invocation trace: headers %q, want %q", got, wantSingle)
		}
	})

	t.Run("ParseRefusesWithTheField", func(t *testing.T) {
		t.Parallel()
		hundredAndOne := make([]string, 101)
		for i := range hundredAndOne {
			hundredAndOne[i] = `{"topic":"t","value":"v"}`
		}
		const id = "0b9a4d8e-2f5c-4c1e-9a77-3d1f6e2b8c01"
		cases := []struct {
			name, payload, field, says string
			topics                     []string
		}{
			{name: "not an object", payload: `"hello"`, field: "", says: "not a JSON object"},
			{name: "messages not an array", payload: `{"messages":{"topic":"t"}}`, field: "messages", says: "array"},
			{name: "no messages", payload: `{"messages":[]}`, field: "messages", says: "is empty"},
			{name: "101 messages", payload: `{"messages":[` + strings.Join(hundredAndOne, ",") + `]}`, field: "messages", says: "101 messages, at most 100"},
			{name: "unknown request field", payload: `{"messages":[{"topic":"t"}],"trace":"x"}`, field: "trace", says: "unknown field"},
			{name: "message not an object", payload: `{"messages":[{"topic":"t"},[1]]}`, field: "messages[1]", says: "message object"},
			{name: "missing topic", payload: `{"messages":[{"topic":"t"},{"key":"k"}]}`, field: "messages[1].topic", says: "is required"},
			{name: "empty topic", payload: `{"topic":"","value":"v"}`, field: "topic", says: "is required"},
			{name: "topic not a string", payload: `{"topic":7}`, field: "topic", says: "must be a string"},
			{name: "illegal topic", payload: `{"topic":"orders/eu"}`, field: "topic", says: `'/' at byte 6 is not allowed`},
			{name: "topic outside the relay's", payload: `{"topic":"audit"}`, field: "topic", says: "not one of the relay's topics", topics: []string{"orders"}},
			{name: "unknown message field", payload: `{"topic":"t","vaule":"v"}`, field: "vaule", says: "unknown field"},
			{name: "unknown field in a batch", payload: `{"messages":[{"topic":"t","Key":"k"}]}`, field: "messages[0].Key", says: "unknown field"},
			{name: "key not a string", payload: `{"topic":"t","key":12}`, field: "key", says: "string or null"},
			{name: "bad base64 key", payload: `{"messages":[{"topic":"t","key":"@@","keyEncoding":"base64"}]}`, field: "messages[0].key", says: "not valid base64"},
			{name: "unpadded base64 value", payload: `{"topic":"t","value":"AAE","valueEncoding":"base64"}`, field: "value", says: "not valid base64"},
			{name: "unknown key encoding", payload: `{"topic":"t","key":"k","keyEncoding":"json"}`, field: "keyEncoding", says: `unknown encoding "json"`},
			{name: "unknown value encoding", payload: `{"topic":"t","value":"6869","valueEncoding":"hex"}`, field: "valueEncoding", says: `unknown encoding "hex"`},
			{name: "utf8 value not a string", payload: `{"topic":"t","value":{"a":1},"valueEncoding":"utf8"}`, field: "value", says: "must be a string"},
			{name: "headers not an object", payload: `{"topic":"t","headers":["a"]}`, field: "headers", says: "object"},
			{name: "header value not a string", payload: `{"topic":"t","headers":{"ok":"1","n":2}}`, field: "headers.n", says: "string or null"},
			{name: "negative partition", payload: `{"messages":[{"topic":"t","partition":-1}]}`, field: "messages[0].partition", says: "outside [0, 2147483647]"},
			{name: "partition beyond int32", payload: `{"topic":"t","partition":2147483648}`, field: "partition", says: "outside [0, 2147483647]"},
			{name: "fractional partition", payload: `{"topic":"t","partition":1.5}`, field: "partition", says: "not an integer"},
			{name: "partition as text", payload: `{"topic":"t","partition":"1"}`, field: "partition", says: "integer or null"},
			{name: "bad message id", payload: `{"topic":"t","messageId":"order-7"}`, field: "messageId", says: "not a UUID"},
			{name: "nil message id", payload: `{"topic":"t","messageId":"00000000-0000-0000-0000-000000000000"}`, field: "messageId", says: "nil UUID"},
			{name: "duplicate message id", payload: `{"messages":[{"topic":"t","messageId":"` + id + `"},{"topic":"t"},{"topic":"t","messageId":"` + strings.ToUpper(id) + `"}]}`,
				field: "messages[2].messageId", says: "repeats the id of messages[0].messageId"},
			{name: "malformed traceparent", payload: `{"traceparent":"00-abc","messages":[{"topic":"t"}]}`, field: "traceparent", says: "not a W3C traceparent"},
			// JSON parsing would replace these with U+FFFD or keep the last copy.
			{name: "invalid UTF-8 in a value", payload: "{\"messages\":[{\"topic\":\"t\"},{\"topic\":\"t\",\"value\":\"a\xffb\"}]}", field: "messages[1].value", says: "invalid UTF-8 (byte 0xff); send binary data base64-encoded"},
			{name: "invalid UTF-8 in a key", payload: "{\"topic\":\"t\",\"key\":\"order-\xc3\"}", field: "key", says: "invalid UTF-8 (byte 0xc3)"},
			{name: "encoded surrogate in a key", payload: "{\"topic\":\"t\",\"key\":\"\xed\xa0\x80\"}", field: "key", says: "invalid UTF-8 (byte 0xed)"},
			{name: "invalid UTF-8 in a header name", payload: "{\"topic\":\"t\",\"headers\":{\"ok\":\"1\",\"h\xfe\":\"v\"}}", field: "headers", says: "a member name holds invalid UTF-8 (byte 0xfe)"},
			{name: "invalid UTF-8 in a header value", payload: "{\"messages\":[{\"topic\":\"t\",\"headers\":{\"h\":\"\x80\"}}]}", field: "messages[0].headers.h", says: "invalid UTF-8 (byte 0x80)"},
			{name: "invalid UTF-8 in a topic", payload: "{\"topic\":\"ord\xe9rs\"}", field: "topic", says: "invalid UTF-8 (byte 0xe9)"},
			{name: "invalid UTF-8 in a JSON value", payload: "{\"topic\":\"t\",\"value\":{\"a\":\"\xff\"}}", field: "value.a", says: "invalid UTF-8"},
			{name: "lone high surrogate", payload: `{"topic":"t","value":"x\ud800y"}`, field: "value", says: `lone UTF-16 surrogate \ud800`},
			{name: "high surrogate at the end", payload: `{"topic":"t","key":"\uD83D"}`, field: "key", says: `lone UTF-16 surrogate \ud83d`},
			{name: "lone low surrogate", payload: `{"topic":"t","headers":{"h":"\udc00"}}`, field: "headers.h", says: `lone UTF-16 surrogate \udc00`},
			{name: "two high surrogates", payload: `{"topic":"t","value":"\ud800\ud800"}`, field: "value", says: `lone UTF-16 surrogate \ud800`},
			{name: "repeated value", payload: `{"topic":"t","value":"a","value":"b"}`, field: "value", says: "appears more than once"},
			{name: "repeated key in a batch", payload: `{"messages":[{"topic":"t","key":"a","key":"b"}]}`, field: "messages[0].key", says: "appears more than once"},
			{name: "repeated messages", payload: `{"messages":[{"topic":"t"}],"messages":[{"topic":"u"}]}`, field: "messages", says: "appears more than once"},
			{name: "tracestate alone", payload: `{"tracestate":"a=b","topic":"t"}`, field: "tracestate", says: "without a traceparent"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				_, err := ParseEnqueueRequest([]byte(c.payload), RequestOptions{Topics: c.topics})
				var fe *FieldError
				if !errors.As(err, &fe) {
					t.Fatalf("error %v, want a *FieldError", err)
				}
				if fe.Field != c.field || !strings.Contains(fe.Problem, c.says) {
					t.Fatalf("field %q problem %q, want field %q saying %q", fe.Field, fe.Problem, c.field, c.says)
				}
				if !errors.Is(err, outbox.ErrInvalidMessage) {
					t.Errorf("error does not match outbox.ErrInvalidMessage")
				}
			})
		}
	})

	// Valid text, escaped pairs and repeated header names (Kafka keeps each) go
	// through unchanged.
	t.Run("ParseKeepsValidUnicodeAndRepeatedHeaders", func(t *testing.T) {
		t.Parallel()
		m := parseRequest(t, `{"topic":"t","key":"\ud83d\ude00-é","value":"\u00e9\u20ac","headers":{"h":"1","h":"2"}}`, outbox.TraceContext{})[0]
		if string(m.Key) != "😀-é" || string(m.Value) != "é€" {
			t.Fatalf("key %q value %q", m.Key, m.Value)
		}
		if hs := decodedHeaders(t, m); len(hs) != 2 || string(hs[0].Value) != "1" || string(hs[1].Value) != "2" {
			t.Fatalf("headers %v, want both copies of h in order", hs)
		}
	})

	t.Run("ParseAcceptsAHundredMessages", func(t *testing.T) {
		t.Parallel()
		parts := make([]string, MaxEnqueueMessages)
		for i := range parts {
			parts[i] = fmt.Sprintf(`{"topic":"t","key":"k%d"}`, i)
		}
		if got := len(parseRequest(t, `{"messages":[`+strings.Join(parts, ",")+`]}`, outbox.TraceContext{})); got != MaxEnqueueMessages {
			t.Fatalf("%d messages", got)
		}
	})
}

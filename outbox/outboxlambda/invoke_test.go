package outboxlambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/aws/smithy-go"

	"github.com/spillway-dev/spillway/outbox"
)

// The functions' handlers are aws-lambda-go handlers of the raw payload.
var (
	_ lambda.Handler = (*RelayHandler)(nil)
	_ lambda.Handler = (*EnqueueHandler)(nil)
	_ lambda.Handler = KafkaHandler{}
)

// badBodies are payloads no function accepts: each must get the
// function's own answer, never the runtime library's decoding error.
var badBodies = map[string][]byte{
	"garbage":            []byte("this is not JSON {"),
	"empty":              {},
	"7 MB":               []byte(`{"pad":"` + strings.Repeat("x", 7<<20) + `"}`),
	"nested 20,000 deep": []byte(strings.Repeat("[", 20000) + strings.Repeat("]", 20000)),
}

// batchError is an error type of a handler's own, as outboxinbox's
// BatchError.
type batchError struct{}

func (batchError) Error() string { return "2 partitions stopped" }

// endingTracing is a Tracing that records the error each invocation ended
// with.
type endingTracing struct {
	offTracing
	ended []error
}

func (e *endingTracing) StartInvocation(ctx context.Context, _ string) (context.Context, func(error)) {
	return ctx, func(err error) { e.ended = append(e.ended, err) }
}

func TestInvoke(t *testing.T) {
	t.Parallel()
	t.Run("FunctionErrorTypeNamesTheCause", func(t *testing.T) {
		t.Parallel()
		apiErr := &smithy.OperationError{ServiceID: "DynamoDB", OperationName: "TransactWriteItems",
			Err: &smithy.GenericAPIError{Code: "ResourceNotFoundException", Message: "Cannot do operations on a non-existent table"}}
		for _, tc := range []struct {
			err  error
			want string
		}{
			{fmt.Errorf("outboxlambda: enqueue 1 message(s): %w", apiErr), "DynamoDB.ResourceNotFoundException"},
			{fmt.Errorf("put: %w", &smithy.OperationError{ServiceID: "DynamoDB", Err: errors.New("dial tcp: connection refused")}), "DynamoDB.RequestFailed"},
			{fmt.Errorf("decode: %w", invalidEvent("no")), "InvalidEventError"},
			{outbox.Misconfigured("run relay", "no store"), "Misconfigured"},
			{fmt.Errorf("release: %w", context.DeadlineExceeded), "DeadlineExceeded"},
			{batchError{}, "batchError"},
			{fmt.Errorf("wrapped: %w", errors.New("plain")), "RelayError"},
			{errors.New("plain"), "RelayError"},
		} {
			if got := FunctionErrorType(tc.err, "RelayError"); got != tc.want {
				t.Errorf("FunctionErrorType(%v) = %q, want %q", tc.err, got, tc.want)
			}
		}
	})

	t.Run("DecodeKafkaEventRefusesWhatIsNotABatch", func(t *testing.T) {
		t.Parallel()
		cases := map[string]struct{ payload, says string }{
			"null":                {`null`, "not a JSON object"},
			"an array":            {`[]`, "not a JSON object"},
			"an empty object":     {`{}`, "no eventSource"},
			"a relay schedule":    {`{"trigger":"schedule"}`, "no eventSource"},
			"an SQS event":        {`{"Records":[{"eventSource":"aws:sqs"}]}`, "no eventSource"},
			"a DynamoDB stream":   {`{"eventSource":"aws:dynamodb","records":{}}`, `eventSource "aws:dynamodb"`},
			"records null":        {`{"eventSource":"aws:kafka","records":null}`, "no records object"},
			"records not object":  {`{"eventSource":"aws:kafka","records":[]}`, "cannot unmarshal array"},
			"trailing data":       {`{"eventSource":"aws:kafka","records":{}} {}`, "not valid JSON"},
			"garbage":             {string(badBodies["garbage"]), "not valid JSON: invalid character 'h' in literal true (expecting 'r') (at byte 2)"},
			"empty":               {"", "the payload is empty"},
			"7 MB":                {string(badBodies["7 MB"]), "over the 6291456-byte limit"},
			"nested 20,000 deep":  {string(badBodies["nested 20,000 deep"]), "exceeded max depth"},
			"offset not a number": {`{"eventSource":"aws:kafka","records":{"t-0":[{"offset":"x"}]}}`, "cannot unmarshal"},
		}
		for name, c := range cases {
			_, err := DecodeKafkaEvent([]byte(c.payload))
			var ie *InvalidEventError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.says) || !strings.HasPrefix(err.Error(), "outboxlambda: invalid Kafka event: ") {
				t.Errorf("%s: error %v, want an invalid Kafka event saying %q", name, err, c.says)
			}
		}
		for _, source := range []string{kafkaSourceMSK, kafkaSourceSelfManaged} {
			ev, err := DecodeKafkaEvent([]byte(`{"eventSource":"` + source + `","records":{"orders-0":[{"topic":"orders","offset":4}]}}`))
			if err != nil || ev.Records["orders-0"][0].Offset != 4 {
				t.Errorf("%s batch: %+v, %v", source, ev, err)
			}
		}
	})

	// The consumer function's result is its batch's, which its root span
	// ends with too.
	t.Run("KafkaHandlerReturnsTheBatchResult", func(t *testing.T) {
		t.Parallel()
		payload, err := os.ReadFile(filepath.Join("..", "..", "events", "consumer.kafka.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name     string
			batch    error
			wantType string
		}{{"FailedBatch", batchError{}, "batchError"}, {"BatchOK", nil, ""}} {
			tr := &endingTracing{}
			var got events.KafkaEvent
			k := KafkaHandler{Tracing: tr, Logger: discardLogger(), Handle: func(_ context.Context, ev events.KafkaEvent) error {
				got = ev
				return tc.batch
			}}
			out, err := k.Invoke(t.Context(), payload)
			var fe messages.InvokeResponse_Error
			switch {
			case tc.wantType == "" && (err != nil || string(out) != "null"):
				t.Errorf("%s: Invoke = %s, %v; want success", tc.name, out, err)
			case tc.wantType != "" && (!errors.As(err, &fe) || fe.Type != tc.wantType):
				t.Errorf("%s: Invoke error %#v, want errorType %s", tc.name, err, tc.wantType)
			}
			if len(got.Records["orders-0"]) != 3 || len(tr.ended) != 1 || !errors.Is(tr.ended[0], tc.batch) {
				t.Errorf("%s: handled %d partitions; the span ended with %v", tc.name, len(got.Records), tr.ended)
			}
		}
	})

	// Every bad body gets the enqueue function's {"error":…} answer and
	// writes nothing; the relay answers it with InvalidEventError.
	t.Run("BadBodiesGetTheDocumentedAnswer", func(t *testing.T) {
		t.Parallel()
		b := setup(t, bundleOptions{})
		before := b.ddb.Counter.Snapshot()
		for name, body := range badBodies {
			out, err := b.enqueue.Invoke(t.Context(), body)
			var resp EnqueueResponse
			if err != nil || json.Unmarshal(out, &resp) != nil || resp.Error == "" || len(resp.Messages) != 0 {
				t.Errorf("enqueue %s: %s, %v; want an error answer", name, out, err)
			}
			_, err = b.relay.Invoke(t.Context(), body)
			var fe messages.InvokeResponse_Error
			if !errors.As(err, &fe) || fe.Type != "InvalidEventError" || !strings.HasPrefix(fe.Message, "outboxlambda: invalid relay event: ") {
				t.Errorf("relay %s: %#v, want an InvalidEventError", name, err)
			}
		}
		if used := b.ddb.Counter.Snapshot().Since(before); len(used.Requests) != 0 || len(b.inv.invocations()) != 0 {
			t.Fatalf("bad bodies sent %v to DynamoDB and %d wake-ups", used.Requests, len(b.inv.invocations()))
		}
	})
}

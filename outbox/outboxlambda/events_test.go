package outboxlambda

import (
	"bytes"
	"log/slog"
	"reflect"
	"strings"
	"testing"
)

func testDecoder(log *slog.Logger) EventDecoder {
	return EventDecoder{BucketCount: 8, KeyPrefix: "OUTBOX", PartitionKey: "PK", Logger: log}
}

// streamRecord builds a DynamoDB Streams record with the given event name
// and keys JSON.
func streamRecord(name, keys string) string {
	return `{"eventID":"x","eventName":"` + name + `","eventSource":"aws:dynamodb","dynamodb":{"Keys":` + keys + `,"StreamViewType":"NEW_IMAGE"}}`
}

func TestEvents(t *testing.T) {
	t.Parallel()
	t.Run("DecodeRelayEvents", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			name    string
			payload string
			want    RelayEvent
		}{
			{"schedule", `{"trigger":"schedule"}`, RelayEvent{Source: SourceSchedule}},
			{"eventbridge rule", `{"version":"0","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`, RelayEvent{Source: SourceSchedule}},
			{"eventbridge scheduler", `{"detail-type":"Scheduled Event","source":"aws.scheduler","detail":"{}"}`, RelayEvent{Source: SourceSchedule}},
			{"wake", `{"trigger":"wake","buckets":[5,2,5],"hop":3,"join":true}`, RelayEvent{Source: SourceWake, Buckets: []int{2, 5}, Hop: 3, Join: true}},
			{"wake without buckets", `{"trigger":"wake"}`, RelayEvent{Source: SourceWake}},
			{"stream inserts", `{"Records":[` +
				streamRecord("INSERT", `{"PK":{"S":"OUTBOX#MESSAGES#6"},"SK":{"S":"0000000000000000001"}}`) + `,` +
				streamRecord("INSERT", `{"PK":{"S":"OUTBOX#MESSAGES#1"},"SK":{"S":"0000000000000000007"}}`) + `,` +
				streamRecord("INSERT", `{"PK":{"S":"OUTBOX#MESSAGES#6"},"SK":{"S":"0000000000000000002"}}`) + `]}`,
				RelayEvent{Source: SourceStreams, Buckets: []int{1, 6}, Records: 3}},
			{"stream without inserts", `{"Records":[` +
				streamRecord("REMOVE", `{"PK":{"S":"OUTBOX#MESSAGES#6"},"SK":{"S":"0000000000000000001"}}`) + `,` +
				streamRecord("MODIFY", `{"PK":{"S":"OUTBOX#COORDINATION"},"SK":{"S":"LEASE#0000000001"}}`) + `,` +
				streamRecord("INSERT", `{"PK":{"S":"OTHER#MESSAGES#2"},"SK":{"S":"1"}}`) + `,` +
				streamRecord("INSERT", `{"PK":{"S":"OUTBOX#SEQUENCE#2"},"SK":{"S":"SEQUENCE"}}`) + `]}`,
				RelayEvent{Source: SourceStreams, Records: 4, Ignored: 4}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				got, err := testDecoder(discardLogger()).Decode([]byte(c.payload))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, c.want) {
					t.Fatalf("got %+v, want %+v", got, c.want)
				}
			})
		}
	})

	t.Run("DecodeStreamLogsMalformedRecordsWithoutFailing", func(t *testing.T) {
		t.Parallel()
		var logs bytes.Buffer
		payload := `{"Records":[` +
			`"not an object",` +
			streamRecord("INSERT", `{"SK":{"S":"0000000000000000001"}}`) + `,` +
			streamRecord("INSERT", `{"PK":{"N":"5"},"SK":{"S":"1"}}`) + `,` +
			streamRecord("INSERT", `{"PK":{"S":"OUTBOX#MESSAGES#8"},"SK":{"S":"1"}}`) + `,` +
			streamRecord("INSERT", `{"PK":{"S":"OUTBOX#MESSAGES#x"},"SK":{"S":"1"}}`) + `,` +
			streamRecord("INSERT", `{"PK":{"S":"OUTBOX#MESSAGES#03"},"SK":{"S":"1"}}`) + `,` +
			streamRecord("INSERT", `{"PK":{"Q":"bad type"}}`) + `,` +
			`{"eventSource":"aws:sqs","body":"{}"},` +
			streamRecord("INSERT", `{"PK":{"S":"OUTBOX#MESSAGES#3"},"SK":{"S":"0000000000000000001"}}`) + `]}`
		got, err := testDecoder(slog.New(slog.NewTextHandler(&logs, nil))).Decode([]byte(payload))
		if err != nil {
			t.Fatal(err)
		}
		want := RelayEvent{Source: SourceStreams, Buckets: []int{3}, Records: 9, Malformed: 8}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
		if n := strings.Count(logs.String(), "level=WARN"); n != 8 {
			t.Fatalf("%d warnings, want one per malformed record:\n%s", n, logs.String())
		}
	})

	t.Run("DecodeRefusesUnknownPayloads", func(t *testing.T) {
		t.Parallel()
		cases := map[string]struct{ payload, says string }{
			"not json":               {`schedule`, "not valid JSON: invalid character 's' looking for beginning of value (at byte 1)"},
			"empty":                  {``, "the payload is empty"},
			"blank":                  {" \n", "the payload is empty"},
			"nested 20,000 deep":     {strings.Repeat(`{"a":`, 20000), "exceeded max depth"},
			"7 MB":                   {`{"trigger":"schedule","pad":"` + strings.Repeat("x", 7<<20) + `"}`, "over the 6291456-byte limit"},
			"array":                  {`[{"trigger":"schedule"}]`, "not a JSON object"},
			"null":                   {`null`, "not a JSON object"},
			"empty object":           {`{}`, "unrecognised payload"},
			"buckets without":        {`{"buckets":[1]}`, `unrecognised payload (keys ["buckets"])`},
			"trigger not a string":   {`{"trigger":1}`, "want a string"},
			"unknown trigger":        {`{"trigger":"drain"}`, `unknown trigger "drain"`},
			"schedule extra field":   {`{"trigger":"schedule","buckets":[1]}`, "unknown field"},
			"wake misspelt field":    {`{"trigger":"wake","bucket":[1]}`, "unknown field"},
			"wake bucket too high":   {`{"trigger":"wake","buckets":[8]}`, "bucket 8 outside [0, 8)"},
			"wake bucket negative":   {`{"trigger":"wake","buckets":[-1]}`, "bucket -1 outside"},
			"wake bucket fractional": {`{"trigger":"wake","buckets":[1.5]}`, "wake event"},
			"wake hop negative":      {`{"trigger":"wake","hop":-1}`, "hop -1 is negative"},
			"wake trailing data":     {`{"trigger":"wake"} {}`, "not valid JSON: invalid character '{' after top-level value"},
			"other eventbridge":      {`{"detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{}}`, `source "aws.ec2"`},
			"sqs records":            {`{"Records":[{"eventSource":"aws:sqs"}]}`, `"aws:sqs"`},
			"records not array":      {`{"Records":{}}`, "not an array"},
			"records empty":          {`{"Records":[]}`, "Records is empty"},
		}
		for name, c := range cases {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				_, err := testDecoder(discardLogger()).Decode([]byte(c.payload))
				if !IsInvalidEvent(err) {
					t.Fatalf("error %v, want ErrInvalidEvent", err)
				}
				if !strings.Contains(err.Error(), c.says) {
					t.Fatalf("error %q does not say %q", err, c.says)
				}
			})
		}
	})

	t.Run("NewRelayIDIsPrintableASCIIWithinTheLimit", func(t *testing.T) {
		t.Parallel()
		cases := map[string]string{
			"plain":     "spillway-relay",
			"empty":     "",
			"non-ascii": "relé fonction\x00",
			"long":      strings.Repeat("r", 300),
		}
		for name, fn := range cases {
			a, b := NewRelayID(fn), NewRelayID(fn)
			if a == b {
				t.Errorf("%s: two ids are equal: %s", name, a)
			}
			for _, id := range []string{a, b} {
				if len(id) > 128 {
					t.Errorf("%s: id is %d bytes", name, len(id))
				}
				for i := 0; i < len(id); i++ {
					if id[i] < 0x21 || id[i] > 0x7e {
						t.Errorf("%s: id %q has byte 0x%02x", name, id, id[i])
					}
				}
			}
		}
		if id := NewRelayID("spillway-relay"); !strings.HasPrefix(id, "spillway-relay-") || len(id) != len("spillway-relay-")+16 {
			t.Errorf("id %q is not the function name, '-' and 16 hex digits", id)
		}
	})
}

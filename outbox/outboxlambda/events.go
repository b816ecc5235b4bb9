package outboxlambda

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxwake"
)

// ErrInvalidEvent marks a payload that is none of the accepted shapes (a
// relay event, a Kafka batch), or a wake-up whose fields are out of range.
// The handlers return it as a function error: retrying cannot fix it, but
// the caller must learn of it.
var ErrInvalidEvent = errors.New("outboxlambda: invalid event")

// IsInvalidEvent reports whether err is a refused relay payload.
func IsInvalidEvent(err error) bool { return errors.Is(err, ErrInvalidEvent) }

// InvalidEventError is the error a refused payload returns: a relay event
// (RelayHandler) or a Kafka batch (DecodeKafkaEvent). The invocation's
// errorType reads "InvalidEventError" (FunctionErrorType). It matches
// ErrInvalidEvent under errors.Is.
type InvalidEventError struct {
	// Event is what the payload should have been: "relay" (when empty) or
	// "Kafka".
	Event string
	// Reason says what is wrong with the payload and what is accepted.
	Reason string
}

// Error implements error.
func (e *InvalidEventError) Error() string {
	event := e.Event
	if event == "" {
		event = "relay"
	}
	return "outboxlambda: invalid " + event + " event: " + e.Reason
}

// Unwrap returns ErrInvalidEvent.
func (e *InvalidEventError) Unwrap() error { return ErrInvalidEvent }

// Source says what started a relay invocation.
type Source string

// Sources of a relay invocation.
const (
	// SourceSchedule is the periodic sweep: {"trigger":"schedule"} or an
	// EventBridge rule or Scheduler envelope.
	SourceSchedule Source = "schedule"
	// SourceWake is a wake-up from a writer, the enqueue function or a
	// relay's continuation: {"trigger":"wake","buckets":[…],"hop":n,"join":b}.
	SourceWake Source = "wake"
	// SourceStreams is a DynamoDB Streams batch, used only as a hint of the
	// buckets that received messages.
	SourceStreams Source = "streams"
)

// Event payload markers.
const (
	triggerSchedule      = "schedule"
	triggerWake          = string(outbox.TriggerWake)
	streamEventSource    = "aws:dynamodb"
	scheduledDetailType  = "Scheduled Event"
	eventBridgeSource    = "aws.events"
	schedulerSource      = "aws.scheduler"
	streamInsert         = "INSERT"
	messagePartitionPart = "#MESSAGES#"
)

// RelayEvent is a decoded relay payload.
type RelayEvent struct {
	Source Source
	// Buckets are the hinted buckets, ascending and distinct: a wake-up's
	// list, or the buckets of a stream batch's message inserts. Empty for a
	// schedule and for a wake-up that names none (unknown).
	Buckets []int
	// Hop is a wake-up's position in its continuation chain; 0 otherwise.
	Hop int
	// Join asks a woken relay to take a share whoever holds the buckets.
	Join bool
	// Records, Ignored and Malformed count a stream batch's records: all of
	// them, those that are not message inserts (removals, counters, leases,
	// other items), and those that could not be read (logged).
	Records, Ignored, Malformed int
}

// EventDecoder decodes relay payloads for one outbox: it checks hinted
// buckets against the bucket count and recognises the outbox's message
// partitions in stream records.
type EventDecoder struct {
	// BucketCount bounds hinted buckets (required, >= 1).
	BucketCount int
	// KeyPrefix and PartitionKey locate message items in stream records
	// (<KeyPrefix>#MESSAGES#<bucket> in attribute PartitionKey).
	KeyPrefix, PartitionKey string
	// Logger receives one warning per malformed stream record. Default
	// slog.Default().
	Logger *slog.Logger
}

// Decode tells the payload's shape apart and decodes it. A stream batch
// never fails on its records: unreadable ones are logged and counted.
func (d EventDecoder) Decode(payload []byte) (RelayEvent, error) {
	if problem := payloadProblem(payload); problem != "" {
		return RelayEvent{}, invalidEvent("%s; want %s", problem, acceptedShapes)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(payload, &top); err != nil || top == nil {
		return RelayEvent{}, invalidEvent("the payload is not a JSON object; want %s", acceptedShapes)
	}
	switch {
	case top["Records"] != nil:
		return d.decodeStream(top["Records"])
	case top["trigger"] != nil:
		return d.decodeTrigger(payload, top["trigger"])
	case top["detail-type"] != nil:
		return decodeEnvelope(payload)
	}
	return RelayEvent{}, invalidEvent("unrecognised payload (keys %s); want %s", keyList(top), acceptedShapes)
}

const acceptedShapes = `{"trigger":"schedule"}, {"trigger":"wake","buckets":[…],"hop":n,"join":false}, an EventBridge "Scheduled Event" or a DynamoDB Streams batch`

func (d EventDecoder) decodeTrigger(payload, raw json.RawMessage) (RelayEvent, error) {
	var trigger string
	if err := json.Unmarshal(raw, &trigger); err != nil {
		return RelayEvent{}, invalidEvent("trigger is %s, want a string", raw)
	}
	switch trigger {
	case triggerSchedule:
		var ev struct {
			Trigger string `json:"trigger"`
		}
		if err := strictUnmarshal(payload, &ev); err != nil {
			return RelayEvent{}, invalidEvent("schedule event: %v", err)
		}
		return RelayEvent{Source: SourceSchedule}, nil
	case triggerWake:
		return d.decodeWake(payload)
	}
	return RelayEvent{}, invalidEvent("unknown trigger %q; want %q or %q", trigger, triggerSchedule, triggerWake)
}

func (d EventDecoder) decodeWake(payload []byte) (RelayEvent, error) {
	var ev outboxwake.Payload
	if err := strictUnmarshal(payload, &ev); err != nil {
		return RelayEvent{}, invalidEvent("wake event: %v", err)
	}
	if ev.Hop < 0 {
		return RelayEvent{}, invalidEvent("wake event: hop %d is negative", ev.Hop)
	}
	for _, b := range ev.Buckets {
		if b < 0 || b >= d.BucketCount {
			return RelayEvent{}, invalidEvent("wake event: bucket %d outside [0, %d); do the sender and the relay use the same bucket count?", b, d.BucketCount)
		}
	}
	buckets := slices.Clone(ev.Buckets)
	slices.Sort(buckets)
	return RelayEvent{Source: SourceWake, Buckets: slices.Compact(buckets), Hop: ev.Hop, Join: ev.Join}, nil
}

func decodeEnvelope(payload []byte) (RelayEvent, error) {
	var ev events.CloudWatchEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return RelayEvent{}, invalidEvent("EventBridge envelope: %v", err)
	}
	if ev.DetailType != scheduledDetailType || (ev.Source != eventBridgeSource && ev.Source != schedulerSource) {
		return RelayEvent{}, invalidEvent("EventBridge event with source %q and detail-type %q; only %q from %s or %s starts a sweep",
			ev.Source, ev.DetailType, scheduledDetailType, eventBridgeSource, schedulerSource)
	}
	return RelayEvent{Source: SourceSchedule}, nil
}

func (d EventDecoder) decodeStream(raw json.RawMessage) (RelayEvent, error) {
	var records []json.RawMessage
	if err := json.Unmarshal(raw, &records); err != nil {
		return RelayEvent{}, invalidEvent("Records is not an array")
	}
	// The source decides the shape; one record from DynamoDB is enough to
	// trust the batch, whose other records are then read one by one.
	var sources []string
	for _, r := range records {
		var head struct {
			EventSource string `json:"eventSource"`
		}
		_ = json.Unmarshal(r, &head)
		if head.EventSource == streamEventSource {
			return d.streamHints(records), nil
		}
		if !slices.Contains(sources, head.EventSource) {
			sources = append(sources, head.EventSource)
		}
	}
	if len(records) == 0 {
		return RelayEvent{}, invalidEvent("Records is empty")
	}
	return RelayEvent{}, invalidEvent("records from event source %q; only %q (DynamoDB Streams) is accepted", sources, streamEventSource)
}

// streamHints collects the buckets of message inserts. Everything else the
// table's stream carries (the relay's own deletes, counter updates, lease
// and heartbeat writes) is ignored: waking a relay for them would make every
// delete wake a relay.
func (d EventDecoder) streamHints(records []json.RawMessage) RelayEvent {
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	ev := RelayEvent{Source: SourceStreams, Records: len(records)}
	for i, raw := range records {
		var rec events.DynamoDBEventRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			ev.Malformed++
			log.Warn("ignoring unreadable stream record", "index", i, "error", err)
			continue
		}
		if rec.EventSource != streamEventSource {
			ev.Malformed++
			log.Warn("ignoring stream record from another source", "index", i, "eventSource", rec.EventSource, "eventId", rec.EventID)
			continue
		}
		if rec.EventName != streamInsert {
			ev.Ignored++
			continue
		}
		bucket, ok, problem := d.messageBucket(rec.Change.Keys)
		switch {
		case problem != "":
			ev.Malformed++
			log.Warn("ignoring malformed stream record", "index", i, "eventId", rec.EventID, "problem", problem)
		case !ok:
			ev.Ignored++
		case !slices.Contains(ev.Buckets, bucket):
			ev.Buckets = append(ev.Buckets, bucket)
		}
	}
	slices.Sort(ev.Buckets)
	return ev
}

// messageBucket returns the bucket of a message item's keys; ok is false
// for an item that is not one of this outbox's messages, and problem is set
// for keys that cannot be read or name a bucket out of range.
func (d EventDecoder) messageBucket(keys map[string]events.DynamoDBAttributeValue) (bucket int, ok bool, problem string) {
	pk, present := keys[d.PartitionKey]
	if !present {
		return 0, false, fmt.Sprintf("keys lack the partition key %q", d.PartitionKey)
	}
	if pk.DataType() != events.DataTypeString {
		return 0, false, fmt.Sprintf("partition key %q is not a string", d.PartitionKey)
	}
	rest, isMessage := strings.CutPrefix(pk.String(), d.KeyPrefix+messagePartitionPart)
	if !isMessage {
		return 0, false, ""
	}
	n, err := strconv.Atoi(rest)
	if err != nil || rest == "" || rest[0] == '+' || rest[0] == '-' || (len(rest) > 1 && rest[0] == '0') {
		return 0, false, fmt.Sprintf("partition key %q does not end in a bucket number", pk.String())
	}
	if n >= d.BucketCount {
		return 0, false, fmt.Sprintf("partition key %q names bucket %d outside [0, %d)", pk.String(), n, d.BucketCount)
	}
	return n, true, ""
}

// strictUnmarshal decodes one JSON value into v, refusing unknown fields
// and trailing data, so a misspelt field is an error instead of a default.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

func invalidEvent(format string, args ...any) error {
	return &InvalidEventError{Reason: fmt.Sprintf(format, args...)}
}

func keyList(m map[string]json.RawMessage) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, strconv.Quote(k))
	}
	slices.Sort(keys)
	return "[" + strings.Join(keys, ", ") + "]"
}

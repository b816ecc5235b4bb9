package outboxinbox

import (
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// Record is one Kafka record, whichever source delivered it.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	// Headers in record order.
	Headers []outbox.Header
	// Timestamp is the record's timestamp; zero when unknown.
	Timestamp time.Time
}

// messageID returns the id of the last header named name (the relay
// appends its own last and drops others of that name) and whether the
// header is present at all.
func (r *Record) messageID(name string) (outbox.MessageID, string, bool, error) {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key != name {
			continue
		}
		raw := string(r.Headers[i].Value)
		id, err := outbox.ParseMessageID(raw)
		if err == nil && id.IsZero() {
			err = outbox.ErrInvalidMessage
		}
		return id, raw, true, err
	}
	return outbox.MessageID{}, "", false, nil
}

// originLinks returns the writer spans the record's trace headers name.
func (r *Record) originLinks() []outbox.Message {
	if len(r.Headers) == 0 {
		return nil
	}
	return []outbox.Message{{Headers: outbox.EncodeHeaders(r.Headers)}}
}

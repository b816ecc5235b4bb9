package outbox

import (
	"fmt"
	"time"
)

// Message is one outbox record: what a writer stores and a relay publishes.
//
// Key and Value are pre-serialized bytes and the relay passes them through
// unchanged. A nil Key is a keyless record; an empty, non-nil Key is a real
// key (all empty-key records share one bucket and one Kafka partition). A nil
// Value is a tombstone; an empty, non-nil Value is an empty value.
//
// Build messages with NewMessage. The writer that stores a message places
// it (Bucket, Sequence); only what a writer or a store returns carries its
// place.
type Message struct {
	// ID identifies the message end to end; it is stamped on the Kafka
	// record as the dedup header.
	ID MessageID
	// Topic is the destination topic; never empty.
	Topic string
	// Key is the serialized record key; nil means keyless.
	Key []byte
	// Value is the serialized record value; nil means tombstone.
	Value []byte
	// Headers is the header blob in codec version 1 (EncodeHeaders); nil
	// when the message has no headers.
	Headers []byte
	// Partition, when non-nil, is the explicit Kafka partition.
	Partition *int32
	// CreatedAt is the enqueue time. It drives the oldest-pending-age metric
	// and the commit-to-ack latency; it is never the record timestamp.
	CreatedAt time.Time

	// bucket and seq are where the message is stored: the writer assigns
	// them when it enqueues, a store when it fetches (Stored). Users read
	// them (Bucket, Sequence) and cannot set them, so a message never
	// carries a bucket its key does not hash to at the writer's count.
	bucket int
	seq    int64

	// decoded is Headers decoded by the relay right after the fetch, shared
	// by every copy of the message (DecodedHeaders); nil for a message the
	// relay did not fetch.
	decoded *decodedHeaders
}

// Bucket returns the ordering bucket the message is stored in, in [0, the
// table's bucket count): ComputeBucket of its key, id and partition at the
// count of the writer that enqueued it. Zero until a writer stored it.
func (m *Message) Bucket() int { return m.bucket }

// Sequence returns the message's number in its bucket, which orders the
// bucket: assigned by the writer at enqueue, from 1. Zero until a writer
// stored it.
func (m *Message) Sequence() int64 { return m.seq }

// Stored returns m as stored in bucket at sequence seq. It is for writers
// and Store implementations, which assign a message's place when they
// enqueue it and restore it when they fetch it; application code builds
// messages with NewMessage and reads their place from what the writer
// returns.
func Stored(m Message, bucket int, seq int64) Message {
	m.bucket, m.seq = bucket, seq
	return m
}

// decodedHeaders is one decode of a header blob.
type decodedHeaders struct {
	// blob is the Headers slice decoded, so a message whose Headers was
	// replaced since is decoded afresh rather than answered from here.
	blob    []byte
	headers []Header
	err     error
}

// DecodedHeaders returns DecodeHeaders(m.Headers). The relay decodes the
// blob of every message it fetches once, right after the fetch, and every
// reader of the batch shares that decode: the origin traces and span links
// of the publish span, and the Publisher building the record (outboxkafka
// calls this). A message the relay did not fetch, or whose Headers field
// was replaced since, is decoded on each call.
//
// The headers alias m.Headers and are shared by those readers: callers
// must not modify them.
func (m *Message) DecodedHeaders() ([]Header, error) {
	if d := m.decoded; d != nil && sameSlice(d.blob, m.Headers) {
		return d.headers, d.err
	}
	return DecodeHeaders(m.Headers)
}

// decodeFetched decodes the header blob of each of msgs once, for every
// later DecodedHeaders call on them or their copies. Messages without a
// blob are left alone: there is nothing to decode.
func decodeFetched(msgs []Message) {
	for i := range msgs {
		m := &msgs[i]
		if m.Headers == nil {
			continue
		}
		hs, err := DecodeHeaders(m.Headers)
		m.decoded = &decodedHeaders{blob: m.Headers, headers: hs, err: err}
	}
}

// sameSlice reports whether a and b are the same slice: same nil-ness,
// length and first element, not merely equal bytes.
func sameSlice(a, b []byte) bool {
	return (a == nil) == (b == nil) && len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// MessageOptions are the optional parts of a message. The zero value is
// ready to use: no headers, no explicit partition, a random id, created
// when the writer enqueues it.
type MessageOptions struct {
	// Headers are encoded with EncodeHeaders; none means no blob.
	Headers []Header
	// Partition, when non-nil, is the explicit Kafka partition (>= 0); it
	// also decides the bucket (partition mod the writer's bucket count).
	Partition *int32
	// ID is the message id; the zero id means a new random v4 id. Pass an
	// id to make a retried enqueue store the same message id.
	ID MessageID
	// CreatedAt is the enqueue time; zero means the writer's clock when it
	// enqueues the message.
	CreatedAt time.Time
}

// NewMessage builds a message for topic. The writer that enqueues it
// assigns its bucket (ComputeBucket at the writer's bucket count) and its
// sequence, so one message suits a writer of any bucket count.
//
// A nil key is keyless and an empty non-nil key is a real key; a nil value
// is a tombstone and an empty non-nil value is an empty value: NewMessage
// keeps that distinction. It does not copy key or value: the message aliases
// them, and the caller must not modify them until the message is enqueued.
// Partition is copied.
//
// Errors wrap ErrInvalidMessage: empty topic, negative partition.
func NewMessage(topic string, key, value []byte, opts MessageOptions) (Message, error) {
	if topic == "" {
		return Message{}, fmt.Errorf("%w: new message: topic is empty", ErrInvalidMessage)
	}
	m := Message{
		ID:        opts.ID,
		Topic:     topic,
		Key:       key,
		Value:     value,
		Headers:   EncodeHeaders(opts.Headers),
		CreatedAt: opts.CreatedAt,
	}
	if opts.Partition != nil {
		p := *opts.Partition
		if p < 0 {
			return Message{}, fmt.Errorf("%w: new message for topic %q: partition %d is negative", ErrInvalidMessage, topic, p)
		}
		m.Partition = &p
	}
	if m.ID.IsZero() {
		m.ID = NewMessageID()
	}
	return m, nil
}

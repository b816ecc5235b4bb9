package outbox

import (
	"cmp"
	"fmt"
	"time"
)

// Message is one outbox record: what a writer stores and a relay publishes.
//
// Key and Value are pre-serialized bytes and the relay passes them through
// unchanged. A nil Key is a keyless record; an empty, non-nil Key is a real
// key (all empty-key records share one bucket and one Kafka partition). A nil
// Value is a tombstone; an empty, non-nil Value is an empty value.
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
	// Bucket is the ordering bucket, 0 <= Bucket < BucketCount.
	Bucket int
	// BucketCount is the bucket count Bucket was computed for: NewMessage
	// sets it, a writer refuses a message built for another count than its
	// own (the message would land in a bucket its key does not hash to
	// there), and outboxddb sets it on what it fetches from the item's stamp.
	// Zero means not known, and is not checked.
	BucketCount int
	// CreatedAt is the enqueue time. It drives the oldest-pending-age metric
	// and the commit-to-ack latency; it is never the record timestamp.
	CreatedAt time.Time
	// Sequence is the per-bucket sequence number assigned by the store at
	// enqueue; zero until the message was stored or fetched.
	Sequence int64

	// decoded is Headers decoded by the relay right after the fetch, shared
	// by every copy of the message (DecodedHeaders); nil for a message the
	// relay did not fetch.
	decoded *decodedHeaders
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
// ready to use: no headers, no explicit partition, a random id, 8 buckets and
// the current time.
type MessageOptions struct {
	// Headers are encoded with EncodeHeaders; none means no blob.
	Headers []Header
	// Partition, when non-nil, is the explicit Kafka partition (>= 0); it
	// also decides the bucket (partition mod BucketCount).
	Partition *int32
	// ID is the message id; the zero id means a new random v4 id. Pass an
	// id to make a retried enqueue store the same message id.
	ID MessageID
	// BucketCount is the table's bucket count, which every writer and relay
	// must share. Default DefaultBucketCount (8); negative is an error.
	BucketCount int
	// CreatedAt is the enqueue time; zero means time.Now().UTC().
	CreatedAt time.Time
}

// NewMessage builds a message for topic, computing its bucket at
// construction (ComputeBucket) so the message carries it to the store.
//
// A nil key is keyless and an empty non-nil key is a real key; a nil value
// is a tombstone and an empty non-nil value is an empty value: NewMessage
// keeps that distinction. It does not copy key or value: the message aliases
// them, and the caller must not modify them afterwards (the bucket was
// computed from the key as it was). Partition is copied.
//
// Errors wrap ErrInvalidMessage: empty topic, negative partition, negative
// bucket count.
func NewMessage(topic string, key, value []byte, opts MessageOptions) (Message, error) {
	if topic == "" {
		return Message{}, fmt.Errorf("%w: new message: topic is empty", ErrInvalidMessage)
	}
	if opts.BucketCount < 0 {
		return Message{}, fmt.Errorf("%w: new message for topic %q: bucket count %d is negative", ErrInvalidMessage, topic, opts.BucketCount)
	}
	m := Message{
		ID:        opts.ID,
		Topic:     topic,
		Key:       key,
		Value:     value,
		Headers:   EncodeHeaders(opts.Headers),
		CreatedAt: opts.CreatedAt,
	}
	if m.ID.IsZero() {
		m.ID = NewMessageID()
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = time.Now().UTC()
	}
	if opts.Partition != nil {
		p := *opts.Partition
		m.Partition = &p
	}
	bucketCount := cmp.Or(opts.BucketCount, DefaultBucketCount)
	bucket, err := ComputeBucket(key, m.ID, bucketCount, m.Partition)
	if err != nil {
		return Message{}, fmt.Errorf("new message for topic %q: %w", topic, err)
	}
	m.Bucket, m.BucketCount = bucket, bucketCount
	return m, nil
}

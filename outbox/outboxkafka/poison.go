package outboxkafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/internal/sleep"
)

// DefaultUnknownTopicWait is how long a publisher waits, after metadata
// names a topic unknown, before asking once more: a topic created a moment
// ago may not have reached every broker's metadata.
const DefaultUnknownTopicWait = time.Second

// recordBatchOverhead is the fixed part of a v2 record batch (61 bytes)
// holding one record; the record's own framing is added per field.
const recordBatchOverhead = 61

// classify turns a record's produce error into an *outbox.PoisonError when
// retrying the same record cannot succeed. Errors a broker returns for a
// whole partition batch (too large, invalid or corrupt) condemn the record
// only when it went out alone: the only record of its publish, and the only
// record of its partition in its Flush. In a larger batch, or in a Flush
// shared with another bucket's records of the same partition, a good
// record shares its neighbour's fate, and the relay retries it again.
func classify(err error, alone bool) error {
	var reason outbox.ParkReason
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.InvalidTopicException):
		reason = outbox.ParkUnknownTopic
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		reason = outbox.ParkAuthorization
	case !alone:
		return err
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge):
		reason = outbox.ParkTooLarge
	case errors.Is(err, kerr.InvalidRecord), errors.Is(err, kerr.CorruptMessage):
		reason = outbox.ParkInvalidRecord
	default:
		return err
	}
	return &outbox.PoisonError{Reason: reason, Err: err}
}

// recordSize is the size of a v2 record batch holding only r, the figure
// the client compares with its ProducerBatchMaxBytes before sending.
func recordSize(r *kgo.Record) int64 {
	body := 1 + 1 + 1 // attributes, timestamp delta 0, offset delta 0
	body += varBytes(r.Key) + varBytes(r.Value)
	body += varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		body += varintLen(int64(len(h.Key))) + len(h.Key) + varBytes(h.Value)
	}
	return int64(recordBatchOverhead + varintLen(int64(body)) + body)
}

// varBytes is a nullable byte field: length varint (-1 for nil) and data.
func varBytes(b []byte) int {
	if b == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(b))) + len(b)
}

// varintLen is the zig-zag varint length of v.
func varintLen(v int64) int {
	u := uint64((v << 1) ^ (v >> 63))
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// topicCheck remembers which topics the brokers' metadata listed, so the
// publisher asks once per topic and process.
type topicCheck struct {
	mu    sync.Mutex
	known map[string]bool
	wait  time.Duration
}

// check reports a topic the brokers do not have as an unknown-topic
// PoisonError after one more metadata request DefaultUnknownTopicWait
// later, and a topic this client may not describe as an authorization
// PoisonError. A failed metadata request is no verdict: the produce finds
// out.
func (c *topicCheck) check(ctx context.Context, cl *kgo.Client, topic string) error {
	c.mu.Lock()
	known := c.known[topic]
	c.mu.Unlock()
	if known {
		return nil
	}
	for attempt := 0; ; attempt++ {
		code, err := topicMetadata(ctx, cl, topic)
		if err != nil {
			return nil
		}
		switch kerr.ErrorForCode(code) {
		case nil:
			c.mu.Lock()
			c.known[topic] = true
			c.mu.Unlock()
			return nil
		case kerr.TopicAuthorizationFailed:
			return &outbox.PoisonError{Reason: outbox.ParkAuthorization,
				Err: fmt.Errorf("metadata for topic %q: %w", topic, kerr.TopicAuthorizationFailed)}
		case kerr.UnknownTopicOrPartition, kerr.InvalidTopicException:
			if attempt == 0 && sleep.For(c.wait, ctx.Done()) {
				continue
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &outbox.PoisonError{Reason: outbox.ParkUnknownTopic,
				Err: fmt.Errorf("the brokers' metadata has no topic %q (asked twice, %v apart); create it (kafka-topics.sh --create --topic %s; "+
					"on spillway run --serve, restart it with --topics %s) or correct the message's topic: %w", topic, c.wait, topic, topic, kerr.ErrorForCode(code))}
		default:
			// Leader elections and the like: the produce retries them.
			return nil
		}
	}
}

// topicMetadata asks the cluster for one topic without creating it.
func topicMetadata(ctx context.Context, cl *kgo.Client, topic string) (int16, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	for _, rt := range resp.Topics {
		if rt.Topic != nil && *rt.Topic == topic {
			return rt.ErrorCode, nil
		}
	}
	return kerr.UnknownTopicOrPartition.Code, nil
}

package outboxkafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox"
)

// newRecord builds the Kafka record for m. The timestamp stays zero so the
// client stamps the publish time: an old enqueue time could put the record
// beyond a CreateTime topic's retention before anyone reads it.
func newRecord(ctx context.Context, m *outbox.Message, idHeader string) (*kgo.Record, error) {
	if m.Topic == "" {
		return nil, fmt.Errorf("outboxkafka: message %s (bucket %d, sequence %d): empty topic: %w",
			m.ID, m.Bucket(), m.Sequence(), outbox.ErrInvalidMessage)
	}
	headers, err := m.DecodedHeaders()
	if err != nil {
		return nil, fmt.Errorf("outboxkafka: message %s (bucket %d, sequence %d): decode headers: %w",
			m.ID, m.Bucket(), m.Sequence(), err)
	}
	r := &kgo.Record{
		Topic:   m.Topic,
		Key:     m.Key,
		Value:   m.Value,
		Headers: recordHeaders(headers, idHeader, m.ID),
	}
	if m.Partition != nil {
		if *m.Partition < 0 {
			return nil, fmt.Errorf("outboxkafka: message %s (bucket %d, sequence %d): negative partition %d: %w",
				m.ID, m.Bucket(), m.Sequence(), *m.Partition, outbox.ErrInvalidMessage)
		}
		r.Partition = *m.Partition
		r.Context = withExplicitPartition(ctx, *m.Partition)
	}
	return r, nil
}

// recordHeaders returns the stored headers in order without any named
// idHeader (compared byte for byte, every occurrence), then the id header
// last, so consumers always find exactly one id and it is the relay's.
func recordHeaders(stored []outbox.Header, idHeader string, id outbox.MessageID) []kgo.RecordHeader {
	hs := make([]kgo.RecordHeader, 0, len(stored)+1)
	for _, h := range stored {
		if h.Key == idHeader {
			continue
		}
		hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return append(hs, kgo.RecordHeader{Key: idHeader, Value: []byte(id.String())})
}

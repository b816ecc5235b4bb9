package fleetsim

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// deliveryCheck is the result of reading every record back.
type deliveryCheck struct {
	records    int
	distinct   int
	duplicates int
}

// checkRecords checks the records read back from Kafka against the
// workload: every record is a known message, a cancelled one is never
// delivered, every committed one is, and per key the first deliveries
// follow the enqueue order, with no exception: duplicates are allowed,
// reordering is not. recs must hold each partition's records in offset
// order (a key's records share one partition).
func checkRecords(wl *workload, recs []*kgo.Record, header string) (deliveryCheck, *Violation) {
	var dc deliveryCheck
	seen := map[outbox.MessageID]int{}
	last := map[string]*logicalMsg{}
	lastOffset := map[string]int64{}
	for _, r := range recs {
		dc.records++
		id, ok := recordID(r, header)
		if !ok {
			return dc, violation("delivery", -1, "record %s[%d]@%d has no valid %s header", r.Topic, r.Partition, r.Offset, header)
		}
		m := wl.byID[id]
		if m == nil {
			return dc, violation("delivery", -1, "record %s[%d]@%d carries unknown message id %s", r.Topic, r.Partition, r.Offset, id)
		}
		if m.state == msgRejected {
			return dc, violation("no phantom", m.bucket, "message %s of a cancelled business transaction was delivered (%s[%d]@%d)", id, r.Topic, r.Partition, r.Offset)
		}
		seen[id]++
		if seen[id] > 1 {
			dc.duplicates++
			continue
		}
		if m.keyName == "" {
			continue
		}
		prev := last[m.keyName]
		if prev != nil && prev.index >= m.index {
			return dc, violation("per-key order", m.bucket,
				"key %s: message #%d (%s, bucket %d sequences %v) first delivered at %s[%d]@%d, after message #%d (%s, sequences %v) was first delivered at offset %d",
				m.keyName, m.index, id, m.bucket, m.copies, r.Topic, r.Partition, r.Offset, prev.index, prev.id, prev.copies, lastOffset[m.keyName])
		}
		last[m.keyName] = m
		lastOffset[m.keyName] = r.Offset
	}
	dc.distinct = len(seen)
	for _, m := range wl.msgs {
		if m.state == msgCommitted && seen[m.id] == 0 {
			return dc, violation("no loss", m.bucket,
				"committed message %s (key %q #%d, bucket %d, sequences %v) was never delivered", m.id, m.keyName, m.index, m.bucket, m.copies)
		}
	}
	return dc, nil
}

func recordID(r *kgo.Record, header string) (outbox.MessageID, bool) {
	for _, h := range r.Headers {
		if h.Key == header {
			id, err := outbox.ParseMessageID(string(h.Value))
			return id, err == nil
		}
	}
	return outbox.MessageID{}, false
}

// readBack reads every record of the simulation's topics.
func (s *sim) readBack(ctx context.Context) ([]*kgo.Record, error) {
	var all []*kgo.Record
	for _, topic := range simTopics {
		recs, err := s.kafka.ConsumeAll(ctx, s.kafka.Topic(topic))
		if err != nil {
			return nil, err
		}
		all = append(all, recs...)
	}
	return all, nil
}

// countPartitions counts the items of every bucket's partition of the
// given kind (MESSAGES: the messages left in the outbox, or PARKED),
// strongly consistent, through the uncounted client.
func (s *sim) countPartitions(ctx context.Context, kind string) (int, error) {
	total := 0
	for b := range s.cfg.BucketCount {
		in := &dynamodb.QueryInput{
			TableName:                 aws.String(outboxTable),
			KeyConditionExpression:    aws.String("#pk = :pk"),
			ExpressionAttributeNames:  map[string]string{"#pk": outboxddb.DefaultPartitionKey},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("%s#%s#%d", outboxddb.DefaultKeyPrefix, kind, b)}},
			ConsistentRead:            aws.Bool(true),
			Select:                    types.SelectCount,
		}
		for {
			out, err := s.raw.Query(ctx, in)
			if err != nil {
				return 0, fmt.Errorf("fleetsim: count the %s items of bucket %d: %w", kind, b, err)
			}
			total += int(out.Count)
			if len(out.LastEvaluatedKey) == 0 {
				break
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	}
	return total, nil
}

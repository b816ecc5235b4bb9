package outboxddb

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
)

// A replay runs under the bucket's lease. An operator marks parked messages
// (RequestReplay) and raises the bucket's replay request on one table-wide
// item, {P}#PARKED / REPLAY, one number attribute per bucket (B0, B1, ...)
// that every request increments. Relays read that item (ReplayRequests);
// the one holding a requested bucket reads its parked partition, publishes
// each key's marked messages in their original order before anything of
// the key in the message partition, deletes them (DeleteReplayed) and
// withdraws the request (ReplayDone). Relays of other languages read
// neither the parked partitions nor this item.

const (
	replaySortKey    = "REPLAY"
	exprMarkReplay   = "SET #rr = :at, #rt = :topic"
	exprMarkOwnTopic = "SET #rr = :at REMOVE #rt"
	exprUnmarkReplay = "SET #pe = :err, #pa = :at REMOVE #rr, #rt"
	exprRequestIs    = "#b = :v"
)

// replayKey is the table-wide replay request item.
func (k keys) replayKey() map[string]types.AttributeValue {
	return k.key(k.replayPartition(), replaySortKey)
}

func (k keys) replayPartition() string { return k.prefix + "#PARKED" }

func requestAttr(bucket int) string { return "B" + strconv.Itoa(bucket) }

// replayMessage decodes a parked item as the message it was, under its
// original sequence, with topic replacing the stored topic when not empty
// (how a row without a usable topic is repaired).
func replayMessage(k keys, item map[string]types.AttributeValue, bucket int, topic string) (outbox.Message, error) {
	if topic != "" {
		item = maps.Clone(item)
		item[attrTopic] = str(topic)
	}
	m, err := k.decodeMessage(item, bucket)
	if err != nil {
		id, _ := stringAttr(item, attrMessageID)
		return outbox.Message{}, fmt.Errorf("parked message %q (bucket %d) cannot be replayed: %w; drop it, or replay it with another topic if its topic is the problem", id, bucket, err)
	}
	return m, nil
}

// RequestReplay marks parked messages for replay, in the order given (list
// them with ListParked: a key's messages are in their original order), and
// then raises the replay request of each bucket it marked in. topic, when
// not empty, replaces the stored topic of every marked message. A relay
// holding the bucket publishes the marked messages of a key before any
// later message of that key, also one committed after the park and before
// the replay, and then deletes them.
//
// Each mark is one conditional UpdateItem (on the message id) and each
// bucket's request one more, so a call interrupted anywhere leaves a prefix
// of each key marked: the relay publishes a key's marked messages only up
// to its first unmarked one, and running the call again marks the rest. A
// message replayed or dropped meanwhile is skipped. It returns how many
// messages it marked.
func (s *Store) RequestReplay(ctx context.Context, parked []ParkedMessage, topic string) (int, error) {
	marked := 0
	for start := 0; start < len(parked); {
		b := parked[start].Bucket
		end := start
		for end < len(parked) && parked[end].Bucket == b {
			end++
		}
		n, err := s.markBucket(ctx, parked[start:end], topic)
		marked += n
		if err != nil {
			return marked, err
		}
		start = end
	}
	return marked, nil
}

// markBucket marks one bucket's messages, then raises its request (also
// when every message was gone: a no-op request is withdrawn by the relay).
func (s *Store) markBucket(ctx context.Context, parked []ParkedMessage, topic string) (int, error) {
	b := parked[0].Bucket
	marked := 0
	for _, p := range parked {
		in := &dynamodb.UpdateItemInput{
			TableName:                aws.String(s.opts.TableName),
			Key:                      s.keys.key(s.keys.parkedPartition(b), sequenceSortKeyOf(p.Sequence)),
			UpdateExpression:         aws.String(exprMarkOwnTopic),
			ConditionExpression:      aws.String(exprMessageIDIs),
			ExpressionAttributeNames: names("#rr", attrReplayRequested, "#rt", attrReplayTopic, "#mid", attrMessageID),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":at": num(s.now()), ":mid": str(p.MessageID),
			},
		}
		if topic != "" {
			in.UpdateExpression = aws.String(exprMarkReplay)
			in.ExpressionAttributeValues[":topic"] = str(topic)
		}
		_, err := s.client.UpdateItem(ctx, in)
		if conditionFailed(err) {
			continue
		}
		if err != nil {
			s.tel.failed("", OpReplay, b, err)
			return marked, fmt.Errorf("outboxddb: mark parked message %s (bucket %d, sequence %d) for replay: %w", p.MessageID, b, p.Sequence, err)
		}
		marked++
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.opts.TableName),
		Key:                       s.keys.replayKey(),
		UpdateExpression:          aws.String("ADD #b :one"),
		ExpressionAttributeNames:  names("#b", requestAttr(b)),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1)},
	})
	if err != nil {
		s.tel.failed("", OpReplay, b, err)
		return marked, fmt.Errorf("outboxddb: raise the replay request of bucket %d: %w", b, err)
	}
	return marked, nil
}

// ReplayRequests reads the replay request item, one strongly consistent
// single-item query, and returns each requested bucket's request number.
func (s *Store) ReplayRequests(ctx context.Context) (map[int]int64, error) {
	out, err := s.client.Query(ctx, &dynamodb.QueryInput{
		TableName:                aws.String(s.opts.TableName),
		KeyConditionExpression:   aws.String(exprPartitionBetween),
		ExpressionAttributeNames: names("#pk", s.opts.PartitionKey, "#sk", s.opts.SortKey),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(s.keys.replayPartition()), ":first": str(replaySortKey), ":last": str(replaySortKey),
		},
		ConsistentRead: aws.Bool(true),
		Limit:          aws.Int32(1),
	})
	if err != nil {
		s.tel.failed("", OpReplay, noBucket, err)
		return nil, fmt.Errorf("outboxddb: read the replay requests: %w", err)
	}
	reqs := map[int]int64{}
	if len(out.Items) == 0 {
		return reqs, nil
	}
	for name := range out.Items[0] {
		b, err := strconv.Atoi(strings.TrimPrefix(name, "B"))
		if !strings.HasPrefix(name, "B") || err != nil || b < 0 || b >= s.opts.BucketCount {
			continue
		}
		if v, ok := intAttr(out.Items[0], name); ok && v != 0 {
			reqs[b] = v
		}
	}
	return reqs, nil
}

// ReplayDone removes the bucket's request if it still equals request;
// outbox.ErrParkConflict when it changed (a newer request stays) or is gone.
func (s *Store) ReplayDone(ctx context.Context, bucket int, request int64) error {
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.opts.TableName),
		Key:                       s.keys.replayKey(),
		UpdateExpression:          aws.String("REMOVE #b"),
		ConditionExpression:       aws.String(exprRequestIs),
		ExpressionAttributeNames:  names("#b", requestAttr(bucket)),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(request)},
	})
	if conditionFailed(err) {
		return fmt.Errorf("outboxddb: withdraw the replay request of bucket %d: %w", bucket, outbox.ErrParkConflict)
	}
	if err != nil {
		s.tel.failed("", OpReplay, bucket, err)
		return fmt.Errorf("outboxddb: withdraw the replay request of bucket %d: %w", bucket, err)
	}
	return nil
}

// DeleteReplayed deletes published replays from the bucket's parked
// partition: ascending chunks of 25 deletes, one BatchWriteItem each, as
// MarkPublished does. A parked sort key is the message's original sequence,
// never reused in its bucket, so a delete cannot hit another message.
func (s *Store) DeleteReplayed(ctx context.Context, bucket int, msgs []outbox.Message) error {
	seqs := make([]int64, len(msgs))
	for i, m := range msgs {
		seqs[i] = m.Sequence()
	}
	slices.Sort(seqs)
	pk := s.keys.parkedPartition(bucket)
	for chunk := range slices.Chunk(seqs, deleteChunk) {
		if err := s.deleteChunk(ctx, bucket, chunk, func(seq int64) map[string]types.AttributeValue {
			return s.keys.key(pk, sequenceSortKeyOf(seq))
		}); err != nil {
			return err
		}
	}
	return nil
}

// RefuseReplay clears the replay mark of a parked message and stores reason
// as its ParkedError; outbox.ErrParkConflict when the item is gone.
func (s *Store) RefuseReplay(ctx context.Context, bucket int, seq int64, reason string) error {
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.opts.TableName),
		Key:                 s.keys.key(s.keys.parkedPartition(bucket), sequenceSortKeyOf(seq)),
		UpdateExpression:    aws.String(exprUnmarkReplay),
		ConditionExpression: aws.String(exprRowExists),
		ExpressionAttributeNames: names("#pk", s.opts.PartitionKey, "#rr", attrReplayRequested, "#rt", attrReplayTopic,
			"#pe", attrParkedError, "#pa", attrParkedAt),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":err": str(truncateUTF8(reason, maxParkedErrorBytes)), ":at": num(s.now()),
		},
	})
	if conditionFailed(err) {
		return fmt.Errorf("outboxddb: clear the replay mark of bucket %d row %d: %w", bucket, seq, outbox.ErrParkConflict)
	}
	if err != nil {
		s.tel.failed("", OpReplay, bucket, err)
		return fmt.Errorf("outboxddb: clear the replay mark of bucket %d row %d: %w", bucket, seq, err)
	}
	return nil
}

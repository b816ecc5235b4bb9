package outboxddb

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/internal/sleep"
)

const (
	// deleteChunk is BatchWriteItem's limit of requests per call.
	deleteChunk = 25
	// deleteAttempts bounds the BatchWriteItem calls per chunk while
	// DynamoDB leaves deletes unprocessed.
	deleteAttempts = 8
)

// MarkPublished deletes published messages of bucket: ascending chunks of
// 25 deletes, one BatchWriteItem each, one chunk after the other, so a
// failure leaves a suffix that is published again in order. Deletes DynamoDB
// leaves unprocessed (throttling) are resent, up to 8 attempts per chunk
// after a jittered backoff; if some still remain, an *UndeletedError is
// returned and the messages stay (duplicates, never a loss). An empty list
// makes no request.
func (s *Store) MarkPublished(ctx context.Context, bucket int, msgs []outbox.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	seqs := make([]int64, len(msgs))
	for i, m := range msgs {
		seqs[i] = m.Sequence()
	}
	slices.Sort(seqs)
	for chunk := range slices.Chunk(seqs, deleteChunk) {
		if err := s.deleteChunk(ctx, bucket, chunk, func(seq int64) map[string]types.AttributeValue {
			return s.keys.messageKey(bucket, seq)
		}); err != nil {
			return err
		}
	}
	return nil
}

// deleteChunk deletes the items keyOf names for seqs, at most deleteChunk.
func (s *Store) deleteChunk(ctx context.Context, bucket int, seqs []int64, keyOf func(int64) map[string]types.AttributeValue) error {
	pending := make([]types.WriteRequest, len(seqs))
	for i, seq := range seqs {
		pending[i] = types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: keyOf(seq)}}
	}
	for attempt := 1; ; attempt++ {
		out, err := s.client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
			RequestItems: map[string][]types.WriteRequest{s.opts.TableName: pending},
		})
		if err != nil {
			s.tel.failed("", OpDelete, bucket, err)
			return fmt.Errorf("outboxddb: delete %d published message(s) %d..%d from bucket %d: %w",
				len(pending), seqs[0], seqs[len(seqs)-1], bucket, err)
		}
		pending = out.UnprocessedItems[s.opts.TableName]
		if len(pending) == 0 {
			return nil
		}
		s.tel.throttled(OpDelete, bucket)
		if attempt == deleteAttempts {
			return &UndeletedError{Bucket: bucket, Count: len(pending), Attempts: attempt}
		}
		if !sleep.For(deleteBackoff(bucket, seqs[0], attempt), ctx.Done()) {
			return fmt.Errorf("outboxddb: delete published messages from bucket %d: %w", bucket, context.Cause(ctx))
		}
	}
}

// deleteBackoff is the wait after the attempt-th BatchWriteItem of the
// chunk starting at first left deletes unprocessed: a whole number of
// milliseconds in [c/2, c] with c = min(1000, 25 << attempt) ms. The draw
// is a hash of the chunk and the attempt, not a random number: relays
// deleting other chunks of a throttled partition still retry apart, and a
// simulation replays a seed exactly.
func deleteBackoff(bucket int, first int64, attempt int) time.Duration {
	c := min(1000, 25<<min(attempt, 10))
	h := fnv.New64a()
	_ = binary.Write(h, binary.BigEndian, [3]int64{int64(bucket), first, int64(attempt)})
	return time.Duration(c/2+int(h.Sum64()%uint64(c-c/2+1))) * time.Millisecond
}

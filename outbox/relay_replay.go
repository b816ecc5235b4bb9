package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
)

// replayParked carries out an operator's replay under the bucket's lease,
// before the relay publishes anything of the bucket's message partition: it
// publishes the marked parked messages it may (replayable) in batches,
// deletes each acknowledged prefix from the parked partition, and withdraws
// the bucket's replay request once none is left. Kafka refusing a replay
// for good clears that message's mark (its key stays quarantined); any
// other failure fails the cycle before the bucket publishes more, and the
// marked messages are published again later (duplicates, never a reorder).
func (q *parking) replayParked(ctx context.Context, bucket int) (int, error) {
	r := q.r
	pb, err := q.parkedKeys(ctx, bucket)
	if err != nil {
		return 0, err
	}
	if err := q.refuseUnreplayable(ctx, bucket, pb); err != nil {
		return 0, err
	}
	published := 0
	for {
		todo := q.book.replayable(pb)
		if len(todo) == 0 {
			break
		}
		batch := todo[:min(len(todo), r.opts.BatchSize)]
		out, err := r.publishUnderLease(ctx, bucket, batch)
		if err != nil {
			return published, err
		}
		if _, err := r.lease.grant(ctx, bucket); err != nil {
			return published, errCycle(fmt.Sprintf("replay parked messages of bucket %d", bucket), err)
		}
		r.hooks.publish(bucket, out.acked, nil, out.err)
		if out.acked > 0 {
			// Like deletePublished, no lease condition: every replay it
			// removes was acknowledged, in order, under a grant.
			r.lease.during(func() { err = q.store.DeleteReplayed(ctx, bucket, batch[:out.acked]) })
			if err != nil {
				return published, errCycle(fmt.Sprintf("delete %d replayed messages of bucket %d", out.acked, bucket), err)
			}
			q.book.dropReplays(pb, batch[:out.acked], true)
			r.hooks.replayed(bucket, out.acked)
			published += out.acked
		}
		if out.err == nil {
			continue
		}
		failed := batch[out.acked]
		if _, poison := PoisonReason(out.err); !poison {
			return published, errCycle(fmt.Sprintf("replay bucket %d row %d", bucket, failed.Sequence()), out.err)
		}
		if err := q.refuseReplay(ctx, bucket, pb, failed, out.err.Error()); err != nil {
			return published, err
		}
	}
	if err := q.unmarkBlocked(ctx, bucket, pb); err != nil {
		return published, err
	}
	return published, q.replayDone(ctx, bucket, pb)
}

// unmarkBlocked clears the marks left behind an unmarked message of their
// key (a selection that skipped one): they cannot go first, and a park
// behind a marked message is refused, so they would hold the key's next
// messages in the message partition.
func (q *parking) unmarkBlocked(ctx context.Context, bucket int, pb *parkedBucket) error {
	blocked := q.book.marked(pb)
	for _, m := range blocked {
		if err := q.store.RefuseReplay(ctx, bucket, m.Sequence(), "not replayed: an earlier message of its key is parked and not marked for replay"); err != nil && !errors.Is(err, ErrParkConflict) {
			q.book.forget(bucket)
			return errCycle(fmt.Sprintf("clear the replay mark of bucket %d row %d", bucket, m.Sequence()), err)
		}
	}
	q.book.dropReplays(pb, blocked, false)
	return nil
}

// replayDone withdraws the bucket's replay request once nothing marked can
// be published: a marked message behind an unmarked one of its key waits
// for the operator to replay the earlier one, which raises a new request.
// A request raised meanwhile stays (the store's condition), and the relay
// reads the parked partition again when it sees it.
func (q *parking) replayDone(ctx context.Context, bucket int, pb *parkedBucket) error {
	request := q.book.request(pb)
	if request == 0 {
		return nil
	}
	err := q.store.ReplayDone(ctx, bucket, request)
	if err != nil && !errors.Is(err, ErrParkConflict) {
		return errCycle(fmt.Sprintf("withdraw the replay request of bucket %d", bucket), err)
	}
	q.book.requestDone(bucket, pb, request)
	return nil
}

// replayReady returns the buckets of bs with a replay request. It reads the
// requests when forced or when the last read is LeaseRenewInterval old, and
// forgets the parked state of every bucket read before its request, so the
// relay reads the marks. Nil when the store has no quarantine side.
func (q *parking) replayReady(ctx context.Context, bs []int, force bool) ([]int, error) {
	r := q.r
	if q.store == nil {
		return nil, nil
	}
	now := r.clock.Now()
	if q.book.requestsDue(now, r.opts.LeaseRenewInterval, force) {
		reqs, err := q.store.ReplayRequests(ctx)
		if err != nil {
			return nil, errCycle("read the replay requests", err)
		}
		q.book.setRequests(reqs, now)
	}
	return q.book.requested(bs), nil
}

// union returns the distinct elements of a and b, ascending.
func union(a, b []int) []int {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// refuseUnreplayable clears the marks of marked messages that do not decode.
func (q *parking) refuseUnreplayable(ctx context.Context, bucket int, pb *parkedBucket) error {
	bad := q.book.takeUnreplayable(pb)
	for _, seq := range slices.Sorted(maps.Keys(bad)) {
		if err := q.refuseReplay(ctx, bucket, pb, Stored(Message{}, 0, seq), bad[seq]); err != nil {
			return err
		}
	}
	return nil
}

// refuseReplay leaves a marked message parked, unmarked, with the reason,
// and unmarks its key's later marked messages too: they cannot go before
// it, and a marked message behind an unmarked one would refuse every park
// of its key's next messages. The operator replays the key again once the
// cause is fixed.
func (q *parking) refuseReplay(ctx context.Context, bucket int, pb *parkedBucket, m Message, reason string) error {
	r := q.r
	refused := q.book.withLaterOfKey(pb, m)
	for i, c := range refused {
		why := reason
		if i > 0 {
			why = fmt.Sprintf("not replayed: message %d of its key was refused: %s", m.Sequence(), reason)
		}
		if err := q.store.RefuseReplay(ctx, bucket, c.Sequence(), why); err != nil && !errors.Is(err, ErrParkConflict) {
			q.book.forget(bucket)
			return errCycle(fmt.Sprintf("clear the replay mark of bucket %d row %d", bucket, c.Sequence()), err)
		}
	}
	q.book.dropReplays(pb, refused, false)
	r.log.LogAttrs(ctx, slog.LevelWarn, "replay refused; the message stays parked with its key's later ones",
		slog.Int("bucket", bucket), slog.Int64("sequence", m.Sequence()), slog.Int("unmarked", len(refused)), slog.String("error", reason))
	return nil
}

package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// parking is a relay's parked-state work: it parks rows, reads its
// buckets' parked partitions and carries out the operators' replays, each
// write under a grant of the relay's leases. Its book survives runs, as the
// leases do.
type parking struct {
	r *Relay
	// store is the store's parking side, nil when the store has none.
	// Every relay reads it, whatever its policy: a held-back key stays
	// held back and marked replays go out under any relay's lease.
	store Quarantine
	// poison is PoisonQuarantine: the policy decides only whether a new
	// poison message is parked or blocks its bucket.
	poison bool
	// book is what the relay knows of its buckets' parked partitions and
	// of the replay requests, behind a lock of its own.
	book *parkedBook
}

// parkedKeys returns the bucket's parked state, reading the parked
// partition if the relay has not since it claimed the bucket, since a park
// whose outcome it does not know, or since a new replay request.
func (q *parking) parkedKeys(ctx context.Context, bucket int) (*parkedBucket, error) {
	pb, request, ok := q.book.lookup(bucket)
	if ok {
		return pb, nil
	}
	set, err := q.store.ParkedKeys(ctx, bucket)
	if err != nil {
		return nil, errCycle(fmt.Sprintf("read parked keys of bucket %d", bucket), err)
	}
	return q.book.install(bucket, set, request), nil
}

// parkQuarantinedKeys parks, in order, the fetched messages whose key is
// quarantined in their bucket and returns the others, still in order.
// After a conflict (a replay or drop changed the bucket's parked partition)
// it forgets the bucket's keys and returns ErrParkConflict: the next batch
// reads them again.
func (q *parking) parkQuarantinedKeys(ctx context.Context, bucket int, msgs []Message) ([]Message, error) {
	if _, err := q.parkedKeys(ctx, bucket); err != nil {
		return nil, err
	}
	rest := msgs[:0:0]
	for i := range msgs {
		m := &msgs[i]
		behind := q.book.behind(bucket, m.Key)
		if behind == 0 {
			rest = append(rest, *m)
			continue
		}
		p := Parking{Bucket: bucket, Sequence: m.Sequence(), Reason: ParkKeyQuarantined, Behind: behind}
		if err := q.park(ctx, p, m, m.Key); err != nil {
			return nil, err
		}
	}
	return rest, nil
}

// park moves one row under a grant asked for as the park starts, which
// the move carries into the table (Parking.Lease), and keeps the bucket's
// key set current. Any error leaves the park's outcome unknown (a
// conflict, but also a transaction that applied and whose response was
// lost): the set is forgotten, so the parked partition is read again
// before the bucket publishes anything more. A park the table refused for
// its lease drops the bucket: another relay holds it and has read, or will
// read, its parked partition without this row. key is the row's key, nil
// when keyless or unreadable.
func (q *parking) park(ctx context.Context, p Parking, m *Message, key []byte) error {
	r := q.r
	g, err := r.lease.grant(ctx, p.Bucket)
	if err != nil {
		return errCycle(fmt.Sprintf("park bucket %d row %d", p.Bucket, p.Sequence), err)
	}
	p.Lease = LeaseCheck{Owner: g.Owner, Beyond: g.Beyond}
	r.lease.during(func() { err = q.store.Park(ctx, p) })
	if err != nil {
		q.book.forget(p.Bucket)
		if errors.Is(err, ErrLeaseLost) {
			r.lease.loseBucket(p.Bucket, LossWriteRefused)
		}
		return errCycle(fmt.Sprintf("park bucket %d row %d", p.Bucket, p.Sequence), err)
	}
	q.book.noteParked(p.Bucket, key, p.Sequence)
	attrs := []slog.Attr{slog.Int("bucket", p.Bucket), slog.Int64("sequence", p.Sequence),
		slog.String("reason", string(p.Reason)), slog.Int("attempts", p.Attempts)}
	if m != nil {
		attrs = append(attrs, slog.String("messageId", m.ID.String()), slog.String("topic", m.Topic))
	}
	if p.Error != "" {
		attrs = append(attrs, slog.String("error", p.Error))
	}
	r.log.LogAttrs(ctx, slog.LevelWarn, "message parked", attrs...)
	r.hooks.parked(p)
	return nil
}

// parkFailed decides whether a failed head row is parked under
// PoisonQuarantine (a failure retrying cannot fix, or too many attempts)
// and parks it. It reports whether it did. Under PoisonBlock it never
// parks: the row blocks its bucket.
func (q *parking) parkFailed(ctx context.Context, bucket int, seq int64, m *Message, cause error) (bool, error) {
	r := q.r
	if !q.poison {
		return false, nil
	}
	h := r.heads.state(bucket)
	if h == nil || h.seq != seq {
		return false, nil
	}
	reason, poison := PoisonReason(cause)
	var key []byte
	if m != nil {
		key = m.Key
	}
	var unreadable *UnreadableRowError
	if errors.As(cause, &unreadable) {
		reason, poison, key = ParkUndecodableItem, true, unreadable.Key
	}
	if !poison {
		if h.failures < r.opts.PoisonMaxAttempts {
			return false, nil
		}
		reason = ParkMaxAttempts
	}
	if key != nil {
		if _, err := q.parkedKeys(ctx, bucket); err != nil {
			return false, err
		}
	}
	p := Parking{Bucket: bucket, Sequence: seq, Reason: reason, Error: cause.Error(),
		Attempts: h.failures, FirstFailedAt: h.firstAt}
	if err := q.park(ctx, p, m, key); err != nil {
		return false, err
	}
	r.heads.clear(bucket)
	return true, nil
}

// headFailed handles a head row that failed (a refused publish or a row that
// cannot be read): it counts the failure, parks the row when the policy says
// so, and otherwise backs the bucket off. It never fails the cycle for the
// row itself; a failed park is backed off like the row.
func (q *parking) headFailed(ctx context.Context, bucket int, seq int64, m *Message, cause error) {
	r := q.r
	delay := r.heads.failed(bucket, seq, r.clock.Now(), r.opts.ErrorBackoff, r.opts.LeaseRenewInterval)
	parked, err := q.parkFailed(ctx, bucket, seq, m, cause)
	if parked {
		return
	}
	attrs := []slog.Attr{slog.Int("bucket", bucket), slog.Int64("sequence", seq),
		slog.Duration("backoff", delay), slog.Any("error", cause)}
	if m != nil {
		attrs = append(attrs, slog.String("messageId", m.ID.String()))
	}
	if err != nil {
		attrs = append(attrs, slog.Any("parkError", err))
	}
	r.log.LogAttrs(ctx, slog.LevelWarn, "publish failed; bucket backs off", attrs...)
	r.hooks.backoff(bucket, delay, cause)
}

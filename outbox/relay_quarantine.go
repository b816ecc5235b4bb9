package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
)

// parkedKeys returns the bucket's parked state, reading the parked
// partition if the relay has not since it claimed the bucket, since a park
// whose outcome it does not know, or since a new replay request.
func (u *run) parkedKeys(ctx context.Context, bucket int) (*parkedBucket, error) {
	r := u.r
	pb, request, ok := r.parked.lookup(bucket)
	if ok {
		return pb, nil
	}
	set, err := r.quarantine.ParkedKeys(ctx, bucket)
	if err != nil {
		return nil, errCycle(fmt.Sprintf("read parked keys of bucket %d", bucket), err)
	}
	return r.parked.install(bucket, set, request), nil
}

// parkQuarantinedKeys parks, in order, the fetched messages whose key is
// quarantined in their bucket and returns the others, still in order.
// After a conflict (a replay or drop changed the bucket's parked partition)
// it forgets the bucket's keys and returns ErrParkConflict: the next batch
// reads them again.
func (u *run) parkQuarantinedKeys(ctx context.Context, bucket int, msgs []Message) ([]Message, error) {
	if _, err := u.parkedKeys(ctx, bucket); err != nil {
		return nil, err
	}
	rest := msgs[:0:0]
	for i := range msgs {
		m := &msgs[i]
		behind := u.r.parked.behind(bucket, m.Key)
		if behind == 0 {
			rest = append(rest, *m)
			continue
		}
		p := Parking{Bucket: bucket, Sequence: m.Sequence, Reason: ParkKeyQuarantined, Behind: behind}
		if err := u.park(ctx, p, m, m.Key); err != nil {
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
func (u *run) park(ctx context.Context, p Parking, m *Message, key []byte) error {
	r := u.r
	g, err := r.lease.grant(ctx, p.Bucket)
	if err != nil {
		return errCycle(fmt.Sprintf("park bucket %d row %d", p.Bucket, p.Sequence), err)
	}
	p.Lease = g.check()
	r.lease.during(func() { err = r.quarantine.Park(ctx, p) })
	if err != nil {
		r.parked.forget(p.Bucket)
		if errors.Is(err, ErrLeaseLost) {
			r.lease.loseBucket(p.Bucket, LossWriteRefused)
		}
		return errCycle(fmt.Sprintf("park bucket %d row %d", p.Bucket, p.Sequence), err)
	}
	r.parked.noteParked(p.Bucket, key, p.Sequence)
	attrs := []slog.Attr{slog.Int("bucket", p.Bucket), slog.Int64("sequence", p.Sequence),
		slog.String("reason", string(p.Reason)), slog.Int("attempts", p.Attempts)}
	if m != nil {
		attrs = append(attrs, slog.String("messageId", m.ID.String()), slog.String("topic", m.Topic))
	}
	if p.Error != "" {
		attrs = append(attrs, slog.String("error", p.Error))
	}
	r.log.LogAttrs(ctx, slog.LevelWarn, "message parked", attrs...)
	r.emit(Event{Kind: EventParked, Bucket: p.Bucket, Count: 1, Park: p.Reason})
	return nil
}

// parkFailed decides whether a failed head row is parked under
// PoisonQuarantine (a failure retrying cannot fix, or too many attempts)
// and parks it. It reports whether it did. Under PoisonBlock it never
// parks: the row blocks its bucket.
func (u *run) parkFailed(ctx context.Context, bucket int, seq int64, m *Message, cause error) (bool, error) {
	r := u.r
	if !r.parkPoison {
		return false, nil
	}
	h := r.headState(bucket)
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
		if _, err := u.parkedKeys(ctx, bucket); err != nil {
			return false, err
		}
	}
	p := Parking{Bucket: bucket, Sequence: seq, Reason: reason, Error: cause.Error(),
		Attempts: h.failures, FirstFailedAt: h.firstAt}
	if err := u.park(ctx, p, m, key); err != nil {
		return false, err
	}
	r.clearHead(bucket)
	return true, nil
}

// headFailed handles a head row that failed (a refused publish or a row that
// cannot be read): it counts the failure, parks the row when the policy says
// so, and otherwise backs the bucket off. It never fails the cycle for the
// row itself; a failed park is backed off like the row.
func (u *run) headFailed(ctx context.Context, bucket int, seq int64, m *Message, cause error) {
	r := u.r
	delay := r.recordHeadFailure(bucket, seq)
	parked, err := u.parkFailed(ctx, bucket, seq, m, cause)
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
	r.emit(Event{Kind: EventBackoff, Bucket: bucket, Duration: delay, Err: cause})
}

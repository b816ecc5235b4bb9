package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// headRow remembers a bucket whose head row Kafka refused: the bucket
// retries only that row, on its own backoff, while other buckets drain.
type headRow struct {
	// seq identifies the row: an unreadable row has no message id.
	seq      int64
	failures int
	retryAt  time.Time
	firstAt  time.Time
}

// bucketResult is what draining one bucket in a sweep produced.
type bucketResult struct {
	bucket    int
	published int
	// more: the bucket still has work (full batch, backoff, rebalance due).
	more bool
	err  error
}

// sweep drains the ready buckets in parallel, bounded by MaxConcurrency.
// Each bucket drains batch after batch until it is empty, a rebalance is due,
// the budget is reached or its head row fails.
func (u *run) sweep() (int, error) {
	r := u.r
	ready := u.ready
	results := make([]bucketResult, len(ready))
	sem := make(chan struct{}, r.opts.MaxConcurrency)
	var wg sync.WaitGroup
	for i, b := range ready {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = u.drainBucket(b)
		}()
	}
	wg.Wait()

	published := 0
	var firstErr error
	u.ready = u.ready[:0:0]
	for _, res := range results {
		published += res.published
		if res.err != nil && firstErr == nil {
			firstErr = res.err
		}
		if res.more && res.err == nil {
			u.ready = append(u.ready, res.bucket)
		}
	}
	u.res.Published += published
	return published, firstErr
}

// drainBucket relays one bucket: fetch, check the lease, publish with
// in-flight renewal, delete the acknowledged prefix, repeat.
func (u *run) drainBucket(bucket int) (res bucketResult) {
	r := u.r
	res.bucket = bucket
	ctx, span := r.tracer.Start(u.ctx, SpanDrain)
	span.Annotate(AnnotationRelayID, r.opts.RelayID)
	span.Annotate(AnnotationBucket, bucket)
	defer func() {
		span.Annotate(AnnotationMessages, res.published)
		span.End(res.err)
	}()
	for {
		now := r.clock.Now()
		if ctx.Err() != nil || u.overBudget(now) {
			res.more = true
			return res
		}
		if r.acquisitionDue(now) {
			res.more = true
			return res
		}
		size := r.opts.BatchSize
		head := r.headState(bucket)
		if head != nil {
			if now.Before(head.retryAt) {
				res.more = true
				return res
			}
			size = 1
			r.emit(Event{Kind: EventHeadRowRetry, Bucket: bucket})
		}
		if r.quarantine != nil {
			// An operator's replay goes out before anything of the
			// bucket's message partition.
			n, err := u.replayParked(ctx, bucket)
			res.published += n
			if err != nil {
				res.err = err
				return res
			}
		}
		g, ok := r.held.reserve(ctx, size)
		if !ok {
			res.more = true
			return res
		}
		n, more, err := u.relayBatch(ctx, bucket, &g, head)
		g.done()
		res.published += n
		if err != nil || !more {
			res.err = err
			return res
		}
		if head != nil && r.headState(bucket) != nil {
			// The head row failed again: wait out its backoff.
			res.more = true
			return res
		}
	}
}

// relayBatch moves one batch. more reports that the bucket may hold more
// work right away.
// g bounds the batch's size and holds its room under MaxHeldBytes.
func (u *run) relayBatch(ctx context.Context, bucket int, g *grant, head *headRow) (published int, more bool, err error) {
	r := u.r
	size := g.count
	msgs, ferr := r.store.FetchBatch(ctx, bucket, size)
	// A fetch that stopped at a bad row still returns the rows before it:
	// they are relayed first and the bad row becomes the head.
	if ferr != nil && len(msgs) == 0 {
		var unreadable *UnreadableRowError
		if errors.As(ferr, &unreadable) {
			// The head row itself cannot be read: it is the bucket's
			// failing head, like a row Kafka refused.
			return 0, true, u.unreadableHead(ctx, bucket, unreadable)
		}
		return 0, false, errCycle(fmt.Sprintf("fetch bucket %d", bucket), ferr)
	}
	g.fit(msgs)
	if len(msgs) == 0 {
		r.clearHead(bucket)
		return 0, false, nil
	}
	fetched := len(msgs)
	// Decoded once here: the publish span's origins and links and the
	// Publisher's records all read this decode (Message.DecodedHeaders).
	decodeFetched(msgs)
	r.emit(Event{Kind: EventBatchFetched, Bucket: bucket, Count: fetched})
	if head != nil && msgs[0].Sequence != head.seq {
		// A peer published the failing row meanwhile: its backoff no
		// longer applies.
		r.clearHead(bucket)
	}
	if err := u.prepareLease(ctx, bucket); err != nil {
		return 0, false, err
	}
	if r.quarantine != nil {
		if msgs, err = u.parkQuarantinedKeys(ctx, bucket, msgs); err != nil {
			return 0, true, err
		}
		if len(msgs) == 0 {
			return 0, true, nil
		}
	}

	out := u.publishUnderLease(ctx, bucket, msgs)
	acked, perr, ackAt := out.acked, out.err, out.at
	if !r.holds(bucket, r.clock.Now()) {
		// Appended records cannot be recalled, but rows published after the
		// lease ran out stay for the next owner: duplicates, never loss.
		r.emit(Event{Kind: EventPublish, Bucket: bucket, Err: ErrLeaseLost})
		return 0, false, errCycle(fmt.Sprintf("publish bucket %d", bucket), fmt.Errorf("lease expired before publishing completed: %w", ErrLeaseLost))
	}
	lat := make([]time.Duration, acked)
	for i := range acked {
		lat[i] = ackAt.Sub(msgs[i].CreatedAt)
	}
	r.emit(Event{Kind: EventPublish, Bucket: bucket, Count: acked, Latencies: lat, Err: perr, Time: ackAt})

	if acked > 0 {
		if err := u.deletePublished(ctx, bucket, msgs[:acked]); err != nil {
			return acked, false, err
		}
	}
	if perr != nil {
		if isContextErr(perr) && ctx.Err() != nil {
			return acked, true, nil
		}
		u.headFailed(ctx, bucket, msgs[acked].Sequence, &msgs[acked], perr)
		return acked, true, nil
	}
	r.clearHead(bucket)
	return acked, fetched == size || ferr != nil, nil
}

// unreadableHead handles a bucket whose head row cannot be read: backed off
// like a refused row, parked as undecodable under PoisonQuarantine. A row
// stamped with another bucket count never gets here: that stays a
// misconfiguration that stops the relay.
func (u *run) unreadableHead(ctx context.Context, bucket int, row *UnreadableRowError) error {
	r := u.r
	if err := u.prepareLease(ctx, bucket); err != nil {
		return err
	}
	r.emit(Event{Kind: EventPublish, Bucket: bucket, Err: row})
	u.headFailed(ctx, bucket, row.Sequence, nil, row)
	return nil
}

// deletePublished deletes the acknowledged prefix of a batch.
func (u *run) deletePublished(ctx context.Context, bucket int, msgs []Message) error {
	r := u.r
	dctx, span := r.tracer.Start(ctx, SpanDelete)
	span.Annotate(AnnotationBucket, bucket)
	span.Annotate(AnnotationMessages, len(msgs))
	// A throttled delete can outlast the lease: renewing meanwhile keeps
	// the next owner from publishing these rows again.
	var err error
	u.whileRenewing(ctx, func() { err = r.store.MarkPublished(dctx, bucket, msgs) })
	span.End(err)
	if err != nil {
		return errCycle(fmt.Sprintf("delete %d published messages of bucket %d", len(msgs), bucket), err)
	}
	r.emit(Event{Kind: EventDelete, Bucket: bucket, Count: len(msgs)})
	u.resMu.Lock()
	u.res.Deleted += len(msgs)
	u.resMu.Unlock()
	return nil
}

// prepareLease refuses to publish from a bucket the relay no longer holds and
// renews the leases first when they are due, so a publish starts with more
// than the margin (KeepMargin) ahead of it.
func (u *run) prepareLease(ctx context.Context, bucket int) error {
	r := u.r
	now := r.clock.Now()
	owned, age, ok := r.leaseAge(now)
	if !ok || age >= r.opts.LeaseDuration {
		r.dropOwnership(LossFetchOutlasted)
		return errCycle(fmt.Sprintf("prepare bucket %d", bucket), ErrLeaseLost)
	}
	if !slices.Contains(owned, bucket) {
		return errCycle(fmt.Sprintf("prepare bucket %d", bucket), ErrLeaseLost)
	}
	if r.renewalDue(now) {
		if err := r.renew(ctx); err != nil {
			return err
		}
	}
	return nil
}

type publishOutcome struct {
	acked int
	err   error
	at    time.Time
}

// publishUnderLease publishes msgs while renewing the leases whenever they
// come due, and always waits for the publish to finish: records already
// appended cannot be recalled, and the caller decides from the lease whether
// to delete them.
func (u *run) publishUnderLease(ctx context.Context, bucket int, msgs []Message) publishOutcome {
	r := u.r
	pctx, span := r.tracer.Start(ctx, SpanPublish)
	span.Annotate(AnnotationBucket, bucket)
	span.Annotate(AnnotationMessages, len(msgs))
	if origins := OriginTraces(msgs); len(origins) > 0 {
		span.Metadata(MetadataOrigins, origins)
	}
	LinkOrigins(span, msgs)
	var out publishOutcome
	held := u.whileRenewing(ctx, func() {
		acked, err := r.pub.Publish(pctx, msgs)
		acked, err = r.checkAck(ctx, bucket, len(msgs), acked, err)
		out = publishOutcome{acked, err, r.clock.Now()}
	})
	switch {
	case !held:
		span.Annotate(AnnotationOutcome, "lease-lost")
		span.End(ErrLeaseLost)
	case out.err != nil:
		span.Annotate(AnnotationOutcome, "error")
		span.End(out.err)
	default:
		span.Annotate(AnnotationOutcome, "ok")
		span.End(nil)
	}
	return out
}

// whileRenewing runs fn — a publish or a delete, either of which can take
// longer than the lease under throttling — in its own goroutine and renews
// the relay's leases whenever they come due until fn returns. It always
// waits for fn. It reports false when the leases were lost meanwhile; the
// caller then checks its lease before acting on fn's outcome.
func (u *run) whileRenewing(ctx context.Context, fn func()) (held bool) {
	r := u.r
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	for {
		wait, renewNow := r.renewalWait(r.clock.Now())
		if renewNow {
			if err := r.renew(ctx); errors.Is(err, ErrLeaseLost) {
				<-done
				return false
			}
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-done:
			t.Stop()
			return true
		case <-t.C:
		}
	}
}

// checkAck keeps a Publisher's answer within the batch it was given. A
// custom Publisher may report an error although it acknowledged every
// message (a failed flush or close after the acks): nothing is left to
// retry, so the batch counts as published and the error is logged. A count
// outside [0, n] is a Publisher bug; it is clamped so the relay never deletes
// a row that was not handed over.
func (r *Relay) checkAck(ctx context.Context, bucket, n, acked int, err error) (int, error) {
	if acked < 0 || acked > n {
		r.log.LogAttrs(ctx, slog.LevelError, "publisher acknowledged a count outside its batch",
			slog.Int("bucket", bucket), slog.Int("acked", acked), slog.Int("batch", n))
		acked = max(0, min(acked, n))
		if err == nil && acked < n {
			err = fmt.Errorf("publisher acknowledged %d of %d messages without an error", acked, n)
		}
	}
	if err != nil && acked == n {
		r.log.LogAttrs(ctx, slog.LevelWarn, "publisher reported an error after acknowledging every message; the batch counts as published",
			slog.Int("bucket", bucket), slog.Int("acked", acked), slog.Any("error", err))
		return acked, nil
	}
	return acked, err
}

// renewalWait returns how long a publish may run before the leases need a
// renewal, or renewNow. After a failed renewal it waits ErrorBackoff (at most
// half the remaining lease) before trying again.
func (r *Relay) renewalWait(now time.Time) (time.Duration, bool) {
	r.mu.Lock()
	at, errAt, acquiredAt := r.lease.at, r.lease.renewErrAt, r.lease.acquiredAt
	r.mu.Unlock()
	if at.IsZero() {
		// Lost: wait for the publish without renewing.
		return time.Hour, false
	}
	age := now.Sub(at)
	remaining := r.opts.LeaseDuration - age
	if remaining <= 0 {
		r.dropOwnership(LossPublishOutlasted)
		return time.Hour, false
	}
	due := r.timing.renewDue(at, acquiredAt).Sub(now)
	if due <= 0 {
		if errAt.After(at) && now.Sub(errAt) < min(r.opts.ErrorBackoff, remaining/2) {
			return max(min(r.opts.ErrorBackoff, remaining/2)-now.Sub(errAt), time.Millisecond), false
		}
		return 0, true
	}
	return max(min(due, remaining/2), time.Millisecond), false
}

// headState returns a copy of the bucket's head-row state, or nil.
func (r *Relay) headState(bucket int) *headRow {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := r.heads[bucket]; h != nil {
		c := *h
		return &c
	}
	return nil
}

func (r *Relay) clearHead(bucket int) {
	r.mu.Lock()
	delete(r.heads, bucket)
	r.mu.Unlock()
}

// recordHeadFailure counts a failure of the bucket's head row (by sequence)
// and returns the bucket's backoff. A different head row starts counting
// again.
func (r *Relay) recordHeadFailure(bucket int, seq int64) time.Duration {
	r.mu.Lock()
	h := r.heads[bucket]
	if h == nil || h.seq != seq {
		h = &headRow{seq: seq, firstAt: r.clock.Now()}
		r.heads[bucket] = h
	}
	h.failures++
	failures := h.failures
	r.mu.Unlock()
	delay := r.jitter.backoff(failures, r.opts.ErrorBackoff, r.opts.LeaseRenewInterval)
	r.mu.Lock()
	h.retryAt = r.clock.Now().Add(delay)
	r.mu.Unlock()
	return delay
}

// earliestRetry returns the earliest head-row retry time.
func (r *Relay) earliestRetry() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var t time.Time
	for _, h := range r.heads {
		if t.IsZero() || h.retryAt.Before(t) {
			t = h.retryAt
		}
	}
	return t, !t.IsZero()
}

// backingOff reports whether some bucket waits for a head-row retry.
func (r *Relay) backingOff() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.heads) > 0
}

package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

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
// the run stops or its head row fails. A drain still in flight at the
// stop's settle point (a publish waiting for a broker that does not
// answer) is left to finish on its own: the stop releases the leases
// meanwhile, so nothing of its outcome is acted on, and Run waits for it
// before it returns.
func (u *run) sweep() (int, error) {
	r := u.r
	ready := u.ready
	type indexed struct {
		i   int
		res bucketResult
	}
	arrived := make(chan indexed, len(ready))
	sem := make(chan struct{}, r.opts.MaxConcurrency)
	started := 0
	for i, b := range ready {
		select {
		case sem <- struct{}{}:
		case <-u.ctx.Done():
		}
		if u.ctx.Err() != nil {
			break
		}
		started++
		u.drains.Add(1)
		go func() {
			defer u.drains.Done()
			defer func() { <-sem }()
			arrived <- indexed{i, bucketDrain{u: u, bucket: b}.drain()}
		}()
	}
	results := make([]*bucketResult, len(ready))
	var cutErr error
	cut, grace := u.ctx.Done(), (<-chan time.Time)(nil)
	for got := 0; got < started; {
		select {
		case a := <-arrived:
			results[a.i] = &a.res
			got++
			continue
		case <-cut:
			// Drains end promptly once their I/O is cut; one that
			// does not within settleGrace is left behind.
			cut = nil
			t := time.NewTimer(settleGrace)
			defer t.Stop()
			grace = t.C
			continue
		case <-grace:
		}
		r.log.LogAttrs(u.ctx, slog.LevelWarn, "a write was still in flight at the stop's settle point; the stop goes on without it and acts on nothing of its outcome",
			slog.Int("drains", started-got))
		cutErr = u.ctx.Err()
		break
	}

	published := 0
	firstErr := cutErr
	u.ready = u.ready[:0:0]
	now := r.clock.Now()
	for _, res := range results {
		if res == nil {
			continue
		}
		published += res.published
		if res.published > 0 {
			r.worked[res.bucket] = now
		}
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

// bucketDrain is one bucket's part of a sweep: it alone relays the bucket
// until the sweep moves on, on the goroutine the sweep gave it.
type bucketDrain struct {
	u      *run
	bucket int
}

// drain relays the bucket: fetch, check the lease, publish with
// in-flight renewal, delete the acknowledged prefix, repeat.
func (d bucketDrain) drain() (res bucketResult) {
	u, r, bucket := d.u, d.u.r, d.bucket
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
		if u.stopping(now) {
			res.more = true
			return res
		}
		if r.lease.snapshot().RoundDue(now) {
			res.more = true
			return res
		}
		size := r.opts.BatchSize
		head := r.heads.state(bucket)
		if head != nil {
			if now.Before(head.retryAt) {
				res.more = true
				return res
			}
			size = 1
			r.hooks.headRowRetry(bucket)
		}
		if r.park.store != nil {
			// An operator's replay goes out before anything of the
			// bucket's message partition.
			n, err := r.park.replayParked(ctx, bucket)
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
		n, more, err := d.relayBatch(ctx, &g, head)
		g.done()
		res.published += n
		if err != nil || !more {
			res.err = err
			return res
		}
		if head != nil && r.heads.state(bucket) != nil {
			// The head row failed again: wait out its backoff.
			res.more = true
			return res
		}
	}
}

// relayBatch moves one batch. more reports that the bucket may hold more
// work right away.
// g bounds the batch's size and holds its room under MaxHeldBytes.
func (d bucketDrain) relayBatch(ctx context.Context, g *grant, head *headRow) (published int, more bool, err error) {
	r, bucket := d.u.r, d.bucket
	size := g.count
	msgs, ferr := r.store.FetchBatch(ctx, bucket, size)
	// A batch the store cut short has more behind it, like a full one; an
	// empty answer waits all the same (a transaction still committing).
	cut := errors.Is(ferr, ErrBatchCut)
	if cut {
		ferr = nil
	}
	// A fetch that stopped at a bad row still returns the rows before it:
	// they are relayed first and the bad row becomes the head.
	if ferr != nil && len(msgs) == 0 {
		var unreadable *UnreadableRowError
		if errors.As(ferr, &unreadable) {
			// The head row itself cannot be read: it is the bucket's
			// failing head, like a row Kafka refused.
			return 0, true, d.unreadableHead(ctx, unreadable)
		}
		return 0, false, errCycle(fmt.Sprintf("fetch bucket %d", bucket), ferr)
	}
	g.fit(msgs)
	if len(msgs) == 0 {
		r.heads.clear(bucket)
		return 0, false, nil
	}
	fetched := len(msgs)
	// Decoded once here: the publish span's origins and links and the
	// Publisher's records all read this decode (Message.DecodedHeaders).
	decodeFetched(msgs)
	r.hooks.fetch(bucket, fetched)
	if head != nil && msgs[0].Sequence() != head.seq {
		// A peer published the failing row meanwhile: its backoff no
		// longer applies.
		r.heads.clear(bucket)
	}
	if r.park.store != nil {
		if msgs, err = r.park.parkQuarantinedKeys(ctx, bucket, msgs); err != nil {
			return 0, true, err
		}
		if len(msgs) == 0 {
			return 0, true, nil
		}
	}

	out, err := r.publishUnderLease(ctx, bucket, msgs)
	if err != nil {
		return 0, false, err
	}
	acked, perr, ackAt := out.acked, out.err, out.at
	if err := r.stillHeld(ctx, bucket); err != nil {
		return 0, false, err
	}
	lat := make([]time.Duration, acked)
	for i := range acked {
		lat[i] = ackAt.Sub(msgs[i].CreatedAt)
	}
	r.hooks.publish(bucket, acked, lat, perr)

	if acked > 0 {
		if err := d.deletePublished(ctx, msgs[:acked]); err != nil {
			return acked, false, err
		}
	}
	if perr != nil {
		if isContextErr(perr) && ctx.Err() != nil {
			return acked, true, nil
		}
		r.park.headFailed(ctx, bucket, msgs[acked].Sequence(), &msgs[acked], perr)
		return acked, true, nil
	}
	r.heads.clear(bucket)
	return acked, fetched == size || cut || ferr != nil, nil
}

// unreadableHead handles a bucket whose head row cannot be read: backed off
// like a refused row, parked as undecodable under PoisonQuarantine. A row
// stamped with another bucket count never gets here: that stays a
// misconfiguration that stops the relay.
func (d bucketDrain) unreadableHead(ctx context.Context, row *UnreadableRowError) error {
	r, bucket := d.u.r, d.bucket
	if _, err := r.lease.grant(ctx, bucket); err != nil {
		return err
	}
	r.hooks.publish(bucket, 0, nil, row)
	r.park.headFailed(ctx, bucket, row.Sequence, nil, row)
	return nil
}

// deletePublished deletes the acknowledged prefix of a batch.
func (d bucketDrain) deletePublished(ctx context.Context, msgs []Message) error {
	r, bucket := d.u.r, d.bucket
	dctx, span := r.tracer.Start(ctx, SpanDelete)
	span.Annotate(AnnotationBucket, bucket)
	span.Annotate(AnnotationMessages, len(msgs))
	// A throttled delete can outlast the lease: renewing meanwhile keeps
	// the next owner from publishing these rows again. The delete carries
	// no lease condition: every row it removes was acknowledged by Kafka,
	// in order, under a grant, so a delete landing after the lease passed
	// on costs the next owner at most a duplicate, never order or a
	// message.
	_, err := r.lease.grant(ctx, bucket)
	if err == nil {
		r.lease.during(func() { err = r.store.MarkPublished(dctx, bucket, msgs) })
	}
	span.End(err)
	if err != nil {
		return errCycle(fmt.Sprintf("delete %d published messages of bucket %d", len(msgs), bucket), err)
	}
	r.hooks.delete(bucket, len(msgs))
	d.u.deleted.Add(int64(len(msgs)))
	return nil
}

// stillHeld is the look after a publish: appended records cannot be
// recalled, but rows published after the lease ran out stay for the next
// owner, duplicates, never loss, so without a grant nothing of the
// publish's outcome is acted on.
func (r *Relay) stillHeld(ctx context.Context, bucket int) error {
	if _, err := r.lease.grant(ctx, bucket); err != nil {
		r.hooks.publish(bucket, 0, nil, err)
		return errCycle(fmt.Sprintf("publish bucket %d", bucket), fmt.Errorf("no grant to act on the outcome: %w", err))
	}
	return nil
}

type publishOutcome struct {
	acked int
	err   error
	at    time.Time
}

// publishUnderLease publishes msgs under a grant asked for as the publish
// starts, while the renewer renews the leases whenever they come due, and
// always waits for the publish to finish: records already appended cannot
// be recalled, and the caller decides from a grant whether to delete
// them. Without a grant nothing is sent.
func (r *Relay) publishUnderLease(ctx context.Context, bucket int, msgs []Message) (publishOutcome, error) {
	if _, err := r.lease.grant(ctx, bucket); err != nil {
		return publishOutcome{}, err
	}
	pctx, span := r.tracer.Start(ctx, SpanPublish)
	span.Annotate(AnnotationBucket, bucket)
	span.Annotate(AnnotationMessages, len(msgs))
	if origins := originTraces(msgs); len(origins) > 0 {
		span.Metadata(MetadataOrigins, origins)
	}
	LinkOrigins(span, msgs)
	var out publishOutcome
	r.lease.during(func() {
		acked, err := r.pub.Publish(pctx, msgs)
		acked, err = r.checkAck(ctx, bucket, len(msgs), acked, err)
		out = publishOutcome{acked, err, r.clock.Now()}
	})
	switch {
	case !r.lease.snapshot().Trusts(r.clock.Now()):
		span.Annotate(AnnotationOutcome, "lease-lost")
		span.End(ErrLeaseLost)
	case out.err != nil:
		span.Annotate(AnnotationOutcome, "error")
		span.End(out.err)
	default:
		span.Annotate(AnnotationOutcome, "ok")
		span.End(nil)
	}
	return out, nil
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

package outbox

import (
	"slices"
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

// headRows holds the relay's head-row backoffs and draws the jitter of
// every relay backoff. The buckets of a sweep drain in parallel, so its
// memory is guarded, but by the parked book's lock rather than one of its
// own: both are per-bucket memory the draining buckets touch, neither is
// ever held across a request, and nothing else is locked under it. It
// survives runs, as the leases do.
type headRows struct {
	book   *parkedBook // whose lock guards rows and jitter
	rows   map[int]*headRow
	jitter *jitter
}

func newHeadRows(book *parkedBook, relayID string) *headRows {
	return &headRows{book: book, rows: map[int]*headRow{}, jitter: newJitter(relayID)}
}

// state returns a copy of the bucket's head-row state, or nil.
func (h *headRows) state(bucket int) (c *headRow) {
	h.book.locked(func() {
		if row := h.rows[bucket]; row != nil {
			cp := *row
			c = &cp
		}
	})
	return c
}

func (h *headRows) clear(bucket int) {
	h.book.locked(func() { delete(h.rows, bucket) })
}

// failed counts a failure of the bucket's head row (by sequence) at now
// and returns the bucket's backoff. A different head row starts counting
// again.
func (h *headRows) failed(bucket int, seq int64, now time.Time, base, renew time.Duration) (delay time.Duration) {
	h.book.locked(func() {
		row := h.rows[bucket]
		if row == nil || row.seq != seq {
			row = &headRow{seq: seq, firstAt: now}
			h.rows[bucket] = row
		}
		row.failures++
		delay = h.jitter.backoff(row.failures, base, renew)
		row.retryAt = now.Add(delay)
	})
	return delay
}

// backoff draws the relay-wide backoff after failures consecutive
// fruitless cycles from the same jitter as the head rows'.
func (h *headRows) backoff(failures int, base, renew time.Duration) (d time.Duration) {
	h.book.locked(func() { d = h.jitter.backoff(failures, base, renew) })
	return d
}

// earliestRetry returns the earliest head-row retry time.
func (h *headRows) earliestRetry() (t time.Time, ok bool) {
	h.book.locked(func() {
		for _, row := range h.rows {
			if t.IsZero() || row.retryAt.Before(t) {
				t = row.retryAt
			}
		}
	})
	return t, !t.IsZero()
}

// backingOff reports whether some bucket waits for a head-row retry.
func (h *headRows) backingOff() (b bool) {
	h.book.locked(func() { b = len(h.rows) > 0 })
	return b
}

// retain drops the backoffs of buckets not in owned: a bucket the relay
// holds again later starts counting afresh.
func (h *headRows) retain(owned []int) {
	h.book.locked(func() {
		for b := range h.rows {
			if !slices.Contains(owned, b) {
				delete(h.rows, b)
			}
		}
	})
}

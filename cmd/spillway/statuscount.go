package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// countFindings is what the table's items say about its bucket count: what
// lies beyond the count, and messages stamped with another one.
type countFindings struct {
	// BucketCount is the count the findings are measured against.
	BucketCount int `json:"bucketCount"`
	// Stranded counts the messages in buckets beyond the count (in
	// [count, 2*count) and those with a lease item), which no relay reads.
	Stranded        int64 `json:"stranded"`
	StrandedBuckets []int `json:"strandedBuckets,omitempty"`
	// StaleLeases lists the lease items beyond the count, which every
	// check ignores; StaleHeld those of them a relay holds now.
	StaleLeases []int `json:"staleLeases,omitempty"`
	StaleHeld   []int `json:"staleLeasesHeld,omitempty"`
	// Stamped lists the pending buckets whose head message was written with
	// another count, StampedCounts the counts found.
	Stamped       []int `json:"stampedBuckets,omitempty"`
	StampedCounts []int `json:"stampedCounts,omitempty"`
}

// findCounts reads the findings for store's count. pending lists the
// buckets whose head is checked for a stamp. It costs one query of the
// lease items, what Store.StrandedIn costs for [count, 2*count) and the
// stale leases' buckets, and one strongly consistent head read per pending
// bucket.
func findCounts(ctx context.Context, store *outboxddb.Store, pending []int) (countFindings, error) {
	count := store.Options().BucketCount
	f := countFindings{BucketCount: count}
	stale, err := store.StaleLeases(ctx)
	if err != nil {
		return f, err
	}
	now := store.Options().Clock.Now()
	probe := make([]int, 0, count+len(stale))
	for b := count; b < 2*count; b++ {
		probe = append(probe, b)
	}
	for _, l := range stale {
		f.StaleLeases = append(f.StaleLeases, l.Bucket)
		if l.Owner != "" && l.ExpiresAt.After(now) {
			f.StaleHeld = append(f.StaleHeld, l.Bucket)
		}
		if !slices.Contains(probe, l.Bucket) {
			probe = append(probe, l.Bucket)
		}
	}
	st, err := store.StrandedIn(ctx, probe)
	if err != nil {
		return f, err
	}
	f.Stranded, f.StrandedBuckets = st.Messages, st.Buckets
	for _, b := range pending {
		var se *outboxddb.StampError
		if _, err := store.FetchBatch(ctx, b, 1); errors.As(err, &se) {
			f.Stamped = append(f.Stamped, b)
			if !slices.Contains(f.StampedCounts, se.Stamped) {
				f.StampedCounts = append(f.StampedCounts, se.Stamped)
			}
		}
	}
	slices.Sort(f.StampedCounts)
	return f, nil
}

// writersDisagree reports what shows writers with another count: messages
// beyond the count or stamped otherwise. Stale lease items say nothing
// about writers (a drain with another count leaves them) and are ignored.
func (f countFindings) writersDisagree() bool { return f.Stranded > 0 || len(f.Stamped) > 0 }

// warnings says the findings, one sentence each, every list once.
func (f countFindings) warnings() []string {
	var out []string
	if f.Stranded > 0 {
		out = append(out, fmt.Sprintf("%d message(s) wait in buckets %v beyond the bucket count %d, where no relay reads them: a writer used a larger count; "+
			"fix it, then move them with `spillway layout rehome --yes` (docs/operations.md#stranded-messages)", f.Stranded, f.StrandedBuckets, f.BucketCount))
	}
	if len(f.Stamped) > 0 {
		out = append(out, fmt.Sprintf("the head messages of buckets %v were written with bucket count %v, not %d, so relays stop at them: a writer uses the wrong count; "+
			"fix it, then `spillway layout restamp --yes` (docs/operations.md#a-message-written-with-another-bucket-count)", f.Stamped, joinInts(f.StampedCounts), f.BucketCount))
	}
	if len(f.StaleLeases) > 0 {
		held := ""
		if len(f.StaleHeld) > 0 {
			held = fmt.Sprintf(", and a relay with a larger count holds %v now (stop it first)", f.StaleHeld)
		}
		out = append(out, fmt.Sprintf("lease items of buckets %v lie beyond the bucket count %d, left by a relay or drain with a larger count%s; "+
			"every check ignores them and `spillway layout prune --yes` removes them", f.StaleLeases, f.BucketCount, held))
	}
	return out
}

// joinInts prints counts as "16" or "16 or 32".
func joinInts(ns []int) string {
	s := ""
	for i, n := range ns {
		if i > 0 {
			s += " or "
		}
		s += fmt.Sprint(n)
	}
	return s
}

// layoutView is a layout record as status and layout status print it;
// nil when the table has none.
type layoutView struct {
	KeyPrefix   string     `json:"keyPrefix"`
	BucketCount int        `json:"bucketCount"`
	RecordedBy  string     `json:"recordedBy,omitempty"`
	RecordedAt  *time.Time `json:"recordedAt,omitempty"`
}

func viewOfLayout(l outboxddb.Layout, found bool) *layoutView {
	if !found {
		return nil
	}
	v := &layoutView{KeyPrefix: l.KeyPrefix, BucketCount: l.BucketCount, RecordedBy: l.RecordedBy}
	if !l.RecordedAt.IsZero() {
		at := l.RecordedAt
		v.RecordedAt = &at
	}
	return v
}

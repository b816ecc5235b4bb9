package outboxddb

import (
	"context"
	"sync/atomic"
)

// layoutGate is a writer's check of the table's layout record: read at the
// writer's first write and remembered, since a record never changes.
type layoutGate struct {
	// turn is held by the one call reading the record. A channel, not a
	// mutex: a wait on it is durable in a synctest bubble, whose clock the
	// read's round trip moves.
	turn    chan struct{}
	checked atomic.Bool
	err     error // a *LayoutError, permanent; nil once checked otherwise
}

func newLayoutGate() layoutGate { return layoutGate{turn: make(chan struct{}, 1)} }

// CheckLayout checks the writer's bucket count against the table's layout
// record for its key prefix and returns a *LayoutError (matching
// outbox.ErrMisconfigured) when the record states another count. Every
// write checks the generation it writes to before its first request, so a
// writer with another count writes nothing; CheckLayout checks the one it
// writes to now (the previous generation until the seal, with
// WriterOptions.PreviousKeyPrefix), so a service can refuse to start instead.
//
// It costs one strongly consistent Query (one read unit) per writer: the
// first call that gets an answer remembers it, and every later call, so
// every commit in steady use, sends nothing. Concurrent first calls share
// one read. A table without a record (created before it existed, or by
// other tooling) is written unchecked: the writer logs a warning once
// and does not read again, so a record added later reaches writers when
// they are next created (`spillway layout record` says so). A failed read
// is returned and not remembered.
func (w *Writer) CheckLayout(ctx context.Context) error { return w.target().checkLayout(ctx) }

// checkLayout is CheckLayout for w's own generation.
func (w *Writer) checkLayout(ctx context.Context) error {
	g := &w.layout
	if g.checked.Load() {
		return g.err
	}
	select {
	case g.turn <- struct{}{}:
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	defer func() { <-g.turn }()
	if g.checked.Load() {
		return g.err
	}
	l, found, err := ReadLayout(ctx, w.client, w.opts.Options)
	if err != nil {
		return err
	}
	if found {
		g.err = l.Check(w.opts.TableName, "writer", w.opts.BucketCount)
	} else {
		w.opts.Logger.WarnContext(ctx, "outboxddb: the table has no layout record, so the writer cannot check its bucket count; record it with `spillway layout record` (docs/operations.md#the-layout-record)",
			"table", w.opts.TableName, "keyPrefix", w.opts.KeyPrefix, "bucketCount", w.opts.BucketCount)
	}
	g.checked.Store(true)
	return g.err
}

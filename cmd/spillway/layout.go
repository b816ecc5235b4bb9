package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// RecordedByCLI is the RecordedBy of a record `layout record` writes.
const RecordedByCLI = "spillway layout record"

// layoutEnv is a layout command's table: its configuration, client and the
// store of the key prefix at the recorded count.
type layoutEnv struct {
	cfg    outboxlambda.Config
	client outboxddb.Client
	store  *outboxddb.Store
	layout outboxddb.Layout
	found  bool
}

// openLayout parses the flags and reads the table's layout record. With
// recorded, a table without one is refused: what lies beyond a count is
// measured against the recorded one.
func openLayout(ctx context.Context, fs *flagSet, ef *endpointFlags, args []string, recorded bool) (*layoutEnv, error) {
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	cfg, err := ef.config()
	if err != nil {
		return nil, usagef("%v", err)
	}
	client, err := dynamoClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	e := &layoutEnv{cfg: cfg, client: client}
	lay, err := checkLayout(ctx, client, cfg.TableOptions(), &e.cfg.BucketCount, ef.bucketCountSource(), true)
	if err != nil {
		return nil, err
	}
	e.layout, e.found = lay.Layout, lay.found
	if recorded && !e.found {
		return nil, fmt.Errorf("table %s has no layout record for key prefix %s, so nothing says which buckets lie beyond its count: record it first with `spillway layout record --bucket-count N --yes`",
			cfg.Table, cfg.KeyPrefix)
	}
	if e.store, err = outboxddb.NewStore(client, e.cfg.StoreOptions()); err != nil {
		return nil, err
	}
	return e, nil
}

// runLayoutRecord states the bucket count of a table created before the
// layout record existed.
func runLayoutRecord(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("layout record", stdout)
	ef := addTableFlags(fs).withOutbox()
	yes := fs.Bool("yes", false, "record (without it: a dry run that shows what the table's items say)")
	e, err := openLayout(ctx, fs, ef, args, false)
	if err != nil {
		return err
	}
	if src := ef.bucketCountSource(); !src.flagSet && !src.envSet {
		return usagef("state the count the table's relays use with --bucket-count N")
	}
	count := e.cfg.BucketCount
	if e.found {
		_, err := fmt.Fprintf(stdout, "table %s already records %d buckets for key prefix %s (recorded by %s); a record never changes\n",
			e.cfg.Table, e.layout.BucketCount, e.layout.KeyPrefix, e.layout.RecordedBy)
		return err
	}
	coord, err := e.store.ReadCoordination(ctx)
	if err != nil {
		return err
	}
	pending, err := e.store.PendingBuckets(ctx, allBuckets(count))
	if err != nil {
		return err
	}
	f, err := findCounts(ctx, e.store, pending)
	if err != nil {
		return err
	}
	if err := liveFleetDisagrees(coord, f, count); err != nil {
		return err
	}
	for _, w := range f.warnings() {
		fmt.Fprintf(stdout, "note: %s\n", w)
	}
	if !*yes {
		_, err := fmt.Fprintf(stdout, "dry run: nothing was recorded; add --yes to record %d buckets for key prefix %s of table %s: every Spillway writer, relay and command then refuses another count\n",
			count, e.cfg.KeyPrefix, e.cfg.Table)
		return err
	}
	l, err := outboxddb.RecordLayout(ctx, e.client, e.cfg.TableOptions(), RecordedByCLI, "spillway layout record")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "recorded %d buckets for key prefix %s of table %s; writers created from now on check it (running ones at their next start), relays at their next full lease round\n",
		l.BucketCount, l.KeyPrefix, e.cfg.Table)
	return err
}

// liveFleetDisagrees refuses a count the relays running now contradict:
// one holds a lease beyond it, or they hold buckets 0..k-1 of a fleet that
// never claimed k..count-1.
func liveFleetDisagrees(coord lease.Coordination, f countFindings, count int) error {
	if len(f.StaleHeld) > 0 {
		return fmt.Errorf("refused, nothing was recorded: a relay holds lease items of buckets %v right now, beyond %d, so the running fleet uses a larger count; state that count, or stop those relays first", f.StaleHeld, count)
	}
	top, held := -1, false
	for _, l := range coord.Leases {
		top = max(top, l.Bucket)
		held = held || (l.Owner != "" && l.ExpiresAt.After(coord.ReadAt))
	}
	if held && top+1 < count {
		return fmt.Errorf("refused, nothing was recorded: the relays running now hold leases of buckets 0-%d and no relay ever claimed bucket %d, so they use %d buckets, not %d; state %d, or stop them first",
			top, top+1, top+1, count, top+1)
	}
	return nil
}

// runLayoutPrune removes the lease items beyond the recorded count.
func runLayoutPrune(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("layout prune", stdout)
	ef := addTableFlags(fs).withOutbox()
	yes := fs.Bool("yes", false, "remove them (without it: a dry run that lists them)")
	e, err := openLayout(ctx, fs, ef, args, true)
	if err != nil {
		return err
	}
	stale, err := e.store.StaleLeases(ctx)
	if err != nil {
		return err
	}
	var buckets []int
	for _, l := range stale {
		buckets = append(buckets, l.Bucket)
	}
	if len(buckets) == 0 {
		_, err := fmt.Fprintf(stdout, "no lease item lies beyond the bucket count %d\n", e.cfg.BucketCount)
		return err
	}
	if !*yes {
		_, err := fmt.Fprintf(stdout, "dry run: nothing was removed; add --yes to remove the lease items of buckets %v, beyond the bucket count %d (every check ignores them)\n", buckets, e.cfg.BucketCount)
		return err
	}
	removed, held, err := e.store.RemoveStaleLeases(ctx, buckets)
	if len(removed) > 0 {
		fmt.Fprintf(stdout, "removed the lease items of buckets %v\n", removed)
	}
	if err != nil {
		return err
	}
	if len(held) > 0 {
		return fmt.Errorf("a relay with a larger count holds the lease items of buckets %v: stop it, then run this again", held)
	}
	return nil
}

// runLayoutRehome moves stranded messages to the buckets the recorded
// count gives them.
func runLayoutRehome(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("layout rehome", stdout)
	ef := addTableFlags(fs).withOutbox()
	upTo := fs.Int("up-to", 0, "look in the buckets from the bucket count up to this one, exclusive (default: twice the count), and in every bucket with a lease item")
	yes := fs.Bool("yes", false, "move them (without it: a dry run that counts them)")
	e, err := openLayout(ctx, fs, ef, args, true)
	if err != nil {
		return err
	}
	n := e.cfg.BucketCount
	end := *upTo
	if end == 0 {
		end = 2 * n
	}
	if end <= n {
		return usagef("--up-to %d must be above the bucket count %d", end, n)
	}
	probe := make([]int, 0, end-n)
	for b := n; b < end; b++ {
		probe = append(probe, b)
	}
	stale, err := e.store.StaleLeases(ctx)
	if err != nil {
		return err
	}
	var held []int
	for _, l := range stale {
		if !slices.Contains(probe, l.Bucket) {
			probe = append(probe, l.Bucket)
		}
		if l.Owner != "" && l.ExpiresAt.After(e.store.Options().Clock.Now()) {
			held = append(held, l.Bucket)
		}
	}
	st, err := e.store.StrandedIn(ctx, probe)
	if err != nil {
		return err
	}
	if st.Messages == 0 {
		_, err := fmt.Fprintf(stdout, "no message waits in buckets %d-%d or in a bucket with a lease item beyond the count\n", n, end-1)
		return err
	}
	if !*yes {
		_, err := fmt.Fprintf(stdout, "dry run: nothing was moved; add --yes to move %d message(s) from buckets %v into the buckets %d buckets give their keys, in their order, with their ids\n",
			st.Messages, st.Buckets, n)
		return err
	}
	w, err := outboxddb.NewWriter(e.client, e.cfg.WriterOptions())
	if err != nil {
		return err
	}
	for _, b := range st.Buckets {
		if slices.Contains(held, b) {
			return fmt.Errorf("a relay with a larger count holds bucket %d and publishes its messages itself: stop it, then run this again", b)
		}
		moved, err := e.store.Rehome(ctx, b, w)
		fmt.Fprintf(stdout, "bucket %d: moved %d message(s)\n", b, moved)
		if err != nil {
			return err
		}
	}
	return nil
}

// runLayoutRestamp rewrites the stamp of messages written with another
// bucket count within the recorded one, so relays publish them in place.
func runLayoutRestamp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("layout restamp", stdout)
	ef := addTableFlags(fs).withOutbox()
	yes := fs.Bool("yes", false, "restamp them (without it: a dry run that names the buckets whose head is stamped otherwise)")
	e, err := openLayout(ctx, fs, ef, args, true)
	if err != nil {
		return err
	}
	n := e.cfg.BucketCount
	if !*yes {
		pending, err := e.store.PendingBuckets(ctx, allBuckets(n))
		if err != nil {
			return err
		}
		f, err := findCounts(ctx, e.store, pending)
		if err != nil {
			return err
		}
		if len(f.Stamped) == 0 {
			_, err := fmt.Fprintf(stdout, "no bucket's head message is stamped with another count than %d\n", n)
			return err
		}
		_, err = fmt.Fprintf(stdout, "dry run: nothing was restamped; the head messages of buckets %v were written with bucket count %s: add --yes to restamp every message of the table's %d buckets stamped otherwise, so relays publish them where they are\n",
			f.Stamped, joinInts(f.StampedCounts), n)
		return err
	}
	total, misplaced := 0, 0
	for b := range n {
		r, m, err := e.store.Restamp(ctx, b)
		total, misplaced = total+r, misplaced+m
		if r > 0 {
			fmt.Fprintf(stdout, "bucket %d: restamped %d message(s)\n", b, r)
		}
		if err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(stdout, "restamped %d message(s) to bucket count %d", total, n)
	if err == nil && misplaced > 0 {
		_, err = fmt.Fprintf(stdout, "; %d of them sit in another bucket than %d buckets give their key, so their key's messages were already split between two buckets", misplaced, n)
	}
	if err == nil {
		_, err = fmt.Fprintln(stdout)
	}
	return err
}

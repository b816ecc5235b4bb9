package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// statusView is what status prints (and --json emits).
type statusView struct {
	Table   string    `json:"table"`
	ReadAt  time.Time `json:"readAt"`
	Pending int64     `json:"pending"`
	Parked  int64     `json:"parked"`
	// Marked counts the parked messages marked for replay: a relay of
	// either poison policy publishes them when it holds their bucket.
	Marked int64 `json:"markedForReplay"`
	// HeldBackKeys counts the keys with parked messages, whose later
	// messages park behind them.
	HeldBackKeys int            `json:"heldBackKeys"`
	Buckets      []bucketStatus `json:"buckets"`
	Relays       []relayStatus  `json:"relays"`
	CountCap     int            `json:"countCap"`
	// Layout is the table's layout record for the key prefix; nil when it
	// has none.
	Layout *layoutView `json:"layout"`
	// countFindings say what lies beyond the bucket count and what was
	// written with another one.
	countFindings
	// Warnings say the findings, and a missing layout record, in
	// sentences.
	Warnings []string `json:"warnings,omitempty"`
}

type bucketStatus struct {
	Bucket int `json:"bucket"`
	// Pending is capped at CountCap.
	Pending int64 `json:"pending"`
	// Parked counts the messages quarantined in the bucket (capped at
	// CountCap): a relay does not publish them until they are replayed.
	Parked int64 `json:"parked"`
	// Marked counts the bucket's parked messages marked for replay.
	Marked         int64      `json:"markedForReplay"`
	HeldBackKeys   int        `json:"heldBackKeys"`
	OldestAgeSec   *float64   `json:"oldestAgeSeconds,omitempty"`
	Owner          string     `json:"owner,omitempty"`
	LeaseExpiresAt *time.Time `json:"leaseExpiresAt,omitempty"`
	LeaseExpired   bool       `json:"leaseExpired,omitempty"`
}

type relayStatus struct {
	RelayID  string    `json:"relayId"`
	LastSeen time.Time `json:"lastSeen"`
	Stopped  bool      `json:"stopped"`
	Active   bool      `json:"active"`
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", stdout)
	ef := addTableFlags(fs).withOutbox()
	asJSON := fs.Bool("json", false, "print JSON")
	verbose := fs.verbose("log the store's activity")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := ef.config()
	if err != nil {
		return usagef("%v", err)
	}
	client, err := dynamoClient(ctx, cfg)
	if err != nil {
		return err
	}
	lay, err := checkLayout(ctx, client, cfg.TableOptions(), &cfg.BucketCount, ef.bucketCountSource(), false)
	if err != nil {
		return err
	}
	opts := cfg.StoreOptions()
	opts.Logger = cliLogger(stderr, *verbose)
	// Parked messages wait for an operator, so status always counts them,
	// with their replay marks and keys (ParkedCounts: one query per
	// bucket; relays count them only under quarantine).
	opts.CountParked = false
	store, err := outboxddb.NewStore(client, opts)
	if err != nil {
		return err
	}
	view, err := readStatus(ctx, store, cfg.Table, cfg.LeaseDuration)
	if err != nil {
		return err
	}
	view.Layout = viewOfLayout(lay.Layout, lay.found)
	var pending []int
	for _, b := range view.Buckets {
		if b.Pending > 0 {
			pending = append(pending, b.Bucket)
		}
	}
	if view.countFindings, err = findCounts(ctx, store, pending); err != nil {
		return err
	}
	if lay.note != "" {
		view.Warnings = append(view.Warnings, lay.note)
	}
	view.Warnings = append(view.Warnings, view.countFindings.warnings()...)
	for _, w := range view.Warnings {
		opts.Logger.Warn(w)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(view)
	}
	return printStatus(stdout, view)
}

func readStatus(ctx context.Context, store *outboxddb.Store, table string, leaseDuration time.Duration) (statusView, error) {
	coord, err := store.ReadCoordination(ctx)
	if err != nil {
		return statusView{}, err
	}
	samples, err := store.SampleBuckets(ctx)
	if err != nil {
		return statusView{}, err
	}
	parked, err := store.ParkedCounts(ctx)
	if err != nil {
		return statusView{}, err
	}
	now := coord.ReadAt
	v := statusView{Table: table, ReadAt: now, CountCap: store.Options().PendingCountLimit}
	leases := map[int]lease.State{}
	for _, l := range coord.Leases {
		leases[l.Bucket] = l
	}
	for _, s := range samples {
		p := parked[s.Bucket]
		b := bucketStatus{Bucket: s.Bucket, Pending: s.Pending, Parked: p.Parked, Marked: p.Marked, HeldBackKeys: p.HeldBackKeys}
		v.Pending += s.Pending
		v.Parked += p.Parked
		v.Marked += p.Marked
		v.HeldBackKeys += p.HeldBackKeys
		if !s.Oldest.IsZero() {
			age := now.Sub(s.Oldest).Seconds()
			b.OldestAgeSec = &age
		}
		if l, ok := leases[s.Bucket]; ok && l.Owner != "" {
			b.Owner = l.Owner
			exp := l.ExpiresAt
			b.LeaseExpiresAt = &exp
			b.LeaseExpired = l.Expired(now)
		}
		v.Buckets = append(v.Buckets, b)
	}
	for _, r := range coord.Relays {
		v.Relays = append(v.Relays, relayStatus{RelayID: r.RelayID, LastSeen: r.LastSeen, Stopped: r.Stopped, Active: r.Active(now, leaseDuration)})
	}
	return v, nil
}

func printStatus(w io.Writer, v statusView) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "table %s at %s: %d pending, %d parked, %d marked for replay, %s held back (per-bucket counts capped at %d)\n",
		v.Table, v.ReadAt.Format(time.RFC3339), v.Pending, v.Parked, v.Marked, plural(v.HeldBackKeys, "key"), v.CountCap)
	if l := v.Layout; l != nil {
		fmt.Fprintf(tw, "layout: key prefix %s, %d buckets (recorded by %s)\n", l.KeyPrefix, l.BucketCount, cmp.Or(l.RecordedBy, "unknown"))
	} else {
		fmt.Fprintf(tw, "layout: no record; %d buckets assumed\n", v.BucketCount)
	}
	if v.Stranded > 0 {
		fmt.Fprintf(tw, "stranded: %d message(s) in buckets %v, beyond the bucket count, where no relay reads them\n", v.Stranded, v.StrandedBuckets)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "BUCKET\tPENDING\tPARKED\tMARKED\tOLDEST\tOWNER\tLEASE EXPIRES")
	for _, b := range v.Buckets {
		oldest, owner, expires := "-", "-", "-"
		if b.OldestAgeSec != nil {
			oldest = (time.Duration(*b.OldestAgeSec * float64(time.Second))).Round(time.Millisecond).String()
		}
		if b.Owner != "" {
			owner = b.Owner
			expires = b.LeaseExpiresAt.Sub(v.ReadAt).Round(time.Millisecond).String()
			if b.LeaseExpired {
				expires = "expired"
			} else {
				expires = "in " + expires
			}
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t%s\n", b.Bucket, b.Pending, b.Parked, b.Marked, oldest, owner, expires)
	}
	fmt.Fprintln(tw, "\nRELAY\tLAST SEEN\tSTATE")
	if len(v.Relays) == 0 {
		fmt.Fprintln(tw, "(none)\t\t")
	}
	for _, r := range v.Relays {
		state := "inactive"
		switch {
		case r.Stopped:
			state = "stopped"
		case r.Active:
			state = "active"
		}
		fmt.Fprintf(tw, "%s\t%s ago\t%s\n", r.RelayID, v.ReadAt.Sub(r.LastSeen).Round(time.Millisecond), state)
	}
	return tw.Flush()
}

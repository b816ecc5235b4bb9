package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// layoutRefusal is a command's bucket count that the table's layout record
// contradicts, said in one sentence with the flag or variable that set it.
type layoutRefusal struct {
	*outboxddb.LayoutError
	// source says where the count came from: "--bucket-count is 16".
	source string
	// fix says how to change it: "pass --bucket-count 8 or leave it out".
	fix string
	// writes: the command would have written.
	writes bool
}

func (e *layoutRefusal) Error() string {
	refused := ""
	if e.writes {
		refused = "refused, nothing was written: "
	}
	return fmt.Sprintf("%stable %s records bucket count %d for key prefix %s but %s; %s (a new count needs a new generation: docs/operations.md#changing-the-bucket-count)",
		refused, e.Table, e.Recorded, e.KeyPrefix, e.source, e.fix)
}

func (e *layoutRefusal) Unwrap() error { return e.LayoutError }

// countFlag is how a bucket count reaches a command: its flag and its
// variable, and which of them was given.
type countFlag struct {
	flag, env       string
	flagSet, envSet bool
}

// bucketCountSource says whether the command's --bucket-count was given,
// on the command line or in SPILLWAY_BUCKET_COUNT.
func (f *endpointFlags) bucketCountSource() countFlag {
	set := f.set()
	return countFlag{flag: "bucket-count", env: outboxconf.EnvBucketCount,
		flagSet: set["bucket-count"] || set["count"], envSet: os.Getenv(outboxconf.EnvBucketCount) != ""}
}

// tableLayout is what checkLayout read: the record, when found, or the
// note a command prints on a table without one.
type tableLayout struct {
	outboxddb.Layout
	found bool
	note  string
}

// checkLayout checks a command's bucket count for one key prefix against
// the table's layout record (one strongly consistent read), before the
// command reads or writes anything else. A count that was given must be the
// recorded one, else a *layoutRefusal; a count that was not given becomes
// the recorded one. A table without a record keeps *count.
func checkLayout(ctx context.Context, client outboxddb.Client, opts outboxddb.Options, count *int, src countFlag, writes bool) (tableLayout, error) {
	opts.BucketCount = *count
	l, found, err := outboxddb.ReadLayout(ctx, client, opts)
	if err != nil {
		return tableLayout{}, err
	}
	if !found {
		return tableLayout{note: noRecordNote(opts.TableName, opts.KeyPrefix, *count)}, nil
	}
	lay := tableLayout{Layout: l, found: true}
	var le *outboxddb.LayoutError
	if !errors.As(l.Check(opts.TableName, "command", *count), &le) {
		return lay, nil
	}
	switch {
	case src.flagSet:
		return lay, &layoutRefusal{LayoutError: le, writes: writes,
			source: fmt.Sprintf("--%s is %d", src.flag, *count),
			fix:    fmt.Sprintf("pass --%s %d or leave it out", src.flag, l.BucketCount)}
	case src.envSet:
		return lay, &layoutRefusal{LayoutError: le, writes: writes,
			source: fmt.Sprintf("%s is %d", src.env, *count),
			fix:    fmt.Sprintf("set %s=%d or unset it", src.env, l.BucketCount)}
	}
	*count = l.BucketCount
	return lay, nil
}

// noRecordNote is the warning of a command on a table without a layout
// record.
func noRecordNote(table, prefix string, count int) string {
	return fmt.Sprintf("table %s has no layout record for key prefix %s, so nothing checks that %d is its bucket count: "+
		"state the count its relays use once with `spillway layout record --bucket-count N --yes` (docs/operations.md#the-layout-record)", table, prefix, count)
}

// applyLayout is checkLayout for a command configured by cfg: cfg takes
// the recorded count when none was given, and the note goes to stderr as a
// warning.
func (f *endpointFlags) applyLayout(ctx context.Context, client outboxddb.Client, cfg *outboxlambda.Config, writes bool, stderr io.Writer) error {
	lay, err := checkLayout(ctx, client, cfg.TableOptions(), &cfg.BucketCount, f.bucketCountSource(), writes)
	if lay.note != "" {
		fmt.Fprintf(stderr, "warning: %s\n", lay.note)
	}
	return err
}

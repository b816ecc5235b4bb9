package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// errRefused marks a request the enqueue API refused; the response was
// printed already.
var errRefused = errors.New("request refused; nothing was written")

func runEnqueue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("enqueue", stdout)
	ef := addTableFlags(fs).withOutbox()
	file := fs.String("file", "-", "request JSON file, - for stdin (same format as the enqueue function)")
	verbose := fs.verbose("log the enqueue function's activity")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := ef.config()
	if err != nil {
		return usagef("%v", err)
	}
	var in io.Reader = os.Stdin
	if *file != "-" {
		f, err := os.Open(*file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	payload, err := io.ReadAll(in)
	if err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	if err := checkJSON(payload); err != nil {
		return fmt.Errorf("request %s: %w; nothing was written", cmp.Or(strings.TrimPrefix(*file, "-"), "on stdin"), err)
	}
	client, err := dynamoClient(ctx, cfg)
	if err != nil {
		return err
	}
	// The response and the returned error say what happened; the function's
	// own log lines would say it a second time.
	var log *slog.Logger
	if *verbose {
		log = cliLogger(stderr, true)
	} else {
		log = slog.New(slog.DiscardHandler)
	}
	lay, err := checkLayout(ctx, client, cfg.TableOptions(), &cfg.BucketCount, ef.bucketCountSource(), true)
	if err != nil {
		return err
	}
	opts := cfg.WriterOptions()
	opts.Logger = log
	if !lay.found {
		// No record to check against: what the items show stands in.
		fmt.Fprintf(stderr, "warning: %s\n", lay.note)
		if err := refuseOtherBucketCount(ctx, client, opts.Options); err != nil {
			return err
		}
	}
	writer, err := outboxddb.NewWriter(client, opts)
	if err != nil {
		return err
	}
	h, err := outboxlambda.NewEnqueueHandler(outboxlambda.EnqueueHandlerConfig{Config: cfg, Writer: writer, Logger: log})
	if err != nil {
		return err
	}
	resp, err := h.Handle(ctx, payload)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(resp); err != nil {
		return err
	}
	if resp.Error != "" {
		return errRefused
	}
	return nil
}

// checkJSON reports where a request stops being JSON: the enqueue function
// answers only that it is not a JSON object, which leaves a truncated file
// to be searched by hand.
func checkJSON(payload []byte) error {
	var v any
	err := json.Unmarshal(payload, &v)
	var syn *json.SyntaxError
	if !errors.As(err, &syn) {
		// Valid JSON of the wrong shape is the enqueue function's to refuse.
		return nil
	}
	line, col := 1, 1
	for _, b := range payload[:min(int(syn.Offset), len(payload))] {
		if b == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Errorf("is not valid JSON at line %d, column %d (byte %d of %d): %v", line, col, syn.Offset, len(payload), syn)
}

// refuseOtherBucketCount refuses, on a table without a layout record, a
// bucket count its items contradict: messages beyond the count or stamped
// with another one, as status reports them (stale lease items say nothing
// about writers and are ignored). It costs a pending probe per bucket and
// what findCounts costs.
func refuseOtherBucketCount(ctx context.Context, client outboxddb.Client, opts outboxddb.Options) error {
	store, err := outboxddb.NewStore(client, outboxddb.StoreOptions{Options: opts})
	if err != nil {
		return err
	}
	pending, err := store.PendingBuckets(ctx, allBuckets(opts.BucketCount))
	if err != nil {
		return err
	}
	f, err := findCounts(ctx, store, pending)
	if err != nil || !f.writersDisagree() {
		return err
	}
	var seen []string
	if len(f.Stamped) > 0 {
		seen = append(seen, fmt.Sprintf("messages written with bucket count %s head buckets %v", joinInts(f.StampedCounts), f.Stamped))
	}
	if f.Stranded > 0 {
		seen = append(seen, fmt.Sprintf("messages wait in buckets %v beyond it", f.StrandedBuckets))
	}
	return fmt.Errorf("refused, nothing was written: the table's items show writers with another bucket count than %d (%s); "+
		"pass the count the table's relays use with --bucket-count and record it once with `spillway layout record --bucket-count N --yes` (docs/operations.md#the-layout-record)",
		opts.BucketCount, strings.Join(seen, ", and "))
}

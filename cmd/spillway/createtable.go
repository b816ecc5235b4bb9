package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

func runCreateTable(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("create-table", stdout)
	ef := addTableFlags(fs).withOutbox()
	wait := fs.Duration("wait", 5*time.Minute, "give up when the table is not active after this long")
	progress := fs.Duration("progress", 5*time.Second, "interval between lines saying what the table is waiting for (0: none)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *wait <= 0 {
		return usagef("--wait must be positive")
	}
	cfg, err := ef.config()
	if err != nil {
		return usagef("%v", err)
	}
	client, err := dynamoClient(ctx, cfg)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, *wait)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- outboxddb.CreateIfNotExists(wctx, client, cfg.TableOptions()) }()
	err = awaitTable(wctx, client, cfg.Table, done, *progress, stdout)
	var le *outboxddb.LayoutError
	switch {
	case errors.As(err, &le):
		// An existing table that records another count: refused when a
		// count was given, shown otherwise.
		if src := ef.bucketCountSource(); src.flagSet || src.envSet {
			_, err := checkLayout(ctx, client, cfg.TableOptions(), &cfg.BucketCount, src, true)
			return err
		}
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Errorf("table %s is not active after %s (--wait): %w", cfg.Table, *wait, err)
	case err != nil:
		return err
	}
	l, found, err := outboxddb.ReadLayout(ctx, client, cfg.TableOptions())
	switch {
	case err != nil:
		return err
	case !found:
		_, err = fmt.Fprintf(stdout, "table %s is active; warning: %s\n", cfg.Table, noRecordNote(cfg.Table, cfg.KeyPrefix, cfg.BucketCount))
	default:
		_, err = fmt.Fprintf(stdout, "table %s is active; its layout record gives key prefix %s %d buckets (recorded by %s)\n", cfg.Table, l.KeyPrefix, l.BucketCount, l.RecordedBy)
	}
	return err
}

// awaitTable waits for the creation's outcome, printing the table's status
// every interval meanwhile.
func awaitTable(ctx context.Context, client *dynamodb.Client, table string, done <-chan error, every time.Duration, stdout io.Writer) error {
	if every <= 0 {
		return <-done
	}
	start := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			status := "not visible yet"
			if out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}); err == nil && out.Table != nil {
				status = string(out.Table.TableStatus)
			}
			fmt.Fprintf(stdout, "%6.1fs  waiting for table %s to become ACTIVE (status %s)\n", time.Since(start).Seconds(), table, status)
		}
	}
}

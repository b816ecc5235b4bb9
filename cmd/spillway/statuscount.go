package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// probeBucketCount is the bucket count of the store status uses to look
// beyond the configured count: its coordination view keeps every lease item
// below it.
const probeBucketCount = 1 << 16

// countWarnings looks for signs that the table is used with another bucket
// count than the one status was given: lease items and messages in buckets
// beyond the count, and messages stamped with another count at the head of a
// pending bucket. It costs one coordination query, one head query per bucket
// in [count, 2*count) and one per pending bucket.
func countWarnings(ctx context.Context, client outboxddb.Client, opts outboxddb.Options, v statusView) ([]string, error) {
	count := opts.BucketCount
	popts := opts
	popts.BucketCount = probeBucketCount
	probe, err := outboxddb.NewStore(client, popts)
	if err != nil {
		return nil, err
	}
	coord, err := probe.ReadCoordination(ctx)
	if err != nil {
		return nil, err
	}
	var beyond []int
	for _, l := range coord.Leases {
		if l.Bucket >= count {
			beyond = append(beyond, l.Bucket)
		}
	}
	var out []string
	if len(beyond) > 0 {
		out = append(out, fmt.Sprintf("lease items for buckets %v lie beyond the bucket count %d: the table was (or is) used with a larger count", beyond, count))
	}
	extra := make([]int, count)
	for i := range extra {
		extra[i] = count + i
	}
	pendingBeyond, err := probe.PendingBuckets(ctx, extra)
	if err != nil {
		return nil, err
	}
	if len(pendingBeyond) > 0 {
		out = append(out, fmt.Sprintf("messages wait in buckets %v, beyond the bucket count %d: a writer uses a larger count", pendingBeyond, count))
	}
	store, err := outboxddb.NewStore(client, opts)
	if err != nil {
		return nil, err
	}
	for _, b := range v.Buckets {
		if b.Pending == 0 {
			continue
		}
		if _, err := store.FetchBatch(ctx, b.Bucket, 1); errors.Is(err, outbox.ErrMisconfigured) {
			out = append(out, fmt.Sprintf("bucket %d: %v", b.Bucket, err))
		}
	}
	return out, nil
}

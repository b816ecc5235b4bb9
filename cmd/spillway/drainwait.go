package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// waitReporter prints who holds the buckets a drain waits for, once per
// change, so a drain blocked by a dead process's unexpired leases says so.
type waitReporter struct {
	out  io.Writer
	mu   sync.Mutex
	last string
}

// report reads the leases (one consistent query of the coordination
// partition) and prints the holders of pending buckets; nil pending means
// every leased bucket.
func (w *waitReporter) report(ctx context.Context, store *outboxddb.Store, pending []int) {
	coord, err := store.ReadCoordination(ctx)
	if err != nil {
		return
	}
	held := map[string][]int{}
	ends := map[string]time.Time{}
	for _, l := range coord.Leases {
		if l.Owner == "" || l.Expired(coord.ReadAt) || (pending != nil && !slices.Contains(pending, l.Bucket)) {
			continue
		}
		held[l.Owner] = append(held[l.Owner], l.Bucket)
		if l.ExpiresAt.After(ends[l.Owner]) {
			ends[l.Owner] = l.ExpiresAt
		}
	}
	var parts []string
	for _, owner := range slices.Sorted(maps.Keys(held)) {
		parts = append(parts, fmt.Sprintf("buckets %v held by %s (lease ends in %s)", held[owner], owner,
			ends[owner].Sub(coord.ReadAt).Round(100*time.Millisecond)))
	}
	line := fmt.Sprintf("waiting for buckets %v: no live lease holds them; retrying", pending)
	switch {
	case pending == nil && len(parts) == 0:
		line = "no live lease holds the pending buckets"
	case len(parts) > 0:
		line = "waiting: " + strings.Join(parts, "; ")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if line == w.last {
		return
	}
	w.last = line
	fmt.Fprintln(w.out, line)
}

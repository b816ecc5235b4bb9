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
	out io.Writer
	// parkAfter is the relays' PoisonMaxAttempts under the quarantine
	// policy, 0 under block: what the stuck line suggests.
	parkAfter int
	mu        sync.Mutex
	last      string
}

// stuck prints, once per change, the buckets whose head message keeps
// failing and the last error: the real cause of a drain that does not
// finish.
func (w *waitReporter) stuck(stuck []stuckBucket) {
	if len(stuck) == 0 {
		return
	}
	w.print(w.stuckLine(stuck))
}

// stuckLine names the stuck buckets and the way out: under block, the
// quarantine policy; under quarantine, the park that comes after
// PoisonMaxAttempts failures (a message Kafka refuses for good is parked at
// once and never reported stuck).
func (w *waitReporter) stuckLine(stuck []stuckBucket) string {
	parts := make([]string, len(stuck))
	for i, s := range stuck {
		parts[i] = fmt.Sprintf("bucket %d is stuck on its head message: %s", s.Bucket, s.Error)
	}
	hint := "or relay with SPILLWAY_POISON_POLICY=quarantine to park it; see spillway help parked"
	if w.parkAfter > 0 {
		hint = fmt.Sprintf("or wait: under SPILLWAY_POISON_POLICY=quarantine it is parked after %d failed attempts (SPILLWAY_POISON_MAX_ATTEMPTS)", w.parkAfter)
	}
	return strings.Join(parts, "\n") + "\n(the relays keep retrying it, and nothing behind it in its bucket moves: fix the cause, " + hint + ")"
}

// report reads the leases (one consistent query of the coordination
// partition) and prints the holders of pending buckets; nil pending means
// every leased bucket. Stuck buckets are reported with their error
// instead.
func (w *waitReporter) report(ctx context.Context, store *outboxddb.Store, pending []int, stuck []stuckBucket) {
	if len(stuck) > 0 {
		w.print(w.stuckLine(stuck))
		return
	}
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
	w.print(line)
}

// print prints line unless it was the last one printed.
func (w *waitReporter) print(line string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if line == w.last {
		return
	}
	w.last = line
	fmt.Fprintln(w.out, line)
}

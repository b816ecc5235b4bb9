package outboxkafka

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

func TestSharedFlushRounds(t *testing.T) {
	t.Parallel()
	// Publishes that reach the flusher while a Flush runs join the round after
	// it before they wait, so they all go out in the next Flush, one produce
	// request. Were they to join as each wakes, the first awake would start a
	// Flush alone, and with produce round trips of milliseconds one relay's
	// buckets would produce one after another (issue 36 §2). Every key still
	// reads in its order.
	t.Run("PublishWaitersForARunningFlushShareTheNext", func(t *testing.T) {
		t.Parallel()
		s := newSharedFlushCluster(t)
		p := newPublisher(t, s.c)
		for i, topic := range []string{"small", "held"} {
			if res := p.PublishDetailed(t.Context(), []outbox.Message{message(t, int64(i+1), topic, []byte("w"), []byte("v"), nil, nil)}); res.Err != nil {
				t.Fatal(res.Err)
			}
		}
		s.mu.Lock()
		s.carried = nil
		s.mu.Unlock()
		keys := []string{"a", "b", "c"}
		var publishes [][]outbox.Message
		for k, key := range keys {
			var msgs []outbox.Message
			for i := range 2 {
				msgs = append(msgs, message(t, int64(10*(k+1)+i), "small", []byte(key), []byte(fmt.Sprint(i)), nil, nil))
			}
			publishes = append(publishes, msgs)
		}

		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		release := make(chan struct{})
		s.hold <- release
		held := make(chan Result, 1)
		go func() {
			held <- p.PublishDetailed(ctx, []outbox.Message{message(t, 99, "held", []byte("h"), []byte("v"), nil, nil)})
		}()
		waitUntil(t, "the held publish reached the broker", func() bool { return len(s.hold) == 0 })
		results := make([]Result, len(publishes))
		var wg sync.WaitGroup
		for i, msgs := range publishes {
			wg.Go(func() { results[i] = p.PublishDetailed(ctx, msgs) })
		}
		waitUntil(t, "every publish waiting for the held Flush joined the round after it", func() bool {
			p.flusher.mu.Lock()
			defer p.flusher.mu.Unlock()
			return p.flusher.running != nil && p.flusher.next != nil && p.flusher.next.handing == len(publishes)
		})
		close(release)
		wg.Wait()
		if r := <-held; r.Err != nil {
			t.Fatalf("held publish: %v", r.Err)
		}
		for i, r := range results {
			if r.Err != nil || r.Acked != len(publishes[i]) {
				t.Fatalf("publish %d: acked %d of %d, err %v", i, r.Acked, len(publishes[i]), r.Err)
			}
		}
		s.mu.Lock()
		carried := slices.Clone(s.carried)
		s.mu.Unlock()
		if len(carried) != 1 || carried[0] != 2*len(keys) {
			t.Fatalf("produce requests for small carried %v records, want one request with all %d", carried, 2*len(keys))
		}
		order := map[string][]string{}
		for _, r := range consume(t, s.c.ListenAddrs(), "small", 1+2*len(keys)) {
			order[string(r.Key)] = append(order[string(r.Key)], string(r.Value))
		}
		for _, key := range keys {
			if got := order[key]; !slices.Equal(got, []string{"0", "1"}) {
				t.Fatalf("key %s reads %v, want [0 1]", key, got)
			}
		}
	})
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not so after 10s: %s", what)
		}
	}
}

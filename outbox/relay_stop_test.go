package outbox_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// topicLog is a Kafka partition as consumers read it: every record in the
// order it landed, from whichever relay published it.
type topicLog struct {
	mu      sync.Mutex
	records []outbox.Message
}

func (l *topicLog) append(msgs []outbox.Message) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, msgs...)
}

// firstSeen returns the ids of each key's records in the order a consumer
// that skips duplicates applies them.
func (l *topicLog) firstSeen() map[string][]outbox.MessageID {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := map[outbox.MessageID]bool{}
	out := map[string][]outbox.MessageID{}
	for _, m := range l.records {
		if !seen[m.ID] {
			seen[m.ID] = true
			out[string(m.Key)] = append(out[string(m.Key)], m.ID)
		}
	}
	return out
}

// landing is a Publisher whose records land in log after delay, whatever
// its ctx says: a broker that holds a produce request, with the records
// already on the wire.
type landing struct {
	log   *topicLog
	delay time.Duration
	// started closes when the first publish is handed over.
	started chan struct{}
	once    sync.Once
}

func (p *landing) Init(context.Context) error { return nil }

func (p *landing) Publish(_ context.Context, msgs []outbox.Message) (int, error) {
	p.once.Do(func() { close(p.started) })
	time.Sleep(p.delay)
	p.log.append(msgs)
	return len(msgs), nil
}

// errorLog collects the relay's log lines at Error.
type errorLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *errorLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *errorLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *errorLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelError}))
}

func TestRelayStop(t *testing.T) {
	// The in-process relay of a service stopped by its context's deadline
	// (context.WithTimeout, no RunInput.Deadline): the publishes in flight
	// settle, their rows are deleted and the leases released when the
	// last of them answers, 300 ms after the deadline; nothing is logged
	// as an error.
	t.Run("ContextEndSettlesThePublishesInFlightAndReleases", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var errs errorLog
			e := newRelayEnv(t, 4, func(c *outbox.RelayConfig) { c.Logger = errs.logger() })
			for b := range 4 {
				for i := range 35 {
					e.store.add(b, string(rune('a'+b))+string(rune('a'+i%3)))
				}
			}
			e.pub.delay = 400 * time.Millisecond
			var releasedAt time.Time
			e.store.onRelease = func() { releasedAt = time.Now() }
			ctx, cancel := context.WithTimeout(context.Background(), 1100*time.Millisecond)
			defer cancel()
			res, err := e.relay.Run(ctx, outbox.RunInput{})
			if err != nil || res.Reason != outbox.StopCancelled {
				t.Fatalf("run: %+v, %v", res, err)
			}
			// Batches of 10 answer at 0.4, 0.8 and 1.2 s: the third was in
			// flight at 1.1 s, the fourth never starts.
			if took := releasedAt.Sub(t0.Add(1100 * time.Millisecond)); took != 100*time.Millisecond {
				t.Fatalf("leases released %v after the context ended, want 100 ms (the publish in flight)", took)
			}
			if res.Published != 120 || res.Deleted != 120 || e.store.pending() != 20 {
				t.Fatalf("published %d, deleted %d, %d rows left: every acknowledged row must be deleted", res.Published, res.Deleted, e.store.pending())
			}
			for b := range 4 {
				if o := e.store.leaseOwner(b); o != "" {
					t.Fatalf("bucket %d still held by %q", b, o)
				}
			}
			if s := errs.String(); s != "" {
				t.Fatalf("a clean stop logged errors:\n%s", s)
			}
		})
	})

	// A publish whose records are on the wire and whose broker does not
	// answer cannot settle: at the stop's settle point (StopTimeout 5 s: 4 s
	// after the cancellation, plus settleGrace) the stop releases the
	// leases without it; relay-b takes the bucket over at once and publishes
	// the rows again with the messages committed since; the stuck publish
	// lands a minute later, and relay-a, which holds no lease any more,
	// deletes nothing. Per key, a consumer that skips duplicates applies
	// every message once, in commit order.
	t.Run("AStuckPublishIsLeftBehindAndKeyOrderHolds", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, nil)
			var want []outbox.Message
			for i := range 6 {
				want = append(want, e.store.add(0, []string{"k1", "k2", "k3"}[i%3]))
			}
			log := &topicLog{}
			stuck := &landing{log: log, delay: time.Minute, started: make(chan struct{})}
			a, err := outbox.NewRelay(outbox.RelayConfig{
				Options: outbox.RelayOptions{RelayID: "relay-a", BucketCount: 1, BatchSize: 10},
				Store:   e.store.observed, Publisher: stuck, Clock: e.clock, Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			released := make(chan time.Time, 2)
			e.store.onRelease = func() { released <- time.Now() }
			done := make(chan outbox.RunResult)
			go func() {
				res, _ := a.Run(ctx, outbox.RunInput{})
				done <- res
			}()
			<-stuck.started
			time.Sleep(100 * time.Millisecond)
			cancelledAt := time.Now()
			cancel()
			releasedAt := <-released
			if took := releasedAt.Sub(cancelledAt); took != 4*time.Second+20*time.Millisecond {
				t.Fatalf("released %v after the cancellation, want 4.02 s (the settle point, then settleGrace)", took)
			}
			if o := e.store.leaseOwner(0); o != "" {
				t.Fatalf("bucket 0 held by %q after the release", o)
			}
			for i := range 3 {
				want = append(want, e.store.add(0, []string{"k1", "k2", "k3"}[i]))
			}
			b, err := outbox.NewRelay(outbox.RelayConfig{
				Options: outbox.RelayOptions{RelayID: "relay-b", BucketCount: 1, BatchSize: 10},
				Store:   e.store.observed, Publisher: &landing{log: log, started: make(chan struct{})}, Clock: e.clock, Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			if res, err := b.Run(context.Background(), outbox.RunInput{}); err != nil || res.Published != 9 || res.Deleted != 9 {
				t.Fatalf("relay-b: %+v, %v", res, err)
			}
			res := <-done
			if res.Deleted != 0 || res.Reason != outbox.StopCancelled || len(res.Released) != 1 {
				t.Fatalf("relay-a after its stuck publish landed: %+v", res)
			}
			if got := len(log.records); got != 15 {
				t.Fatalf("%d records in the topic, want 9 from relay-b and relay-a's 6 duplicates", got)
			}
			wantByKey := map[string][]outbox.MessageID{}
			for _, m := range want {
				wantByKey[string(m.Key)] = append(wantByKey[string(m.Key)], m.ID)
			}
			got := log.firstSeen()
			for k, ids := range wantByKey {
				if !slicesEqual(got[k], ids) {
					t.Fatalf("key %s applied as %v, want %v (commit order)", k, got[k], ids)
				}
			}
		})
	})

	// A continuation wake-up to a Lambda API that accepts and never answers
	// (a relay in a VPC without a route to it) ends at the stop's returnBy,
	// 0.35 s before a 4 s deadline. Under a 900 ms deadline a publish that
	// Kafka does not answer is cut at the settle point (750 ms) and the
	// release leaves 75 ms before returnBy, less than minWakeUp: the
	// wake-up is not sent at all.
	t.Run("TheWakeUpEndsBeforeTheDeadline", func(t *testing.T) {
		for _, tc := range []struct {
			name     string
			deadline time.Duration
			kafka    time.Duration
			calls    int
		}{{"SentAndCut", 4 * time.Second, 0, 1}, {"SkippedWithoutTime", 900 * time.Millisecond, time.Minute, 0}} {
			t.Run(tc.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					hang := &hangingNotifier{}
					e := newRelayEnv(t, 1, func(c *outbox.RelayConfig) {
						c.Notifier = hang
						c.Options.IdleTimeout = 10 * time.Millisecond
					})
					e.store.add(0, "k")
					e.store.onRelease = func() { e.store.add(0, "late") }
					e.pub.delay = tc.kafka
					deadline := t0.Add(tc.deadline)
					res := e.run(t, outbox.RunInput{Trigger: outbox.TriggerWake, Buckets: []int{0}, Deadline: deadline})
					if hang.count() != tc.calls || res.WakeUpSent || len(res.WorkLeft) != 1 {
						t.Fatalf("notify calls %d, result %+v", hang.count(), res)
					}
					margin := tc.deadline / 3
					returnBy := deadline.Add(-min(margin/2, time.Second) / 2)
					if res.Ended.After(returnBy) {
						t.Fatalf("the run ended at %v, after its returnBy %v", res.Ended.Sub(t0), returnBy.Sub(t0))
					}
				})
			})
		}
	})
}

// hangingNotifier accepts every wake-up and never answers: it returns only
// when ctx ends.
type hangingNotifier struct {
	mu    sync.Mutex
	calls int
}

func (n *hangingNotifier) Notify(ctx context.Context, _ outbox.WakeUp) error {
	n.mu.Lock()
	n.calls++
	n.mu.Unlock()
	<-ctx.Done()
	return ctx.Err()
}

func (n *hangingNotifier) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.calls
}

func slicesEqual(a, b []outbox.MessageID) bool {
	return strings.Join(idStrings(a), ",") == strings.Join(idStrings(b), ",")
}

func idStrings(ids []outbox.MessageID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

package outboxkafka

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway-dev/spillway/outbox"
)

// logBuffer is a concurrency-safe buffer for a test logger.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestDoorbell(t *testing.T) {
	t.Parallel()
	const topic = "spillway-doorbell"
	// setup returns a listener on a publisher of c and a ringer, both for
	// the outbox of prefix.
	setup := func(t *testing.T, c *kfake.Cluster, prefix string, log *slog.Logger) (*Listener, *Ringer) {
		t.Helper()
		l, err := newPublisher(t, c).Listener(DoorbellConfig{Topic: topic, KeyPrefix: prefix, Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		r, err := NewRinger(Config{Brokers: c.ListenAddrs(), ExtraOpts: fastRetries()}, DoorbellConfig{Topic: topic, KeyPrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		return l, r
	}
	// rung waits for the listener's signal and returns what it took.
	rung := func(t *testing.T, l *Listener) []int {
		t.Helper()
		select {
		case <-l.Rung():
			return l.Take()
		case <-time.After(10 * time.Second):
			t.Fatal("no ring within 10 s")
			return nil
		}
	}

	t.Run("RingReachesTheListenerOfItsBucket", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, kfake.SeedTopics(4, topic))
		l, r := setup(t, c, "OUTBOX", nil)
		l.Listen([]int{3, 6})
		if err := r.Ring(t.Context(), []int{5, 3}); err != nil {
			t.Fatal(err)
		}
		if got := rung(t, l); !slices.Equal(got, []int{3}) {
			t.Fatalf("took %v, want [3]: bucket 5 is not listened for", got)
		}
		if err := r.Flush(t.Context()); err != nil || r.Failed() != 0 {
			t.Fatalf("flush %v, %d rings failed", err, r.Failed())
		}
	})

	// A ring produced while the listener looks up where to start (between
	// its two offset lookups) is fetched: the end is listed before the
	// ring by time, so the later lookup finds it. Listed the other way
	// round, the by-time lookup found no ring and the end came after it.
	t.Run("RingBetweenTheOffsetLookupsIsFetched", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, kfake.SeedTopics(1, topic))
		l, r := setup(t, c, "OUTBOX", nil)
		lookups := 0
		c.ControlKey(int16(kmsg.ListOffsets), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			if lookups++; lookups == 2 {
				c.SleepControl(func() {
					if err := r.Ring(t.Context(), []int{4}); err != nil {
						t.Error(err)
					}
					if err := r.Flush(t.Context()); err != nil {
						t.Error(err)
					}
				})
			}
			return nil, nil, false
		})
		l.Listen([]int{4})
		if got := rung(t, l); !slices.Equal(got, []int{4}) {
			t.Fatalf("took %v, want [4]", got)
		}
	})

	// A commit made while the relay subscribes rings before the fetch
	// starts: the listener fetches from DoorbellLookBack before Listen.
	t.Run("LooksBackAtRingsMadeJustBeforeListening", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, kfake.SeedTopics(2, topic))
		l, r := setup(t, c, "OUTBOX", nil)
		if err := r.Ring(t.Context(), []int{2}); err != nil {
			t.Fatal(err)
		}
		if err := r.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		l.Listen([]int{2})
		if got := rung(t, l); !slices.Equal(got, []int{2}) {
			t.Fatalf("took %v, want [2]", got)
		}
	})

	// Outboxes (and generations) share a topic: a listener takes only the
	// rings of its own key prefix.
	t.Run("TakesOnlyItsOutboxsRings", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, kfake.SeedTopics(1, topic))
		l, r := setup(t, c, "OUTBOX", nil)
		_, other := setup(t, c, "OUTBOX2", nil)
		l.Listen([]int{1, 2})
		if err := other.Ring(t.Context(), []int{1}); err != nil {
			t.Fatal(err)
		}
		if err := other.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := r.Ring(t.Context(), []int{2}); err != nil {
			t.Fatal(err)
		}
		if got := rung(t, l); !slices.Equal(got, []int{2}) {
			t.Fatalf("took %v, want [2]: OUTBOX2's ring of bucket 1 is another outbox's", got)
		}
	})

	// Without the topic the relay polls: Listen does not wait, and the
	// listener says once why it hears nothing.
	t.Run("MissingTopicIsLoggedNotFatal", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t)
		var logs logBuffer
		l, _ := setup(t, c, "OUTBOX", slog.New(slog.NewTextHandler(&logs, nil)))
		start := time.Now()
		l.Listen([]int{0})
		if took := time.Since(start); took > time.Second {
			t.Fatalf("Listen took %v", took)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(logs.String(), "the doorbell topic cannot be read") {
			if time.Now().After(deadline) {
				t.Fatalf("no warning within 10 s; logs:\n%s", logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	})

	t.Run("NeedsATopicAndAKeyPrefix", func(t *testing.T) {
		t.Parallel()
		for _, bell := range []DoorbellConfig{{KeyPrefix: "OUTBOX"}, {Topic: topic}} {
			if _, err := NewRinger(Config{Brokers: []string{"127.0.0.1:9092"}}, bell); !errors.Is(err, outbox.ErrMisconfigured) {
				t.Errorf("NewRinger(%+v) = %v, want a misconfiguration", bell, err)
			}
		}
		if _, err := NewRinger(Config{}, DoorbellConfig{Topic: topic, KeyPrefix: "OUTBOX"}); !errors.Is(err, outbox.ErrMisconfigured) {
			t.Errorf("a ringer without brokers: %v, want a misconfiguration", err)
		}
	})

	t.Run("RingKeysRoundTrip", func(t *testing.T) {
		t.Parallel()
		cfg := DoorbellConfig{KeyPrefix: "OUTBOX"}
		for _, b := range []int{0, 7, 1023} {
			if got, ok := cfg.ringBucket(cfg.ringKey(b)); !ok || got != b {
				t.Errorf("bucket %d: key %q reads back %d, %v", b, cfg.ringKey(b), got, ok)
			}
		}
		for _, key := range []string{"OUTBOX#", "OUTBOX#-1", "OUTBOX#x", "OUTBOX2#1", "OUTBOX"} {
			if b, ok := cfg.ringBucket([]byte(key)); ok {
				t.Errorf("key %q read as bucket %d", key, b)
			}
		}
	})
}

package outbox_test

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// event is one hook call as the recorder keeps it: the method's name and
// its arguments.
type event struct {
	kind          string
	relayID       string
	bucket, count int
	dur           time.Duration
	loss          outbox.LossReason
	park          outbox.ParkReason
	res           outbox.RunResult
	err           error
}

// recorder is a hook implementing every relay hook interface, keeping each
// call.
type recorder struct {
	mu     sync.Mutex
	events []event
}

var (
	_ outbox.HookLease    = (*recorder)(nil)
	_ outbox.HookBatch    = (*recorder)(nil)
	_ outbox.HookPark     = (*recorder)(nil)
	_ outbox.HookRun      = (*recorder)(nil)
	_ outbox.HookStranded = (*recorder)(nil)
	_ outbox.HookWakeUp   = (*recorder)(nil)
)

func (r *recorder) add(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) OnRound(id string, took time.Duration, _ lease.Acquisition, err error) {
	r.add(event{kind: "round", relayID: id, dur: took, err: err})
}

func (r *recorder) OnLeases(id string, owned, claimed, released int) {
	r.add(event{kind: "leases", relayID: id, count: owned})
	if claimed > 0 {
		r.add(event{kind: "claim", relayID: id, count: claimed})
	}
	if released > 0 {
		r.add(event{kind: "release", relayID: id, count: released})
	}
}

func (r *recorder) OnLeaseLost(id string, lost int, why outbox.LossReason) {
	r.add(event{kind: "lost", relayID: id, count: lost, loss: why})
}

func (r *recorder) OnReleaseSkipped(id string, lapsing int) {
	r.add(event{kind: "releaseSkipped", relayID: id, count: lapsing})
}

func (r *recorder) OnFetch(id string, bucket, n int) {
	r.add(event{kind: "fetch", relayID: id, bucket: bucket, count: n})
}

func (r *recorder) OnPublish(id string, bucket, acked int, _ []time.Duration, err error) {
	r.add(event{kind: "publish", relayID: id, bucket: bucket, count: acked, err: err})
}

func (r *recorder) OnDelete(id string, bucket, n int) {
	r.add(event{kind: "delete", relayID: id, bucket: bucket, count: n})
}

func (r *recorder) OnBackoff(id string, bucket int, wait time.Duration, err error) {
	r.add(event{kind: "backoff", relayID: id, bucket: bucket, dur: wait, err: err})
}

func (r *recorder) OnHeadRowRetry(id string, bucket int) {
	r.add(event{kind: "headRowRetry", relayID: id, bucket: bucket})
}

func (r *recorder) OnPark(id string, p outbox.Parking) {
	r.add(event{kind: "park", relayID: id, bucket: p.Bucket, count: 1, park: p.Reason})
}

func (r *recorder) OnReplay(id string, bucket, n int) {
	r.add(event{kind: "replay", relayID: id, bucket: bucket, count: n})
}

func (r *recorder) OnParkedBacklog(id string, parked int64) {
	r.add(event{kind: "parkedBacklog", relayID: id, count: int(parked)})
}

func (r *recorder) OnBacklog(id string, pending int64, oldest time.Duration) {
	r.add(event{kind: "backlog", relayID: id, count: int(pending), dur: oldest})
}

func (r *recorder) OnStranded(id string, stranded int64) {
	r.add(event{kind: "stranded", relayID: id, count: int(stranded)})
}

func (r *recorder) OnRetry(id string, wait time.Duration, err error) {
	r.add(event{kind: "retry", relayID: id, dur: wait, err: err})
}

func (r *recorder) OnRunEnd(id string, res outbox.RunResult) {
	r.add(event{kind: "runEnd", relayID: id, res: res})
}

func (r *recorder) OnWakeUp(w outbox.WakeUp, err error) {
	r.add(event{kind: "wakeUp", count: len(w.Buckets), err: err})
}

// count returns how many calls of kind were made and the sum of their
// counts.
func (r *recorder) count(kind string) (n, sum int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.kind == kind {
			n++
			sum += e.count
		}
	}
	return n, sum
}

// deletes is a hook implementing only HookBatch's methods, counting
// deletes.
type deletes struct {
	mu sync.Mutex
	n  int
}

func (d *deletes) OnFetch(string, int, int)                           {}
func (d *deletes) OnPublish(string, int, int, []time.Duration, error) {}
func (d *deletes) OnBackoff(string, int, time.Duration, error)        {}
func (d *deletes) OnHeadRowRetry(string, int)                         {}
func (d *deletes) OnDelete(_ string, _, n int)                        { d.mu.Lock(); d.n += n; d.mu.Unlock() }

func TestRelayHooks(t *testing.T) {
	t.Run("a hook implementing none of the interfaces is a misconfiguration", func(t *testing.T) {
		clk := outbox.SystemClock{}
		_, err := outbox.NewRelay(outbox.RelayConfig{Options: outbox.RelayOptions{RelayID: "relay-a", BucketCount: 1},
			Store: newMemStore(clk, 1).observed, Publisher: newMemPublisher(), Clock: clk, Hooks: []outbox.Hook{&recorder{}, struct{}{}}})
		if !errors.Is(err, outbox.ErrMisconfigured) {
			t.Fatalf("NewRelay with a hook implementing nothing: %v, want a misconfiguration", err)
		}
	})
	t.Run("a hook is called only through the interfaces it implements", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := &deletes{}
			e := newRelayEnv(t, 2, func(c *outbox.RelayConfig) { c.Hooks = append(c.Hooks, d) })
			for range 5 {
				e.store.add(0, "a")
			}
			e.store.add(1, "b")
			res := e.run(t, outbox.RunInput{})
			if d.n != 6 || res.Deleted != 6 {
				t.Fatalf("the batch hook counted %d deletes, the run %d; want 6", d.n, res.Deleted)
			}
			if _, sum := e.obs.count("delete"); sum != 6 {
				t.Fatalf("the full recorder beside it counted %d deletes, want 6", sum)
			}
		})
	})
	t.Run("a panic in a hook is not recovered", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newRelayEnv(t, 1, func(c *outbox.RelayConfig) { c.Hooks = []outbox.Hook{panicking{}} })
			defer func() {
				if v := recover(); v != errHookPanic {
					t.Fatalf("recovered %v, want the hook's panic", v)
				}
			}()
			_, _ = e.relay.Run(t.Context(), outbox.RunInput{})
			t.Fatal("Run returned after its hook panicked")
		})
	})
}

var errHookPanic = errors.New("hook panicked")

// panicking panics when a run ends, on the caller's goroutine.
type panicking struct{}

func (panicking) OnBacklog(string, int64, time.Duration) {}
func (panicking) OnRetry(string, time.Duration, error)   {}
func (panicking) OnRunEnd(string, outbox.RunResult)      { panic(errHookPanic) }

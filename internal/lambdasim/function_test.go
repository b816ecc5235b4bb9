package lambdasim

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/spillway-dev/spillway/internal/sleep"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// fakeEnv is an execution environment whose handler works for the number
// of milliseconds its payload says, or until its context ends.
type fakeEnv struct {
	n   int
	log *runLog
}

type run struct {
	env      int
	work     int
	start    time.Time
	deadline time.Time
	killed   bool
}

type runLog struct {
	mu   sync.Mutex
	runs []run
}

func (e *fakeEnv) Handle(ctx context.Context, payload json.RawMessage) (outboxlambda.RelayResponse, error) {
	var ev struct{ Work int }
	if err := json.Unmarshal(payload, &ev); err != nil {
		return outboxlambda.RelayResponse{}, err
	}
	dl, _ := ctx.Deadline()
	r := run{env: e.n, work: ev.Work, start: time.Now(), deadline: dl}
	r.killed = !sleep.For(time.Duration(ev.Work)*time.Millisecond, ctx.Done())
	e.log.mu.Lock()
	e.log.runs = append(e.log.runs, r)
	e.log.mu.Unlock()
	return outboxlambda.RelayResponse{Trigger: outboxlambda.SourceWake, RelayID: "relay", Reason: "drained", Joined: ev.Work > 0}, nil
}

func newFake(t *testing.T, cfg Config[*fakeEnv]) (*Function[*fakeEnv], *runLog, *WallScheduler) {
	t.Helper()
	log, sched := &runLog{}, &WallScheduler{}
	cfg.Scheduler = sched
	cfg.NewEnv = func(n int) (*fakeEnv, error) { return &fakeEnv{n: n, log: log}, nil }
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f, log, sched
}

func payload(workMillis int) []byte { return fmt.Appendf(nil, `{"work":%d}`, workMillis) }

func TestFunction(t *testing.T) {
	// QueueingWarmReuseAndColdStarts sends three events to a function with
	// one environment: the first waits for the cold start, the others are
	// throttled and run one after the other in the same warm environment.
	t.Run("QueueingWarmReuseAndColdStarts", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f, log, sched := newFake(t, Config[*fakeEnv]{
				ReservedConcurrency: 1, Timeout: time.Minute,
				InvokeLatency: 15 * time.Millisecond, StartLatency: 50 * time.Millisecond, ColdStart: 250 * time.Millisecond,
			})
			t0 := time.Now()
			out, err := f.Invoke(t.Context(), &lambda.InvokeInput{Payload: payload(1000)})
			if err != nil || out.StatusCode != 202 || time.Since(t0) != 15*time.Millisecond {
				t.Fatalf("Invoke: %v, %v after %v; want 202 after 15ms", out, err, time.Since(t0))
			}
			// Lambda keeps the order of events accepted one after the other.
			time.Sleep(time.Millisecond)
			f.Send(payload(2000), time.Now())
			time.Sleep(time.Millisecond)
			f.Send(payload(3000), time.Now())
			if f.Pending() != 3 {
				t.Fatalf("pending %d, want 3", f.Pending())
			}
			time.Sleep(time.Hour)
			f.Wait()
			synctest.Wait()
			if err := sched.Err(); err != nil {
				t.Fatal(err)
			}
			// The first starts after the call, the start latency and the cold
			// start, and runs until +1.315 s. The second, ready at +66 ms, is
			// refused then and at its retry 1 s later, and starts at its retry
			// 2 s after that; the third, ready at +67 ms, is refused a third
			// time at +3.067 s and starts 4 s later.
			start := t0.Add(15*time.Millisecond + 50*time.Millisecond + 250*time.Millisecond)
			second, third := t0.Add(66*time.Millisecond+3*time.Second), t0.Add(67*time.Millisecond+7*time.Second)
			want := []run{
				{env: 1, work: 1000, start: start, deadline: start.Add(time.Minute)},
				{env: 1, work: 2000, start: second, deadline: second.Add(time.Minute)},
				{env: 1, work: 3000, start: third, deadline: third.Add(time.Minute)},
			}
			if !slices.EqualFunc(log.runs, want, sameRun) {
				t.Errorf("runs %+v, want %+v", log.runs, want)
			}
			st := f.Stats()
			if st.Invocations != 3 || st.Environments != 1 || st.Throttled != 2 || st.JoinedInvocations != 3 || st.JoinedRelays != 1 ||
				st.FunctionTime != 6*time.Second || st.InvocationsByReason["drained"] != 3 || st.WakeUpInvocations != 3 || f.Pending() != 0 {
				t.Errorf("stats %+v, pending %d", st, f.Pending())
			}
		})
	})

	// DeadlineKillsAndOldEventsDrop runs two environments: an invocation
	// past its timeout is cancelled at its deadline, and an event that waited
	// longer than MaxEventAge for an environment is dropped.
	t.Run("DeadlineKillsAndOldEventsDrop", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var killed []int
			f, log, _ := newFake(t, Config[*fakeEnv]{ReservedConcurrency: 2, Timeout: 2 * time.Second, MaxEventAge: 1500 * time.Millisecond,
				Killed: func(inv *Invocation[*fakeEnv]) { killed = append(killed, inv.Env.n) }})
			t0 := time.Now()
			f.Send(payload(5000), t0) // killed at +2s
			synctest.Wait()
			f.Send(payload(900), t0) // second environment, done at +0.9s
			synctest.Wait()
			f.Send(payload(1000), t0) // refused; starts at its retry at +1s in environment 2
			synctest.Wait()
			f.Send(payload(1000), t0) // refused at +0 and +1s; too old (3s) at its next retry
			time.Sleep(time.Hour)
			f.Wait()
			synctest.Wait()
			slices.SortFunc(log.runs, func(a, b run) int { return a.start.Compare(b.start)*2 + a.env - b.env })
			want := []run{
				{env: 1, work: 5000, start: t0, deadline: t0.Add(2 * time.Second), killed: true},
				{env: 2, work: 900, start: t0, deadline: t0.Add(2 * time.Second)},
				{env: 2, work: 1000, start: t0.Add(time.Second), deadline: t0.Add(3 * time.Second)},
			}
			if !slices.EqualFunc(log.runs, want, sameRun) {
				t.Errorf("runs %+v, want %+v", log.runs, want)
			}
			if st := f.Stats(); st.Invocations != 3 || st.Killed != 1 || st.Dropped != 1 || st.Throttled != 2 || st.Environments != 2 || st.FunctionTime != 3900*time.Millisecond {
				t.Errorf("stats %+v", st)
			}
			if !slices.Equal(killed, []int{1}) {
				t.Errorf("Killed called for environments %v, want [1]", killed)
			}
		})
	})

	t.Run("NewRejectsIncompleteConfig", func(t *testing.T) {
		base := Config[*fakeEnv]{Scheduler: &WallScheduler{}, ReservedConcurrency: 1, Timeout: time.Second,
			NewEnv: func(int) (*fakeEnv, error) { return nil, nil }}
		for name, mod := range map[string]func(*Config[*fakeEnv]){
			"no scheduler":   func(c *Config[*fakeEnv]) { c.Scheduler = nil },
			"no NewEnv":      func(c *Config[*fakeEnv]) { c.NewEnv = nil },
			"no concurrency": func(c *Config[*fakeEnv]) { c.ReservedConcurrency = 0 },
			"no timeout":     func(c *Config[*fakeEnv]) { c.Timeout = 0 },
		} {
			cfg := base
			mod(&cfg)
			if _, err := New(cfg); err == nil {
				t.Errorf("%s: New accepted it", name)
			}
		}
		if _, err := New(base); err != nil {
			t.Errorf("complete config: %v", err)
		}
	})

	// CancelledContextDiscardsEvents checks the shutdown: once the
	// function's context is done, the running invocation is cancelled, the
	// queued event is discarded, and Wait returns.
	t.Run("CancelledContextDiscardsEvents", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			f, log, _ := newFake(t, Config[*fakeEnv]{Context: ctx, ReservedConcurrency: 1, Timeout: time.Minute})
			f.Send(payload(5000), time.Now())
			synctest.Wait()
			f.Send(payload(1000), time.Now())
			synctest.Wait()
			time.Sleep(1500 * time.Millisecond) // between the throttled event's retries at 1 s and 3 s
			if f.Running() != 1 || f.Pending() != 2 {
				t.Errorf("running %d, pending %d; want 1 running and 1 throttled", f.Running(), f.Pending())
			}
			cancelled := time.Now()
			cancel()
			f.Wait()
			// The throttled event's next retry is 1.5 s away: Wait does not wait for it.
			if d := time.Since(cancelled); d != 0 {
				t.Errorf("Wait returned %v after the cancel, want at once", d)
			}
			if len(log.runs) != 1 || !log.runs[0].killed || f.Pending() != 0 {
				t.Errorf("runs %+v, pending %d; want the first cut short and the second discarded", log.runs, f.Pending())
			}
			if st := f.Stats(); st.Invocations != 1 || st.Dropped != 0 || st.Killed != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	})

	// HooksShapeTheFleet covers what the fleet simulation relies on: a
	// budget shorter than the timeout (Started), the kill hook, environments
	// reclaimed after their warm time (KeepWarm, Retired), coalesced events
	// and a reserved concurrency set to 0 and back.
	t.Run("HooksShapeTheFleet", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var mu sync.Mutex
			var killed, retired []int
			f, log, _ := newFake(t, Config[*fakeEnv]{
				ReservedConcurrency: 1, Timeout: time.Hour,
				Started: func(inv *Invocation[*fakeEnv]) { inv.Deadline = inv.Start.Add(2 * time.Second) },
				Killed: func(inv *Invocation[*fakeEnv]) {
					mu.Lock()
					killed = append(killed, inv.Env.n)
					mu.Unlock()
				},
				KeepWarm: func(inv *Invocation[*fakeEnv]) time.Duration { return 10 * time.Second },
				Retired: func(e *fakeEnv) {
					mu.Lock()
					retired = append(retired, e.n)
					mu.Unlock()
				},
				// Events queued together fold into one that works as long as
				// the longer of the two.
				Coalesce: func(queued, incoming []byte) ([]byte, bool) {
					var q, in struct{ Work int }
					_ = json.Unmarshal(queued, &q)
					_ = json.Unmarshal(incoming, &in)
					return payload(max(q.Work, in.Work)), true
				},
			})
			t0 := time.Now()
			f.SetReservedConcurrency(0)
			f.Send(payload(3000), t0) // killed at its 2 s budget
			f.Send(payload(1000), t0) // folded into the first
			time.Sleep(time.Minute)
			synctest.Wait()
			if len(log.runs) != 0 || f.Pending() != 1 || f.Stats().Throttled != 1 {
				t.Fatalf("with concurrency 0: runs %+v, pending %d, stats %+v", log.runs, f.Pending(), f.Stats())
			}
			f.SetReservedConcurrency(1)
			time.Sleep(time.Hour)
			synctest.Wait()
			// Refused at +0, +1, +3, +7, +15 and +31 s, the event starts at its
			// retry at +63 s, not when the concurrency came back.
			start := t0.Add(63 * time.Second)
			want := []run{{env: 1, work: 3000, start: start, deadline: start.Add(2 * time.Second), killed: true}}
			if !slices.EqualFunc(log.runs, want, sameRun) {
				t.Errorf("runs %+v, want %+v", log.runs, want)
			}
			if created := f.Stats().Environments; !slices.Equal(killed, []int{1}) || !slices.Equal(retired, []int{1}) || created != 1 {
				t.Errorf("killed %v, retired %v of %d environments; want environment 1, the only one, killed and reclaimed", killed, retired, created)
			}
			// A new event after the reclaim needs a new environment.
			f.Send(payload(0), time.Now())
			f.Wait()
			if st := f.Stats(); st.Environments != 2 || st.Killed != 1 || st.Invocations != 2 {
				t.Errorf("stats %+v", st)
			}
		})
	})
}

func sameRun(a, b run) bool {
	return a.env == b.env && a.work == b.work && a.start.Equal(b.start) && a.deadline.Equal(b.deadline) && a.killed == b.killed
}

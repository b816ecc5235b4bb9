package outboxwake

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// invocation is one call a fakeInvoker received.
type invocation struct {
	function    string
	kind        types.InvocationType
	payload     string
	hasDeadline bool
}

// fakeInvoker records invocations. With hold set, every call first
// announces itself on started and then waits until hold is closed.
type fakeInvoker struct {
	mu      sync.Mutex
	calls   []invocation
	started chan struct{}
	hold    chan struct{}
	// wait makes a call block until its ctx ends and return ctx's error.
	wait   bool
	err    error
	status int32
}

func (f *fakeInvoker) Invoke(ctx context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	_, hasDeadline := ctx.Deadline()
	f.mu.Lock()
	f.calls = append(f.calls, invocation{function: aws.ToString(in.FunctionName), kind: in.InvocationType, payload: string(in.Payload), hasDeadline: hasDeadline})
	f.mu.Unlock()
	if f.started != nil {
		f.started <- struct{}{}
	}
	if f.hold != nil {
		<-f.hold
	}
	if f.wait {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, f.err
	}
	return &lambda.InvokeOutput{StatusCode: cmpOr(f.status, 202)}, nil
}

func (f *fakeInvoker) invocations() []invocation {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]invocation(nil), f.calls...)
}

func cmpOr(v, def int32) int32 {
	if v == 0 {
		return def
	}
	return v
}

// wakeUp is one reported wake-up.
type wakeUp struct {
	w   outbox.WakeUp
	err error
}

// wakeUpLog is an outbox.HookWakeUp keeping every report.
type wakeUpLog struct {
	mu  sync.Mutex
	got []wakeUp
}

func (e *wakeUpLog) OnWakeUp(w outbox.WakeUp, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, wakeUp{w, err})
}

func (e *wakeUpLog) sent() []wakeUp {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got)
}

func newTestNotifier(t *testing.T, inv Invoker, obs *wakeUpLog, timeout time.Duration) *Notifier {
	t.Helper()
	var hooks []outbox.Hook
	if obs != nil {
		hooks = append(hooks, obs)
	}
	n, err := NewNotifier(NotifierConfig{Client: inv, FunctionName: "outbox-relay", Hooks: hooks, Timeout: timeout, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestNotifier(t *testing.T) {
	t.Parallel()
	t.Run("SendsAnAsynchronousWakeUp", func(t *testing.T) {
		t.Parallel()
		inv := &fakeInvoker{}
		obs := &wakeUpLog{}
		n := newTestNotifier(t, inv, obs, 0)
		if err := n.Notify(t.Context(), outbox.WakeUp{Buckets: []int{2, 5}, Hop: 3, Join: true}); err != nil {
			t.Fatal(err)
		}
		want := []invocation{{function: "outbox-relay", kind: types.InvocationTypeEvent,
			payload: `{"trigger":"wake","buckets":[2,5],"hop":3,"join":true}`, hasDeadline: true}}
		if got := inv.invocations(); !reflect.DeepEqual(got, want) {
			t.Fatalf("invocations\n got %+v\nwant %+v", got, want)
		}
		if s := n.Stats(); s != (NotifierStats{Sent: 1}) {
			t.Fatalf("stats %+v", s)
		}
		sent := obs.sent()
		if len(sent) != 1 || sent[0].err != nil || !slices.Equal(sent[0].w.Buckets, []int{2, 5}) {
			t.Fatalf("wake-up events %+v", sent)
		}
	})

	t.Run("SendsUnknownBucketsAsAnEmptyList", func(t *testing.T) {
		t.Parallel()
		inv := &fakeInvoker{}
		if err := newTestNotifier(t, inv, nil, 0).Notify(t.Context(), outbox.WakeUp{}); err != nil {
			t.Fatal(err)
		}
		if got := inv.invocations()[0].payload; got != `{"trigger":"wake","buckets":[],"hop":0,"join":false}` {
			t.Fatalf("payload %s", got)
		}
	})

	t.Run("CoalescesWakeUpsWhileOneIsInFlight", func(t *testing.T) {
		t.Parallel()
		inv := &fakeInvoker{started: make(chan struct{}, 4), hold: make(chan struct{})}
		n := newTestNotifier(t, inv, nil, 0)

		first := make(chan error, 1)
		go func() { first <- n.Notify(t.Context(), outbox.WakeUp{Buckets: []int{3}}) }()
		<-inv.started // the first invoke is in flight

		// Three more commits meanwhile: merged, answered at once.
		for _, w := range []outbox.WakeUp{{Buckets: []int{6}}, {Buckets: []int{1, 6}, Hop: 2}, {Buckets: []int{4}}} {
			if err := n.Notify(t.Context(), w); err != nil {
				t.Fatalf("merged wake-up returned %v", err)
			}
		}
		if got := len(inv.invocations()); got != 1 {
			t.Fatalf("%d invocations while the first is in flight, want 1", got)
		}
		close(inv.hold)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		got := inv.invocations()
		want := []string{
			`{"trigger":"wake","buckets":[3],"hop":0,"join":false}`,
			`{"trigger":"wake","buckets":[1,4,6],"hop":2,"join":false}`,
		}
		if len(got) != len(want) {
			t.Fatalf("%d invocations, want %d: %+v", len(got), len(want), got)
		}
		for i := range want {
			if got[i].payload != want[i] {
				t.Errorf("invoke %d payload %s, want %s", i, got[i].payload, want[i])
			}
		}
		if s := n.Stats(); s != (NotifierStats{Sent: 2, Merged: 3}) {
			t.Fatalf("stats %+v, want 2 sent and 3 merged", s)
		}
		// Idle again: the next wake-up is sent by its own caller.
		if err := n.Notify(t.Context(), outbox.WakeUp{Buckets: []int{0}}); err != nil {
			t.Fatal(err)
		}
		if got := len(inv.invocations()); got != 3 {
			t.Fatalf("%d invocations after the burst, want 3", got)
		}
	})

	t.Run("CountsAndReportsFailures", func(t *testing.T) {
		t.Parallel()
		for name, inv := range map[string]*fakeInvoker{
			"error":      {err: errors.New("TooManyRequestsException: Rate Exceeded")},
			"bad status": {status: 500},
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				obs := &wakeUpLog{}
				n := newTestNotifier(t, inv, obs, 0)
				for range 2 {
					if err := n.Notify(t.Context(), outbox.WakeUp{Buckets: []int{1}}); err == nil {
						t.Fatal("a failed invoke returned no error")
					}
				}
				if s := n.Stats(); s != (NotifierStats{Failed: 2}) {
					t.Fatalf("stats %+v, want 2 failed", s)
				}
				sent := obs.sent()
				if len(sent) != 2 || sent[0].err == nil || sent[1].err == nil {
					t.Fatalf("wake-up events %+v, want 2 with Err", sent)
				}
			})
		}
	})

	t.Run("BoundsEachInvokeByItsTimeout", func(t *testing.T) {
		t.Parallel()
		inv := &fakeInvoker{wait: true}
		n := newTestNotifier(t, inv, nil, 20*time.Millisecond)
		// The caller's ctx has no deadline: only the notifier's timeout ends
		// the call.
		err := n.Notify(context.Background(), outbox.WakeUp{Buckets: []int{7}})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("error %v, want the invoke's deadline", err)
		}
		if s := n.Stats(); s != (NotifierStats{Failed: 1}) {
			t.Fatalf("stats %+v", s)
		}
	})

	// A relay's continuation wake-up to a Lambda API that accepts and never
	// answers ends at the relay's deadline, not DefaultNotifyTimeout later.
	t.Run("TheCallersDeadlineBoundsItsOwnInvoke", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			inv := &fakeInvoker{wait: true}
			n := newTestNotifier(t, inv, nil, 0)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := n.Notify(ctx, outbox.WakeUp{Buckets: []int{7}, Hop: 1})
			if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took != 300*time.Millisecond {
				t.Fatalf("Notify returned %v after %v, want the caller's deadline at 300 ms", err, took)
			}
		})
	})

	t.Run("FollowUpSurvivesTheFirstCallersCancellation", func(t *testing.T) {
		t.Parallel()
		inv := &fakeInvoker{started: make(chan struct{}, 4), hold: make(chan struct{})}
		n := newTestNotifier(t, inv, nil, 0)
		ctx, cancel := context.WithCancel(t.Context())
		first := make(chan error, 1)
		go func() { first <- n.Notify(ctx, outbox.WakeUp{Buckets: []int{0}}) }()
		<-inv.started
		if err := n.Notify(t.Context(), outbox.WakeUp{Buckets: []int{1}}); err != nil {
			t.Fatal(err)
		}
		cancel()
		close(inv.hold)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if s := n.Stats(); s.Sent != 2 {
			t.Fatalf("stats %+v: the follow-up was dropped with the first caller's ctx", s)
		}
	})

	t.Run("MergeWakeUps", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			name string
			in   []outbox.WakeUp
			want outbox.WakeUp
		}{
			{"union", []outbox.WakeUp{{Buckets: []int{5, 2}}, {Buckets: []int{2, 7}}}, outbox.WakeUp{Buckets: []int{2, 5, 7}}},
			{"unknown first absorbs", []outbox.WakeUp{{}, {Buckets: []int{1}}}, outbox.WakeUp{}},
			{"unknown later absorbs", []outbox.WakeUp{{Buckets: []int{1}}, {}, {Buckets: []int{3}}}, outbox.WakeUp{}},
			{"highest hop, join kept", []outbox.WakeUp{{Buckets: []int{1}, Hop: 4, Join: true}, {Buckets: []int{1}, Hop: 1}}, outbox.WakeUp{Buckets: []int{1}, Hop: 4, Join: true}},
		}
		for _, c := range cases {
			var acc *outbox.WakeUp
			for _, w := range c.in {
				acc = mergeWakeUps(acc, w)
			}
			if !reflect.DeepEqual(*acc, c.want) {
				t.Errorf("%s: got %+v, want %+v", c.name, *acc, c.want)
			}
		}
	})

	t.Run("NewNotifierNeedsAClientAndAFunction", func(t *testing.T) {
		t.Parallel()
		for _, cfg := range []NotifierConfig{{FunctionName: "relay"}, {Client: &fakeInvoker{}}, {Client: &fakeInvoker{}, FunctionName: "relay", Timeout: -time.Second}} {
			if _, err := NewNotifier(cfg); !errors.Is(err, outbox.ErrMisconfigured) {
				t.Errorf("NewNotifier(%+v) error %v, want a misconfiguration", cfg, err)
			}
		}
	})

	// Under continuous commits the caller whose invoke is in flight sends at
	// most callerFollowUps follow-ups itself; the rest go out from a goroutine,
	// so that caller's write is not held up by everyone else's wake-ups.
	t.Run("CallerHandsLongFollowUpChainsToAGoroutine", func(t *testing.T) {
		inv := &fakeInvoker{started: make(chan struct{}), hold: make(chan struct{})}
		n, err := NewNotifier(NotifierConfig{Client: inv, FunctionName: "relay"})
		if err != nil {
			t.Fatal(err)
		}
		first := make(chan error, 1)
		go func() { first <- n.Notify(context.Background(), outbox.WakeUp{Buckets: []int{0}}) }()
		// Each invoke in flight gets a commit merged behind it, for the first
		// invoke and every follow-up: an endless chain unless the caller stops.
		for i := 1; i <= callerFollowUps+2; i++ {
			<-inv.started
			if err := n.Notify(context.Background(), outbox.WakeUp{Buckets: []int{i}}); err != nil {
				t.Fatalf("merged notify: %v", err)
			}
			inv.hold <- struct{}{}
			if i == callerFollowUps+1 {
				// The caller sent callerFollowUps follow-ups and returned.
				if err := <-first; err != nil {
					t.Fatalf("first notify: %v", err)
				}
			}
		}
		<-inv.started
		inv.hold <- struct{}{}
		calls := inv.invocations()
		if len(calls) != callerFollowUps+3 {
			t.Fatalf("%d invokes, want %d (one per merged commit, none lost)", len(calls), callerFollowUps+3)
		}
		// The notifier is usable afterwards: a later wake-up goes out, sent
		// either by its own caller or by the goroutine still draining.
		go func() { _ = n.Notify(context.Background(), outbox.WakeUp{Buckets: []int{7}}) }()
		<-inv.started
		inv.hold <- struct{}{}
		if got := len(inv.invocations()); got != callerFollowUps+4 {
			t.Fatalf("%d invokes after a later wake-up, want %d", got, callerFollowUps+4)
		}
	})

	t.Run("SkipsWakeUpsALiveOwnerCovers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clock := outbox.SystemClock{}
			inv := &fakeInvoker{}
			owners := &fakeOwners{clock: clock}
			n, err := NewNotifier(NotifierConfig{Client: inv, FunctionName: "relay", Clock: clock, Owners: owners})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			notify := func(w outbox.WakeUp) {
				t.Helper()
				if err := n.Notify(ctx, w); err != nil {
					t.Fatal(err)
				}
			}
			// Before any view: the invoke goes first, then the view is read.
			owners.set(lease.Coordination{}, nil)
			notify(outbox.WakeUp{Buckets: []int{1}})
			if got := len(inv.invocations()); got != 1 || owners.reads != 1 {
				t.Fatalf("first wake-up: %d invokes, %d reads; want 1, 1", got, owners.reads)
			}
			// Within OwnerViewTTL of the invoke, bucket 1 is covered; bucket 2
			// is not, and the relay woken a moment ago may be claiming it: one
			// read first, which shows nobody yet, and the invoke.
			notify(outbox.WakeUp{Buckets: []int{1}})
			notify(outbox.WakeUp{Buckets: []int{2}})
			if got := len(inv.invocations()); got != 2 || owners.reads != 2 {
				t.Fatalf("%d invokes, %d reads; want 2, 2 (bucket 1 covered, bucket 2 read and sent)", got, owners.reads)
			}
			// Coverage lapsed, the last view showed nobody and nothing went
			// out lately: the invoke first, then a view showing the relay.
			time.Sleep(lease.OwnerViewTTL)
			owners.set(heldBy(clock.Now(), "relay-a", 1, 2), nil)
			notify(outbox.WakeUp{Buckets: []int{2}})
			if got := len(inv.invocations()); got != 3 || owners.reads != 3 {
				t.Fatalf("%d invokes, %d reads; want 3, 3 (invoked, then read)", got, owners.reads)
			}
			// Coverage lapsed after a view that showed the holder: one read
			// first; the live holder covers the buckets, no invoke.
			time.Sleep(lease.OwnerViewTTL)
			owners.set(heldBy(clock.Now(), "relay-a", 1, 2), nil)
			notify(outbox.WakeUp{Buckets: []int{1, 2}})
			notify(outbox.WakeUp{Buckets: []int{2}})
			if got := len(inv.invocations()); got != 3 || owners.reads != 4 {
				t.Fatalf("live holder: %d invokes, %d reads; want 3, 4", got, owners.reads)
			}
			// Joins and continuation hops are never skipped.
			notify(outbox.WakeUp{Buckets: []int{1}, Join: true})
			notify(outbox.WakeUp{Buckets: []int{1}, Hop: 1})
			if got := len(inv.invocations()); got != 5 {
				t.Fatalf("%d invokes, want 5 (join and hop sent)", got)
			}
			// The holder stopped: the read after the coverage shows it, and
			// the wake-up is sent.
			time.Sleep(lease.OwnerViewTTL)
			stopped := heldBy(clock.Now(), "relay-a", 1, 2)
			stopped.Relays[0].Stopped = true
			owners.set(stopped, nil)
			notify(outbox.WakeUp{Buckets: []int{2}})
			// A failed read covers nothing either.
			time.Sleep(lease.OwnerViewTTL)
			owners.set(heldBy(clock.Now(), "relay-a", 1, 2), errors.New("throttled"))
			notify(outbox.WakeUp{Buckets: []int{1}})
			st := n.Stats()
			if got := len(inv.invocations()); got != 7 || st.Skipped != 3 || st.OwnerReads != 6 || st.Sent != 7 {
				t.Fatalf("%d invokes, stats %+v; want 7 invokes, 3 skipped, 6 reads", got, st)
			}
		})
	})

	// A wake-up whose buckets are not covered reads the view first when
	// the last view showed a relay holding one of them less than its
	// likely linger ago (it lingers between messages: the read saves an
	// invocation) or a relay was woken a moment ago (it is claiming), and
	// invokes first otherwise (sparse traffic: the relay stopped, and the
	// read would only delay the woken relay's start).
	t.Run("ReadsTheViewFirstOnlyWhenARelayIsLikelyThere", func(t *testing.T) {
		t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
		for _, tc := range []struct {
			name     string
			viewedAt time.Time
			held     bool
			lingers  bool
			lastSent time.Time
			want     bool
		}{
			{"no view read yet", time.Time{}, true, false, ms(-100), false},
			{"held at a view 1 s old", ms(-1000), true, false, time.Time{}, true},
			{"held at a view just under the linger old", ms(-1999), true, false, time.Time{}, true},
			{"held at a view the linger old: the relay stopped", ms(-2000), true, false, time.Time{}, false},
			{"held at a view 9 s old, relays seen lingering longer", ms(-9000), true, true, time.Time{}, true},
			{"held at a view the longer linger old", ms(-10000), true, true, time.Time{}, false},
			{"free at the last view, nothing sent", ms(-1000), false, false, time.Time{}, false},
			{"free, a relay woken 100 ms ago claims", ms(-100), false, false, ms(-100), true},
			{"free, a relay woken just under a TTL ago", ms(-999), false, false, ms(-999), true},
			{"free, the last wake-up a TTL ago", ms(-1000), false, false, ms(-1000), false},
			{"free, the last wake-up 9 s ago", ms(-9000), false, false, ms(-9000), false},
		} {
			if got := readFirst(tc.viewedAt, tc.held, tc.lingers, tc.lastSent, t0); got != tc.want {
				t.Errorf("%s: readFirst = %v, want %v", tc.name, got, tc.want)
			}
		}
		synctest.Test(t, func(t *testing.T) {
			clock := outbox.SystemClock{}
			inv := &fakeInvoker{}
			owners := &fakeOwners{clock: clock}
			n, err := NewNotifier(NotifierConfig{Client: inv, FunctionName: "relay", Clock: clock, Owners: owners})
			if err != nil {
				t.Fatal(err)
			}
			// The first wake-up invokes, then reads a view showing nobody
			// (the woken relay has not claimed yet).
			_ = n.Notify(t.Context(), outbox.WakeUp{Buckets: []int{1}})
			time.Sleep(9 * time.Second)
			// Free at the last view, nothing sent lately: the invoke goes
			// first, the read after.
			reads := owners.reads
			owners.onRead = func() {
				if got := len(inv.invocations()); got != 2 {
					t.Errorf("the view was read with %d invokes sent, want 2: after the invoke", got)
				}
			}
			owners.set(heldBy(clock.Now(), "relay-a", 1), nil)
			_ = n.Notify(t.Context(), outbox.WakeUp{Buckets: []int{1}})
			if got := len(inv.invocations()); got != 2 || owners.reads != reads+1 {
				t.Fatalf("%d invokes, %d reads; want 2 and one read", got, owners.reads-reads)
			}
			// That view showed relay-a holding bucket 1: 1.5 s later, within
			// a relay's linger, the next wake-up reads first and skips the
			// invoke.
			owners.onRead = nil
			time.Sleep(1500 * time.Millisecond)
			owners.set(heldBy(clock.Now(), "relay-a", 1), nil)
			_ = n.Notify(t.Context(), outbox.WakeUp{Buckets: []int{1}})
			if got := len(inv.invocations()); got != 2 || n.Stats().Skipped != 1 {
				t.Fatalf("%d invokes, stats %+v; want the wake-up skipped after a read", got, n.Stats())
			}
		})
	})

	// A view older than a relay's linger (2 s) says little: the invoke goes
	// first. When the read after it still shows the holder, relays linger
	// longer here (steady traffic), and views up to the longer linger (10 s)
	// are read first again, until a read finds the bucket free.
	t.Run("LearnsThatRelaysLingerLonger", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clock := outbox.SystemClock{}
			inv := &fakeInvoker{}
			owners := &fakeOwners{clock: clock}
			n, err := NewNotifier(NotifierConfig{Client: inv, FunctionName: "relay", Clock: clock, Owners: owners})
			if err != nil {
				t.Fatal(err)
			}
			notify := func(after time.Duration, held bool) (invokes int, readFirst bool) {
				time.Sleep(after)
				if held {
					owners.set(heldBy(clock.Now(), "relay-a", 1), nil)
				} else {
					owners.set(lease.Coordination{}, nil)
				}
				before := len(inv.invocations())
				owners.onRead = func() { readFirst = len(inv.invocations()) == before }
				_ = n.Notify(t.Context(), outbox.WakeUp{Buckets: []int{1}})
				owners.onRead = nil
				return len(inv.invocations()) - before, readFirst
			}
			for i, step := range []struct {
				after     time.Duration
				held      bool
				invokes   int
				readFirst bool
			}{
				{0, true, 1, false},                      // no view yet: invoke, then a view showing relay-a
				{3 * time.Second, true, 1, false},        // a 3 s old view: invoke first; relay-a still holds
				{5 * time.Second, true, 0, true},         // it lingers longer: a 5 s old view is read first
				{5 * time.Second, false, 1, true},        // read first, bucket free: invoke
				{500 * time.Millisecond, true, 0, false}, // covered by the wake-up just sent: skipped
				{5 * time.Second, true, 1, false},        // the last view showed it free: invoke first
				{3 * time.Second, true, 1, false},        // back to the 2 s guess: a 3 s old view, invoke first
			} {
				invokes, first := notify(step.after, step.held)
				if invokes != step.invokes || first != step.readFirst {
					t.Fatalf("step %d: %d invokes, read first %v; want %d and %v", i, invokes, first, step.invokes, step.readFirst)
				}
			}
		})
	})

	// Every writer's wake-up with named buckets rings the doorbell, whether
	// or not a live holder covers it and the invoke is skipped; a relay's
	// continuation or an unknown bucket set does not. A ring's failure
	// fails nothing.
	t.Run("RingsTheDoorbellForWritersWakeUps", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clock := outbox.SystemClock{}
			inv := &fakeInvoker{}
			owners := &fakeOwners{clock: clock}
			bell := &fakeRinger{}
			n, err := NewNotifier(NotifierConfig{Client: inv, FunctionName: "relay", Clock: clock, Owners: owners, Doorbell: bell})
			if err != nil {
				t.Fatal(err)
			}
			owners.set(heldBy(clock.Now(), "relay-a", 1, 2), nil)
			for _, w := range []outbox.WakeUp{{Buckets: []int{1}}, {Buckets: []int{2}}, {Buckets: []int{1}, Hop: 1}, {}} {
				if err := n.Notify(t.Context(), w); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := bell.all(), [][]int{{1}, {2}}; !reflect.DeepEqual(got, want) {
				t.Errorf("rang %v, want %v (the writer's wake-ups, skipped or not)", got, want)
			}
			bell.err = errors.New("kafka: not leader")
			if err := n.Notify(t.Context(), outbox.WakeUp{Buckets: []int{2}}); err != nil {
				t.Errorf("a failed ring failed the notify: %v", err)
			}
			if st := n.Stats(); st.Rang != 2 || st.RingFailed != 1 || st.Skipped != 2 {
				t.Errorf("stats %+v, want 2 rung, 1 ring failed, 2 skipped", st)
			}
		})
	})

	t.Run("CoverageEndsWithTheHoldersLease", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			clock := outbox.SystemClock{}
			inv := &fakeInvoker{}
			owners := &fakeOwners{clock: clock}
			n, err := NewNotifier(NotifierConfig{Client: inv, FunctionName: "relay", Clock: clock, Owners: owners, LeaseDuration: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if err := n.Notify(t.Context(), outbox.WakeUp{Buckets: []int{0}}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(lease.OwnerViewTTL)
			// The lease runs out 100 ms after the read: the view covers bucket 0
			// only until then, not for the whole OwnerViewTTL.
			v := heldBy(clock.Now(), "relay-a", 0)
			v.Leases[0].ExpiresAt = clock.Now().Add(100 * time.Millisecond)
			owners.set(v, nil)
			if err := n.Notify(t.Context(), outbox.WakeUp{Buckets: []int{0}}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(150 * time.Millisecond)
			owners.set(lease.Coordination{}, nil)
			if err := n.Notify(t.Context(), outbox.WakeUp{Buckets: []int{0}}); err != nil {
				t.Fatal(err)
			}
			if got := len(inv.invocations()); got != 2 {
				t.Fatalf("%d invokes, want 2 (the first, and one after the lease ran out)", got)
			}
		})
	})
}

// fakeOwners serves a fixed coordination view, stamped with the clock's
// now, and counts the reads.
type fakeOwners struct {
	clock outbox.Clock
	mu    sync.Mutex
	view  lease.Coordination
	err   error
	reads int
	// onRead runs at every read.
	onRead func()
}

func (f *fakeOwners) ReadCoordination(context.Context) (lease.Coordination, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.onRead != nil {
		f.onRead()
	}
	f.reads++
	v := f.view
	v.ReadAt = f.clock.Now()
	return v, f.err
}

func (f *fakeOwners) set(view lease.Coordination, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.view, f.err = view, err
}

// heldBy is a view in which relay holds buckets with leases expiring in
// 30 s and a heartbeat seen at now.
func heldBy(now time.Time, relay string, buckets ...int) lease.Coordination {
	v := lease.Coordination{Relays: []lease.RelayState{{RelayID: relay, LastSeen: now}}}
	for _, b := range buckets {
		v.Leases = append(v.Leases, lease.State{Bucket: b, Owner: relay, ExpiresAt: now.Add(30 * time.Second)})
	}
	return v
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// fakeRinger records the rings, or fails them with err.
type fakeRinger struct {
	mu    sync.Mutex
	rings [][]int
	err   error
}

func (f *fakeRinger) Ring(_ context.Context, buckets []int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.rings = append(f.rings, slices.Clone(buckets))
	return nil
}

func (f *fakeRinger) all() [][]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.rings)
}

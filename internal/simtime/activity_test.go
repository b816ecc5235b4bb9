package simtime

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestParticipantBusy(t *testing.T) {
	a := NewActivity()
	mine := ` labels:{"spillway-simulation": "` + a.label + `"}`
	other := ` labels:{"spillway-simulation": "` + a.label + `0"}`
	const caller = "goroutine 1 [running]:\nmain.main()\n\t/x/main.go:1\n"
	cases := []struct {
		name  string
		other string
		busy  bool
	}{
		{"relay computing", "goroutine 9 [runnable" + mine + "]:\ngithub.com/spillway-dev/spillway/outbox.(*run).loop()\n\t/x/relay_run.go:1\n", true},
		{"relay in a system call", "goroutine 9 [syscall" + mine + "]:\nsyscall.write()\ngithub.com/spillway-dev/spillway/outbox.(*run).stop()\n", true},
		{"relay assisting the collector", "goroutine 9 [GC assist wait" + mine + "]:\ngithub.com/spillway-dev/spillway/outbox.(*run).loop()\n", true},
		{"relay parked on a timer", "goroutine 9 [select, 2 minutes" + mine + "]:\ngithub.com/spillway-dev/spillway/outbox.Sleep()\n", false},
		{"another simulation's relay computing", "goroutine 9 [runnable" + other + "]:\ngithub.com/spillway-dev/spillway/outbox.(*run).loop()\n", false},
		{"a goroutine of no simulation", "goroutine 9 [runnable]:\ngithub.com/spillway-dev/spillway/outbox.(*run).loop()\n", false},
		{"a participant not started yet", "goroutine 9 [runnable" + mine + "]:\nsync.(*WaitGroup).Go.func1()\ncreated by sync.(*WaitGroup).Go in goroutine 7\n", true},
		{"relay waiting for a mutex", "goroutine 9 [sync.Mutex.Lock" + mine + "]:\ninternal/sync.runtime_SemacquireMutex()\ncontext.(*cancelCtx).cancel()\n", true},
		{"relay starting a collection during the dump", "goroutine 9 [semacquire" + mine + "]:\nruntime.gcStart()\ngithub.com/aws/smithy-go/middleware.(*FinalizeStep).Insert()\n", true},
		{"relay waiting for the collector", "goroutine 9 [GC weak to strong wait" + mine + "]:\nunique.Make()\n", true},
		{"relay waiting for a read lock", "goroutine 9 [sync.RWMutex.RLock" + mine + "]:\nsync.(*RWMutex).RLock()\n", true},
		{"relay waiting for a group", "goroutine 9 [sync.WaitGroup.Wait" + mine + "]:\nsync.(*WaitGroup).Wait()\n", false},
		{"server finishing a response", "goroutine 9 [runnable" + mine + "]:\ngithub.com/spillway-dev/spillway/outbox/outboxlocal.(*embeddedServer).ServeHTTP()\nnet/http.(*conn).serve()\n", false},
	}
	for _, c := range cases {
		if got := a.participantBusy([]byte(caller + "\n" + c.other)); got != c.busy {
			t.Errorf("%s: busy = %v, want %v", c.name, got, c.busy)
		}
	}
}

// spin computes until stop is set; its frames are this module's.
//
//go:noinline
func spin(stop *atomic.Bool, started chan<- struct{}) {
	close(started)
	for !stop.Load() {
	}
}

// TestSettleWaitsForAComputingParticipant is the positive control of the
// rule on real dumps: a participant that computes keeps the simulation
// busy, the same goroutine parked lets it settle, a call in flight keeps it
// busy, and a computing goroutine of another simulation is not looked at.
func TestSettleWaitsForAComputingParticipant(t *testing.T) {
	a, b := NewActivity(), NewActivity()
	var stop, stopOther atomic.Bool
	started, otherStarted := make(chan struct{}), make(chan struct{})
	parked, release := make(chan struct{}), make(chan struct{})
	defer stopOther.Store(true)
	b.Do(t.Context(), func(context.Context) {
		go spin(&stopOther, otherStarted)
		<-otherStarted
		a.Do(t.Context(), func(context.Context) {
			go func() {
				spin(&stop, started)
				close(parked)
				<-release
			}()
			<-started
			checkSettle(t, a, &stop, parked)
		})
	})
	close(release)
}

func checkSettle(t *testing.T, a *Activity, stop *atomic.Bool, parked <-chan struct{}) {
	t.Helper()
	if a.exactlyQuiet() {
		t.Error("quiet while a participant computes")
	}
	if err := a.Settle(t.Context(), 50*time.Millisecond); err == nil {
		t.Error("settled while a participant computes")
	}
	stop.Store(true)
	<-parked
	if err := a.Settle(t.Context(), time.Minute); err != nil {
		t.Errorf("never settled although every participant is parked (another simulation's computes): %v", err)
	}
	a.Begin()
	if a.exactlyQuiet() {
		t.Error("quiet with a call in flight")
	}
	a.End()
}

// TestSettleWaitsForAParticipantWaitingOnAMutex: a participant blocked on a
// mutex that a goroutine of no simulation holds while it computes (a
// pooled connection finishing a call that already answered) is busy, not
// parked.
func TestSettleWaitsForAParticipantWaitingOnAMutex(t *testing.T) {
	a := NewActivity()
	var mu sync.Mutex
	var stop atomic.Bool
	holding, parked, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	defer stop.Store(true)
	go func() {
		mu.Lock()
		defer mu.Unlock()
		spin(&stop, holding)
	}()
	<-holding
	a.Do(t.Context(), func(context.Context) {
		go func() {
			mu.Lock()
			close(parked) // it got the mutex: the holder let go
			mu.Unlock()
			<-release
		}()
		checkSettle(t, a, &stop, parked)
	})
	close(release)
}

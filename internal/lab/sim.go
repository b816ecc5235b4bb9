package lab

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"
)

// Sim runs a simulated study's participants (relays, the Lambda emulator's
// invocations, schedules) inside the caller's synctest bubble, whose clock
// is the simulation's: time.Now, timers and sleeps are the bubble's, and
// time moves only when every goroutine of the bubble is durably blocked,
// so a simulated hour sends the same requests however fast the machine is.
// The first participant error stops the simulation. By default each
// function given to At runs on a bubble timer of its own; a driven
// simulation (Drive, the fleet simulation's) queues them for its driver.
type Sim struct {
	ctx    context.Context
	cancel context.CancelFunc
	settle func()
	wg     sync.WaitGroup

	mu  sync.Mutex
	err error
	// driven makes At queue its functions for the caller's driver (Drive):
	// queue is ascending by time, in the order queued at one time, and
	// queued is told of every function queued.
	driven bool
	queue  []queuedFn
	queued func()
}

// queuedFn is a function At queued for the driver.
type queuedFn struct {
	at time.Time
	fn func(now time.Time) error
}

// NewSim returns a simulation under ctx; cfg.Settle must be the bubble's
// synctest.Wait (ErrNotInBubble otherwise).
func NewSim(ctx context.Context, cfg Config) (*Sim, error) {
	if cfg.Settle == nil {
		return nil, ErrNotInBubble
	}
	s := &Sim{settle: cfg.Settle}
	s.ctx, s.cancel = context.WithCancel(ctx)
	return s, nil
}

// StartOnTheHour waits until the bubble's next whole hour and returns it.
// A study starts its simulated window there, so each window begins at the
// same phase of the clock however long the set-up before it took: relays
// quantise times (ticks, whole intervals), and a window that began at
// another phase could see one round more or less.
func (s *Sim) StartOnTheHour() time.Time {
	start := time.Now().Truncate(time.Hour).Add(time.Hour)
	time.Sleep(time.Until(start))
	return start
}

// Context is the participants' context: cancelled by Stop or a failure.
func (s *Sim) Context() context.Context { return s.ctx }

// Go starts a participant; its error stops the simulation.
func (s *Sim) Go(actor func(ctx context.Context) error) {
	s.wg.Go(func() {
		if err := actor(s.ctx); err != nil && s.ctx.Err() == nil {
			s.Fail(err)
		}
	})
}

// At runs fn at t on the bubble's clock (at once when t is past); its
// error stops the simulation. It is the Lambda emulator's Scheduler. In a
// driven simulation (Drive) it queues fn for the driver's RunDue instead.
func (s *Sim) At(t time.Time, fn func(now time.Time) error) {
	s.mu.Lock()
	if s.driven {
		i := sort.Search(len(s.queue), func(i int) bool { return s.queue[i].at.After(t) })
		s.queue = slices.Insert(s.queue, i, queuedFn{at: t, fn: fn})
		queued := s.queued
		s.mu.Unlock()
		if queued != nil {
			queued()
		}
		return
	}
	s.mu.Unlock()
	s.wg.Add(1)
	timer := time.AfterFunc(time.Until(t), func() {
		defer s.wg.Done()
		if s.ctx.Err() != nil {
			return
		}
		if err := fn(time.Now()); err != nil {
			s.Fail(err)
		}
	})
	// A timer stopped by the end of the simulation never runs fn.
	context.AfterFunc(s.ctx, func() {
		if timer.Stop() {
			s.wg.Done()
		}
	})
}

// Drive makes the caller the driver of the functions At is given: At
// queues them, and the driver runs those due with RunDue, typically once
// every participant is blocked. Functions due at one instant then run one
// after the other in the order they were queued, where a timer each would
// leave their order to the scheduler. queued, when not nil, is told of
// every function queued (any goroutine may queue). Call Drive before the
// first At.
func (s *Sim) Drive(queued func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.driven, s.queued = true, queued
}

// Next returns when the earliest function queued for the driver is due.
func (s *Sim) Next() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return time.Time{}, false
	}
	return s.queue[0].at, true
}

// RunDue runs the functions queued for the driver that are due at now,
// those they queue for now included, in time order; it reports whether it
// ran any, and stops at the first error.
func (s *Sim) RunDue(now time.Time) (bool, error) {
	ran := false
	for {
		s.mu.Lock()
		if len(s.queue) == 0 || s.queue[0].at.After(now) {
			s.mu.Unlock()
			return ran, nil
		}
		q := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		ran = true
		if err := q.fn(now); err != nil {
			return ran, err
		}
	}
}

// Fail records the first failure and stops the simulation.
func (s *Sim) Fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.cancel()
}

// RunUntil lets the simulation run until just before end and returns with
// every participant blocked: the window is [now, end), and timers due at
// end (relays' timers fall on whole intervals) have not fired.
func (s *Sim) RunUntil(end time.Time) error {
	if d := time.Until(end) - time.Nanosecond; d > 0 {
		select {
		case <-time.After(d):
		case <-s.ctx.Done():
		}
	}
	s.settle()
	return s.failure()
}

// Settle waits until every participant is blocked.
func (s *Sim) Settle() error {
	s.settle()
	return s.failure()
}

// Stop ends the simulation: the participants see their context cancelled,
// and Stop returns once every one has returned.
func (s *Sim) Stop() error {
	s.cancel()
	s.wg.Wait()
	return s.failure()
}

func (s *Sim) failure() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

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
// The first participant error stops the simulation.
//
// The functions given to At are queued, and one driver runs them: the
// caller's goroutine in Drive or RunUntil, once every participant is
// blocked, in time order and at one instant in the order they were queued.
// A timer each would leave the order of functions due at one instant to
// the scheduler, and a seed would not fix what they start.
type Sim struct {
	ctx    context.Context
	cancel context.CancelFunc
	settle func()
	wg     sync.WaitGroup
	// wake wakes a waiting driver: a function was queued or a participant
	// poked it (Poke).
	wake chan struct{}

	mu  sync.Mutex
	err error
	// queue is ascending by time, in the order queued at one time.
	queue []queuedFn
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
	s := &Sim{settle: cfg.Settle, wake: make(chan struct{}, 1)}
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

// At queues fn to run at t on the bubble's clock (at the driver's next
// instant when t is past); its error stops the simulation. Any goroutine
// may call it, and it wakes a waiting driver. Only a driver (Drive,
// RunUntil) runs queued functions: one queued after the last drive never
// runs. It is the Lambda emulator's Scheduler.
func (s *Sim) At(t time.Time, fn func(now time.Time) error) {
	s.mu.Lock()
	i := sort.Search(len(s.queue), func(i int) bool { return s.queue[i].at.After(t) })
	s.queue = slices.Insert(s.queue, i, queuedFn{at: t, fn: fn})
	s.mu.Unlock()
	s.Poke()
}

// Every queues fn at first and, while fn reports true, again every
// interval after the instant it ran: a schedule on the driver.
func (s *Sim) Every(first time.Time, interval time.Duration, fn func(now time.Time) (again bool)) {
	var at func(now time.Time) error
	at = func(now time.Time) error {
		if fn(now) {
			s.At(now.Add(interval), at)
		}
		return nil
	}
	s.At(first, at)
}

// Poke wakes a waiting driver, so that its step sees, once every
// participant is blocked again, what happened at this instant. Any
// goroutine may call it.
func (s *Sim) Poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Next returns when the earliest queued function is due.
func (s *Sim) Next() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return time.Time{}, false
	}
	return s.queue[0].at, true
}

// Drive is the simulation's driver loop, on the caller's goroutine. At each
// pass it waits until every participant is blocked (Config.Settle), calls
// step, when not nil, with the instant, then runs the queued functions due
// at it (those they queue for it too) one after the other, and passes again
// at the same instant if it ran any: step sees every instant settled
// before and after the functions due at it. Otherwise it waits until the
// next queued function is due, until until, or until a function is queued
// or a participant pokes it (Poke), whichever comes first.
//
// Drive returns step's error, the simulation's first failure (or why its
// context ended), nil when step reports done, and nil at the first pass at
// or after until (unless zero) at which no function is due, with every
// participant blocked. A zero until drives until step ends the drive.
func (s *Sim) Drive(until time.Time, step func(now time.Time) (done bool, err error)) error {
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	for {
		s.settle()
		if s.ctx.Err() != nil {
			if err := s.failure(); err != nil {
				return err
			}
			return context.Cause(s.ctx)
		}
		now := time.Now()
		if step != nil {
			if done, err := step(now); err != nil || done {
				return err
			}
		}
		ran, err := s.runDue(now)
		if err != nil {
			s.Fail(err)
			return s.failure()
		}
		if ran {
			continue
		}
		if !until.IsZero() && !now.Before(until) {
			return nil
		}
		next, queued := s.Next()
		if !until.IsZero() && (!queued || until.Before(next)) {
			next, queued = until, true
		}
		wake.Stop()
		if queued {
			wake.Reset(next.Sub(now))
		}
		select {
		case <-s.wake:
		case <-wake.C:
		case <-s.ctx.Done():
		}
	}
}

// runDue runs the queued functions due at now, those they queue for now
// included, in time order; it reports whether it ran any, and stops at the
// first error.
func (s *Sim) runDue(now time.Time) (bool, error) {
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

// RunUntil drives the simulation until just before end and returns with
// every participant blocked: the window is [now, end), and what is due at
// end (relays' timers fall on whole intervals) has not run.
func (s *Sim) RunUntil(end time.Time) error {
	return s.Drive(end.Add(-time.Nanosecond), nil)
}

// Settle waits until every participant is blocked.
func (s *Sim) Settle() error {
	s.settle()
	return s.failure()
}

// Stop ends the simulation: the participants see their context cancelled,
// and Stop returns once every one has returned. Queued functions never run.
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

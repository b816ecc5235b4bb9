package bench

import (
	"context"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// simStart is where simulated time starts: a fixed instant, so stored
// timestamps are the same in every run.
var simStart = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

// forever is how long an actor with nothing left to do parks.
const forever = 10_000 * time.Hour

// simulation moves a manual clock from timer to timer while a fixed set of
// actors runs against it. Every actor waits on at most one clock timer at a
// time and parks on one once it has nothing left to do, so "every actor is
// parked" reads as "as many timers pending as actors": the clock then moves
// to the earliest timer, and never while an actor is between two steps.
// That makes the requests of a simulated hour the same in every run, however
// fast the machine is.
type simulation struct {
	clock *outboxlocal.ManualClock

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	actors int

	mu  sync.Mutex
	err error
}

func newSimulation(ctx context.Context, clock *outboxlocal.ManualClock) *simulation {
	s := &simulation{clock: clock}
	s.ctx, s.cancel = context.WithCancel(ctx)
	return s
}

// spawn starts an actor. An actor's error stops the simulation; an actor
// that returns without error must not return before the simulation ends
// (park with s.park instead).
func (s *simulation) spawn(actor func(ctx context.Context) error) {
	s.actors++
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := actor(s.ctx); err != nil && s.ctx.Err() == nil {
			s.mu.Lock()
			if s.err == nil {
				s.err = err
			}
			s.mu.Unlock()
			s.cancel()
		}
	}()
}

// sleepUntil waits on the clock until t (at once when t is not after now);
// false means the simulation ended.
func (s *simulation) sleepUntil(ctx context.Context, t time.Time) bool {
	return outbox.Sleep(s.clock, t.Sub(s.clock.Now()), ctx.Done())
}

// park waits until the simulation ends.
func (s *simulation) park(ctx context.Context) { s.sleepUntil(ctx, s.clock.Now().Add(forever)) }

// runUntil advances the clock until just before end and returns with every
// actor parked: the window is [start, end), and timers due at end (the
// relays' timers fall on whole intervals) have not fired.
func (s *simulation) runUntil(end time.Time) error {
	stop := s.clock.NewTimer(end.Add(-time.Nanosecond).Sub(s.clock.Now()))
	defer stop.Stop()
	for {
		if err := s.clock.BlockUntilContext(s.ctx, s.actors+1); err != nil {
			return s.failure(err)
		}
		s.clock.AdvanceToNext()
		select {
		case <-stop.C():
			return nil
		default:
		}
	}
}

// stop ends the simulation: the actors see their context cancelled.
func (s *simulation) stop() error {
	s.cancel()
	s.wg.Wait()
	return s.failure(nil)
}

func (s *simulation) failure(fallback error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	return fallback
}

package bench

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/internal/simtime"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// simStart is where simulated time starts: a fixed instant, so stored
// timestamps are the same in every run.
var simStart = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

// settleLimit bounds the wall time the driver waits for the participants
// to park: one that never does is a bug of the simulation.
const settleLimit = 2 * time.Minute

// simulation runs a scenario's participants (relays, the Lambda emulator's
// invocations) on a manual clock under internal/simtime's rule: the clock
// moves to the next event or timer only once every participant is parked
// and no DynamoDB or Kafka call is in flight, so the requests of a
// simulated hour are the same in every run, however fast the machine is.
type simulation struct {
	act    *simtime.Activity
	base   *outboxlocal.ManualClock
	clock  outbox.Clock // base as the participants see it
	agenda *simtime.Agenda

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu  sync.Mutex
	err error
}

func newSimulation(ctx context.Context) *simulation {
	act := simtime.NewActivity()
	base := outboxlocal.NewManualClock(simStart)
	s := &simulation{act: act, base: base, clock: act.Clock(base), agenda: simtime.NewAgenda(base)}
	s.ctx, s.cancel = context.WithCancel(ctx)
	return s
}

// do runs f as the simulation's driver, inside the activity so that every
// goroutine f starts is a participant, then stops whatever still runs.
func (s *simulation) do(f func() error) error {
	var err error
	s.act.Do(s.ctx, func(ctx context.Context) {
		s.ctx = ctx
		err = f()
	})
	return errors.Join(err, s.stop())
}

// dynamoDB returns a client of the embedded server (sharing its Counter)
// whose every operation is a call in flight for the driver.
func (s *simulation) dynamoDB(ddb *outboxlocal.DynamoDB) *dynamodb.Client {
	return ddb.NewClient(s.act.DynamoDBOption())
}

// publisher returns p with every call a call in flight for the driver.
func (s *simulation) publisher(p outbox.Publisher) outbox.Publisher {
	return simtime.Publisher(s.act, p)
}

// spawn starts a participant. Its error stops the simulation.
func (s *simulation) spawn(actor func(ctx context.Context) error) {
	s.wg.Go(func() {
		if err := actor(s.ctx); err != nil && s.ctx.Err() == nil {
			s.fail(err)
		}
	})
}

// fail records the first failure and stops the simulation.
func (s *simulation) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.cancel()
}

// settle waits until every participant is parked; it fails on a recorded
// failure.
func (s *simulation) settle() error {
	if err := s.act.Settle(s.ctx, settleLimit); err != nil {
		return s.failure(err)
	}
	return s.failure(nil)
}

// step settles, runs the agenda's events due now, and otherwise moves the
// clock to the next event or timer. It reports false when nothing is left
// to happen.
func (s *simulation) step() (bool, error) {
	if err := s.settle(); err != nil {
		return false, err
	}
	now := s.base.Now()
	ran, err := s.agenda.RunDue(now)
	if err != nil {
		s.fail(err)
		return false, err
	}
	if ran {
		return true, nil
	}
	return s.agenda.Advance(now), nil
}

// runUntil moves the clock until just before end and returns with every
// participant parked: the window is [start, end), and timers due at end
// (the relays' timers fall on whole intervals) have not fired.
func (s *simulation) runUntil(end time.Time) error {
	done := false
	s.agenda.At(end.Add(-time.Nanosecond), func(time.Time) error {
		done = true
		return nil
	})
	for !done {
		more, err := s.step()
		if err != nil {
			return err
		}
		if !more {
			return errors.New("bench: the simulation stopped before its window ended: nothing pending")
		}
	}
	return s.settle()
}

// stop ends the simulation: the participants see their context cancelled.
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

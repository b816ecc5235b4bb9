package outboxlambda

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/internal/simtime"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// simulation is a manual clock that moves by internal/simtime's rule: to
// its next timer, only while every participant is parked and no DynamoDB
// or Kafka call is in flight. A bundle set up with it runs its handlers,
// stores and publisher on it, so an invocation's budget, linger and polls
// are simulated time and the backends' real I/O takes none of it: how long
// a loaded machine takes to answer cannot change what a run does.
type simulation struct {
	manual *outboxlocal.ManualClock
	act    *simtime.Activity
	clock  outbox.Clock // manual as the participants see it
}

func newSimulation() *simulation {
	manual := outboxlocal.NewManualClock(time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC))
	act := simtime.NewActivity()
	return &simulation{manual: manual, act: act, clock: act.Clock(manual)}
}

// invoke hands payload to the relay handler as Lambda would with the given
// function timeout, on the simulated clock: the context reports the
// deadline as the time left on the clock (converted to the wall clock, as
// Lambda's context carries it) and is cancelled when the clock reaches it,
// as Lambda kills the invocation. It reports whether the invocation was
// killed.
func (s *simulation) invoke(t *testing.T, b *bundle, payload json.RawMessage, timeout time.Duration) (RelayResponse, bool) {
	t.Helper()
	ctx, kill := context.WithCancel(t.Context())
	defer kill()
	deadline := s.manual.Now().Add(timeout)
	limit := s.manual.NewTimer(timeout)
	defer limit.Stop()
	running, finished := context.WithCancel(t.Context())
	var (
		resp RelayResponse
		err  error
	)
	s.act.Go(running, func(context.Context) {
		defer finished()
		resp, err = b.relay.Handle(outboxlocal.DeadlineContext(ctx, s.manual, deadline), payload)
	})
	killed := false
	for running.Err() == nil {
		// A settle that runs out of wall time (a participant computing
		// long on a loaded machine) is only looked at again.
		if s.act.Settle(running, time.Minute) != nil {
			continue
		}
		s.manual.AdvanceToNext()
		select {
		case <-limit.C():
			killed = true
			kill()
		default:
		}
	}
	if err != nil {
		t.Fatalf("relay: %v", err)
	}
	return resp, killed
}

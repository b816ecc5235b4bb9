package scale

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/internal/simtime"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// stepper runs concurrent simulated processes one at a time, in simulated
// time order, so their DynamoDB requests interleave as they would in time
// and a seed reproduces a run exactly.
//
// A process is a goroutine that only ever waits in two places: a request
// through the stepper's client (it takes the request latency) and sleep.
// Both hand control back to the stepper, which moves the clock to the
// earliest waiting process's time and resumes exactly that one, then waits
// until it waits again or ends. Because at most one process runs and each
// store keeps at most one request in flight (MaxConcurrency 1), nothing
// needs to be observed from the outside to know that every process is
// parked: the resumptions are events of internal/simtime's Agenda.
type stepper struct {
	clock *outboxlocal.ManualClock
	be    backend
	// charge receives the units of every request at the instant it is
	// applied.
	charge func(at time.Time, d tally)

	agenda *simtime.Agenda
	yield  chan struct{} // the running process parked or ended
}

func newStepper(clock *outboxlocal.ManualClock, be backend, charge func(time.Time, tally)) *stepper {
	return &stepper{clock: clock, be: be, charge: charge, agenda: simtime.NewAgenda(clock), yield: make(chan struct{})}
}

// at schedules a resumption at t and returns the channel that resumes it.
// Called by the running process (or before the run starts).
func (s *stepper) at(t time.Time) chan struct{} {
	ch := make(chan struct{})
	s.agenda.At(t, func(time.Time) error {
		ch <- struct{}{}
		<-s.yield
		return nil
	})
	return ch
}

// spawn schedules a new process starting at t.
func (s *stepper) spawn(t time.Time, proc func()) {
	ch := s.at(t)
	go func() {
		<-ch
		defer func() { s.yield <- struct{}{} }()
		proc()
	}()
}

// sleep parks the running process for d of simulated time.
func (s *stepper) sleep(d time.Duration) {
	ch := s.at(s.clock.Now().Add(d))
	s.yield <- struct{}{}
	<-ch
}

// run resumes processes in time order until none is waiting or until is
// reached (then the waiting ones are abandoned with the clock at until).
func (s *stepper) run(until time.Time) {
	for {
		next, ok := s.agenda.Next()
		if !ok {
			return
		}
		if next.After(until) {
			s.clock.Set(until)
			return
		}
		s.clock.Set(next)
		// Each resumption returns once its process parks again or ends.
		_, _ = s.agenda.RunDue(next)
	}
}

// client returns the stepper's client over inner: every request waits its
// latency in simulated time before it is applied; lease writes and prunes
// wait writeLatency, as a store sends several of them at once.
func (s *stepper) client(inner outboxddb.Client, latency, writeLatency time.Duration) outboxddb.Client {
	return &steppedClient{Client: inner, s: s, latency: latency, writeLatency: writeLatency}
}

type steppedClient struct {
	outboxddb.Client
	s                     *stepper
	latency, writeLatency time.Duration
}

// send waits latency, then applies the request and charges its units to
// that instant.
func send[O any](c *steppedClient, latency time.Duration, call func() (O, error)) (O, error) {
	c.s.sleep(latency)
	before := c.s.be.tally()
	out, err := call()
	c.s.charge(c.s.clock.Now(), c.s.be.tally().since(before))
	return out, err
}

func (c *steppedClient) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return send(c, c.latency, func() (*dynamodb.QueryOutput, error) { return c.Client.Query(ctx, in, optFns...) })
}

func (c *steppedClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return send(c, c.latency, func() (*dynamodb.PutItemOutput, error) { return c.Client.PutItem(ctx, in, optFns...) })
}

func (c *steppedClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return send(c, c.writeLatency, func() (*dynamodb.UpdateItemOutput, error) { return c.Client.UpdateItem(ctx, in, optFns...) })
}

func (c *steppedClient) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return send(c, c.writeLatency, func() (*dynamodb.DeleteItemOutput, error) { return c.Client.DeleteItem(ctx, in, optFns...) })
}

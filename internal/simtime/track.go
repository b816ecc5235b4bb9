package simtime

import (
	"context"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/spillway-dev/spillway/outbox"
)

// DynamoDBOption makes every operation of a DynamoDB client one call in
// flight, from before its first attempt to after its answer is decoded
// (retries and their backoff included). A client on a *http.Client (the
// embedded server's, or none) also gets a transport of its own, a clone of
// the one it had: its connections are then dialled, and their goroutines
// started, by participants, whereas a connection of a shared pool may have
// been opened by another simulation or outside any, and would finish the
// work of a call unseen. Other HTTP clients are kept.
func (a *Activity) DynamoDBOption() func(*dynamodb.Options) {
	inFlight := middleware.InitializeMiddlewareFunc("SimulationCallInFlight", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		a.Begin()
		defer a.End()
		return next.HandleInitialize(ctx, in)
	})
	return func(o *dynamodb.Options) {
		if c, ok := o.HTTPClient.(*http.Client); ok || o.HTTPClient == nil {
			o.HTTPClient = ownTransport(c)
		}
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(inFlight, middleware.Before)
		})
	}
}

// ownTransport returns a copy of c (nil for the default client) on a clone
// of its transport, or of the default one.
func ownTransport(c *http.Client) *http.Client {
	own := &http.Client{}
	if c != nil {
		*own = *c
	}
	t, ok := own.Transport.(*http.Transport)
	if !ok {
		t = http.DefaultTransport.(*http.Transport)
	}
	own.Transport = t.Clone()
	return own
}

// Publisher returns p with its Init and Publish each one call in flight,
// from the call to its answer (a Kafka client waiting for the broker looks
// parked, yet the simulation is not idle).
func Publisher(a *Activity, p outbox.Publisher) outbox.Publisher {
	return trackedPublisher{inner: p, act: a}
}

type trackedPublisher struct {
	inner outbox.Publisher
	act   *Activity
}

func (p trackedPublisher) Init(ctx context.Context) error {
	p.act.Begin()
	defer p.act.End()
	return p.inner.Init(ctx)
}

func (p trackedPublisher) Publish(ctx context.Context, msgs []outbox.Message) (int, error) {
	return Track(p.act, func() (int, error) { return p.inner.Publish(ctx, msgs) })
}

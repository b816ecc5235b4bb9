package scale

import (
	"context"
	"fmt"

	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// backend answers the relays' requests and counts them.
type backend interface {
	client() outboxddb.Client
	table() string
	// tally is what the backend counted so far: attempts per operation,
	// refused conditional writes and capacity units.
	tally() outboxlocal.Counts
	close()
}

// newBackend starts the backend cfg selects. The relays only run
// acquisition rounds, so every request they send is on the coordination
// partition and the backend's whole tally is that partition's.
func newBackend(ctx context.Context, cfg Config) (backend, error) {
	switch cfg.Backend {
	case Embedded:
		return startEmbedded(ctx)
	case Model:
		return newModel(), nil
	}
	return nil, fmt.Errorf("scale: unknown backend %q", cfg.Backend)
}

// embedded is the embedded DynamoDB server, served in memory in the
// caller's goroutine (a bubble's clock moves only while every goroutine
// waits where it can see); its Counter counts.
type embedded struct {
	ddb  *outboxlocal.DynamoDB
	name string
}

func startEmbedded(ctx context.Context) (*embedded, error) {
	ddb, err := outboxlocal.StartDynamoDB(ctx, outboxlocal.InMemory(), outboxlocal.WithoutEnvironment())
	if err != nil {
		return nil, err
	}
	name := ddb.NewTableName()
	if err := ddb.CreateTable(ctx, name); err != nil {
		ddb.Close()
		return nil, err
	}
	ddb.Counter.Reset()
	return &embedded{ddb: ddb, name: name}, nil
}

func (e *embedded) client() outboxddb.Client { return e.ddb.Client }
func (e *embedded) table() string            { return e.name }
func (e *embedded) close()                   { _ = e.ddb.Close() }

func (e *embedded) tally() outboxlocal.Counts {
	// Served in memory, no attempt fails on the way (no socket to reset),
	// so every attempt counted is one the relays sent, as with the model.
	c := e.ddb.Counter.Snapshot()
	return outboxlocal.Counts{Requests: c.Requests, Refused: c.Refused, ReadUnits: c.ReadUnits, WriteUnits: c.WriteUnits}.Since(outboxlocal.Counts{})
}

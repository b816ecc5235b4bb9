// Package relayproc wires one relay process the way the in-process users
// need it (the operator CLI's drain, the bench's relays): an
// outboxddb.Store on the outbox table, a Kafka publisher of its own or one
// shared with other relays, and an outbox.Relay over them. The relay
// function's binary wires the same parts around its handler in
// outboxlambda (NewRelayFromEnv), and the simulations wrap them to inject
// faults, so neither goes through here.
package relayproc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
)

// Config describes one relay process.
type Config struct {
	// DynamoDB is the client of the store (required).
	DynamoDB outboxddb.Client
	// Store are the store's options; its Clock and Logger default to the
	// relay's.
	Store outboxddb.StoreOptions
	// Publisher is a publisher shared with other relays: the process uses
	// it and does not close it. When nil, the process makes its own from
	// Kafka, and InitPublisher initialises it at once, so that an
	// unreachable cluster fails here rather than in the first run.
	Publisher     outbox.Publisher
	Kafka         outboxkafka.Config
	InitPublisher bool
	// Relay are the relay's options (RelayID and BucketCount required).
	Relay outbox.RelayOptions
	// Clock, Hooks and Logger are the relay's. Defaults: the system
	// clock, none, slog.Default().
	Clock  outbox.Clock
	Hooks  []outbox.Hook
	Logger *slog.Logger
}

// Proc is one relay process: its store, its relay, and the publisher it
// owns (none when it shares one).
type Proc struct {
	Store *outboxddb.Store
	Relay *outbox.Relay
	own   *outboxkafka.Publisher
}

// New builds the process. Errors are misconfigurations or, with
// InitPublisher, Kafka's.
func New(ctx context.Context, cfg Config) (*Proc, error) {
	if cfg.DynamoDB == nil {
		return nil, errors.New("relayproc: DynamoDB client required")
	}
	if cfg.Clock == nil {
		cfg.Clock = outbox.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	sopts := cfg.Store
	if sopts.Clock == nil {
		sopts.Clock = cfg.Clock
	}
	if sopts.Logger == nil {
		sopts.Logger = cfg.Logger
	}
	store, err := outboxddb.NewStore(cfg.DynamoDB, sopts)
	if err != nil {
		return nil, err
	}
	p := &Proc{Store: store}
	pub := cfg.Publisher
	if pub == nil {
		if p.own, err = NewPublisher(ctx, cfg.Kafka, cfg.InitPublisher); err != nil {
			return nil, err
		}
		pub = p.own
	}
	// The relay serves its generation only once the one it replaces, if
	// any, is drained, as the relay function's does: the store's
	// predecessor marker is its gate.
	p.Relay, err = outbox.NewRelay(outbox.RelayConfig{
		Options: cfg.Relay, Store: store, Publisher: pub, Gate: store,
		Clock: cfg.Clock, Hooks: cfg.Hooks, Logger: cfg.Logger,
	})
	if err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Close closes the publisher the process owns.
func (p *Proc) Close() {
	if p.own != nil {
		p.own.Close()
	}
}

// NewPublisher returns a Kafka publisher for cfg, initialised (connected)
// when init is set.
func NewPublisher(ctx context.Context, cfg outboxkafka.Config, init bool) (*outboxkafka.Publisher, error) {
	p, err := outboxkafka.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("kafka publisher: %w", err)
	}
	if init {
		if err := p.Init(ctx); err != nil {
			p.Close()
			return nil, fmt.Errorf("kafka publisher: %w", err)
		}
	}
	return p, nil
}

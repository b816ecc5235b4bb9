package outboxlambda

import "github.com/spillway-dev/spillway/outbox/outboxwake"

// The wake-up notifier lives in outboxwake, which services import without
// this package's Kafka and tracing dependencies; these names keep the
// functions' and the tools' code reading as before.
type (
	// Notifier is outboxwake.Notifier.
	Notifier = outboxwake.Notifier
	// NotifierConfig is outboxwake.NotifierConfig.
	NotifierConfig = outboxwake.NotifierConfig
	// Invoker is outboxwake.Invoker.
	Invoker = outboxwake.Invoker
	// OwnerReader is outboxwake.OwnerReader.
	OwnerReader = outboxwake.OwnerReader
)

// NewNotifier is outboxwake.NewNotifier.
func NewNotifier(cfg NotifierConfig) (*Notifier, error) { return outboxwake.NewNotifier(cfg) }

package outboxwake

import (
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// WriterFromEnv returns the writer of a service deployed next to the
// stack, configured by the variables the stack sets on its enqueue
// function (copy them to the service): the table and its layout
// (outboxddb.WriterOptionsFromEnv), SPILLWAY_DYNAMODB_ENDPOINT and, when
// SPILLWAY_RELAY_FUNCTION is set, a Notifier that wakes that function after
// every commit and skips the wake-ups a live relay covers
// (SPILLWAY_LEASE_DURATION, default 30s). Without SPILLWAY_RELAY_FUNCTION
// the messages wait for the relay's schedule, and it logs a warning saying
// so, unless the endpoint is local (outboxconf.LocalEndpoint), where no
// schedule runs and the relay is whichever one the user starts. cfg is the service's AWS SDK configuration; log receives the
// writer's warnings (nil: slog.Default()). getenv is os.Getenv outside
// tests. The error is an *outboxconf.VariableError naming the first
// unusable variable.
func WriterFromEnv(cfg aws.Config, getenv func(string) string, log *slog.Logger) (*outboxddb.Writer, error) {
	if log == nil {
		log = slog.Default()
	}
	opts, err := outboxddb.WriterOptionsFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	env := outboxconf.NewEnv(getenv)
	endpoint := env.Endpoint(outboxconf.EnvDynamoDBEndpoint)
	function := env.Function(outboxconf.EnvRelayFunction)
	lease := env.Duration(outboxconf.EnvLeaseDuration, outbox.DefaultLeaseDuration)
	if err := env.Err(); err != nil {
		return nil, err
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
	opts.Logger = log
	switch {
	case function == "" && outboxconf.LocalEndpoint(endpoint):
		// No schedule runs beside a local endpoint: the relay is the one
		// its user runs (spillway drain), which needs no warning.
		log.Debug("no relay function configured: committed messages wait for a relay you run", "variable", outboxconf.EnvRelayFunction)
		return outboxddb.NewWriter(client, opts)
	case function == "":
		log.Warn("no relay function configured: committed messages wait for the relay's schedule", "variable", outboxconf.EnvRelayFunction)
		return outboxddb.NewWriter(client, opts)
	}
	owners, err := outboxddb.NewStore(client, outboxddb.StoreOptions{Options: opts.Options})
	if err != nil {
		return nil, err
	}
	notifier, err := NewNotifier(NotifierConfig{Client: lambda.NewFromConfig(cfg), FunctionName: function, Logger: log,
		Owners: owners, LeaseDuration: lease})
	if err != nil {
		return nil, err
	}
	opts.Notifier = notifier
	return outboxddb.NewWriter(client, opts)
}

// Command relay is the relay Lambda function (provided.al2023, binary
// bootstrap, built with -tags lambda.norpc). Each invocation is one relay
// lifetime: triggered by the schedule, a wake-up or a DynamoDB Streams
// batch, it relays until its work is done or its deadline nears, then
// releases its leases. The store, the Kafka client and the relay id are
// created once per execution environment and reused by warm invocations.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

func main() {
	log := outboxlambda.NewLogger(os.Stdout, os.Getenv)
	outboxlambda.SetMemoryLimit(os.Getenv)
	h, err := outboxlambda.NewRelayFromEnv(context.Background(), os.Getenv, log)
	if err != nil {
		log.Error("relay function cannot start", "error", err)
		os.Exit(1)
	}
	log.Info("relay function ready", "relayId", h.RelayID())
	// h decodes the raw payload itself (h.Invoke), so every body gets the
	// relay's answer. SIGTERM (sent before the environment is shut down
	// once any extension is registered, which the option does) runs
	// Shutdown: a run in progress stops and releases its leases, the last
	// metrics are written and the clients closed.
	lambda.StartWithOptions(h, lambda.WithEnableSIGTERM(h.Shutdown))
}

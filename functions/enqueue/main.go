// Command enqueue is the enqueue Lambda function (provided.al2023, binary
// bootstrap, built with -tags lambda.norpc): it stores messages sent as
// JSON by producers that do not use the Go writer, all or nothing, and
// wakes the relay function. The DynamoDB and Lambda clients are created
// once per execution environment.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

func main() {
	log := outboxlambda.NewLogger(os.Stdout, os.Getenv)
	h, err := outboxlambda.NewEnqueueFromEnv(context.Background(), os.Getenv, log)
	if err != nil {
		log.Error("enqueue function cannot start", "error", err)
		os.Exit(1)
	}
	// h decodes the raw payload itself (h.Invoke), so every body gets the
	// function's answer. SIGTERM (sent before the environment is shut down
	// once any extension is registered, which the option does) runs
	// Shutdown: the last metrics are written.
	lambda.StartWithOptions(h, lambda.WithEnableSIGTERM(h.Shutdown))
}

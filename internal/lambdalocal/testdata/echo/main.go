// Command echo is a Lambda function for the emulator's tests: it answers
// each event with itself and asks for SIGTERM, as the relay and enqueue
// functions do, which registers the internal extension whose lost
// connection a careless shutdown prints.
package main

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.StartWithOptions(func(_ context.Context, in json.RawMessage) (json.RawMessage, error) { return in, nil },
		lambda.WithEnableSIGTERM(func() {}))
}

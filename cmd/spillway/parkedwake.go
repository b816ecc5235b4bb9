package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxwake"
)

// wakeForReplay wakes the relay function for the buckets of the marked
// messages, so a replay does not wait for the schedule when no relay holds
// them (a relay that does reads the request within a lease renewal
// interval). A failed wake-up fails nothing: the marks stay, and the
// schedule finds them.
func wakeForReplay(ctx context.Context, function string, marked []outboxddb.ParkedMessage, stdout io.Writer, log *slog.Logger) {
	var buckets []int
	for _, p := range marked {
		if !slices.Contains(buckets, p.Bucket) {
			buckets = append(buckets, p.Bucket)
		}
	}
	slices.Sort(buckets)
	err := notifyRelay(ctx, function, outbox.WakeUp{Buckets: buckets}, log)
	if err != nil {
		fmt.Fprintf(stdout, "waking %s failed (%v): the relays' schedule picks the replay up\n", function, err)
		return
	}
	fmt.Fprintf(stdout, "woke %s for bucket(s) %v\n", function, buckets)
}

// notifyRelay sends one wake-up to function with the AWS configuration of
// the environment (AWS_ENDPOINT_URL_LAMBDA points it elsewhere).
func notifyRelay(ctx context.Context, function string, w outbox.WakeUp, log *slog.Logger) error {
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("load AWS configuration: %w", err)
	}
	n, err := outboxwake.NewNotifier(outboxwake.NotifierConfig{Client: lambda.NewFromConfig(awsCfg), FunctionName: function, Logger: log})
	if err != nil {
		return err
	}
	return n.Notify(ctx, w)
}

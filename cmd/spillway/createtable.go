package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

func init() {
	register("create-table", "create the outbox table if it does not exist and wait until it is active", runCreateTable)
}

func runCreateTable(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("create-table", "create-table --table NAME [--dynamodb-endpoint URL]", stderr)
	ef := addEndpointFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := ef.config()
	if err != nil {
		return usagef("%v", err)
	}
	client, err := dynamoClient(ctx, cfg)
	if err != nil {
		return err
	}
	if err := outboxddb.CreateIfNotExists(ctx, client, cfg.StoreOptions()); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "table %s is active\n", cfg.Table)
	return err
}

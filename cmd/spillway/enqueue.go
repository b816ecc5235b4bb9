package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// errRefused marks a request the enqueue API refused; the response was
// printed already.
var errRefused = errors.New("request refused; nothing was written")

func runEnqueue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("enqueue", stdout)
	ef := addTableFlags(fs).withOutbox()
	file := fs.String("file", "-", "request JSON file, - for stdin (same format as the enqueue function)")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := ef.config()
	if err != nil {
		return usagef("%v", err)
	}
	var in io.Reader = os.Stdin
	if *file != "-" {
		f, err := os.Open(*file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	payload, err := io.ReadAll(in)
	if err != nil {
		return fmt.Errorf("read request: %w", err)
	}
	client, err := dynamoClient(ctx, cfg)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := cfg.StoreOptions()
	opts.Logger = log
	writer, err := outboxddb.NewWriter(client, opts)
	if err != nil {
		return err
	}
	h, err := outboxlambda.NewEnqueueHandler(outboxlambda.EnqueueHandlerConfig{Config: cfg, Writer: writer, Logger: log})
	if err != nil {
		return err
	}
	resp, err := h.Handle(ctx, payload)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(resp); err != nil {
		return err
	}
	if resp.Error != "" {
		return errRefused
	}
	return nil
}

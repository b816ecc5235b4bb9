package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

func init() {
	register("drain", "relay until the outbox is empty (exit 0) or --timeout passes (exit 1)", runDrain)
}

func runDrain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("drain", "drain --table NAME --brokers HOST:PORT [--relays N] [--timeout D]", stderr)
	ef := addEndpointFlags(fs)
	relays := fs.Int("relays", 1, "relays to run concurrently, each with its own id")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	progress := fs.Duration("progress", 2*time.Second, "interval between progress lines (0: none)")
	verbose := fs.Bool("v", false, "log the relays' activity")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *relays < 1 {
		return usagef("--relays must be >= 1")
	}
	cfg, err := ef.config()
	if err != nil {
		return usagef("%v", err)
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	client, err := dynamoClient(ctx, cfg)
	if err != nil {
		return err
	}
	kcfg, err := kafkaConfig(ctx, cfg)
	if err != nil {
		return err
	}
	store, err := outboxddb.NewStore(client, cfg.StoreOptions())
	if err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	start := time.Now()
	var (
		mu        sync.Mutex
		published int
		runErr    error
		wg        sync.WaitGroup
	)
	for i := range *relays {
		pub, err := outboxkafka.New(kcfg)
		if err != nil {
			return err
		}
		defer pub.Close()
		r, err := outbox.NewRelay(outbox.RelayConfig{
			Options:   cfg.RelayOptions(outboxlambda.NewRelayID(fmt.Sprintf("spillway-drain-%d", i))),
			Store:     store,
			Publisher: pub,
			Logger:    log,
		})
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.Run(ctx, outbox.RunInput{Trigger: outbox.TriggerDirect, Deadline: deadline})
			mu.Lock()
			defer mu.Unlock()
			published += res.Published
			if err != nil && runErr == nil {
				runErr = err
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	if *progress > 0 {
		tick := time.NewTicker(*progress)
		defer tick.Stop()
	loop:
		for {
			select {
			case <-done:
				break loop
			case <-tick.C:
				mu.Lock()
				n := published
				mu.Unlock()
				if bl, err := store.Backlog(ctx); err == nil {
					fmt.Fprintf(stdout, "%6.1fs  published %d  pending %d\n", time.Since(start).Seconds(), n, bl.Pending)
				}
			}
		}
	}
	<-done
	if runErr != nil {
		return runErr
	}
	bl, err := store.Backlog(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "published %d in %.1fs; %d pending\n", published, time.Since(start).Seconds(), bl.Pending)
	if bl.Pending > 0 {
		return errNotEmpty
	}
	return nil
}

var errNotEmpty = errors.New("the outbox is not empty")

// kafkaConfig returns the publisher configuration, reading the SCRAM secret
// from Secrets Manager when the configuration names one.
func kafkaConfig(ctx context.Context, cfg outboxlambda.Config) (outboxkafka.Config, error) {
	var secrets outboxlambda.SecretGetter
	if cfg.KafkaScramSecretARN != "" {
		awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return outboxkafka.Config{}, fmt.Errorf("load AWS configuration: %w", err)
		}
		secrets = secretsmanager.NewFromConfig(awsCfg)
	}
	kcfg, err := cfg.KafkaConfig(ctx, secrets)
	if err != nil {
		return outboxkafka.Config{}, usagef("%v", err)
	}
	return kcfg, nil
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestInProcessRelay(t *testing.T) {
	// The program relays what is committed while it runs, and a cancelled
	// context (SIGTERM) stops it cleanly: it returns with every lease
	// released, within its stop timeout, and logs no error.
	t.Run("RelaysAndStopsCleanlyWhenItsContextEnds", func(t *testing.T) {
		ddb := outboxtest.NewDynamoDB(t)
		kafka := outboxtest.NewKafka(t, "orders")
		table := outboxtest.CreateTable(t, ddb)
		env := map[string]string{
			"SPILLWAY_DYNAMODB_ENDPOINT": ddb.Endpoint,
			"SPILLWAY_KAFKA_BROKERS":     strings.Join(kafka.Brokers, ","),
			"SPILLWAY_TABLE":             table,
		}
		if !ddb.External {
			t.Setenv("AWS_ACCESS_KEY_ID", "local")
			t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
			t.Setenv("AWS_REGION", "us-east-1")
			t.Setenv("AWS_PROFILE", "")
		}
		var logs lockedBuffer
		logger := slog.New(slog.NewTextHandler(&logs, nil))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- run(ctx, func(k string) string { return env[k] }, logger) }()

		w, err := outboxddb.NewWriter(ddb.Client, outboxddb.WriterOptions{Options: outboxddb.Options{TableName: table}})
		if err != nil {
			t.Fatal(err)
		}
		const n = 40
		for i := range n {
			m, err := outbox.NewMessage(kafka.Topic("orders"), fmt.Appendf(nil, "order-%d", i%8), []byte("paid"), outbox.MessageOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Enqueue(t.Context(), m); err != nil {
				t.Fatal(err)
			}
		}
		outboxtest.Consume(t, kafka, kafka.Topic("orders"), n)

		cancelled := time.Now()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(stopTimeout):
			t.Fatalf("the relay had not stopped %v after its context ended", stopTimeout)
		}
		took := time.Since(cancelled)
		store, err := outboxddb.NewStore(ddb.Client, outboxddb.StoreOptions{Options: outboxddb.Options{TableName: table}})
		if err != nil {
			t.Fatal(err)
		}
		view, err := store.ReadCoordination(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(view.Leases) == 0 {
			t.Fatal("the relay never claimed a bucket")
		}
		for _, l := range view.Leases {
			if l.Owner != "" && !l.Expired(time.Now()) {
				t.Fatalf("bucket %d still held by %s until %v after the stop", l.Bucket, l.Owner, l.ExpiresAt)
			}
		}
		if s := logs.String(); strings.Contains(s, "level=ERROR") || !strings.Contains(s, "reason=cancelled") {
			t.Fatalf("the stop logged:\n%s", s)
		}
		t.Logf("stopped and released %d leases %v after the context ended", len(view.Leases), took.Round(time.Millisecond))
	})
}

// lockedBuffer collects the relay's logs from its goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

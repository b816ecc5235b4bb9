//go:build unix

package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// TestRelayDoorbell runs both bootstraps under the emulator with
// SPILLWAY_DOORBELL_TOPIC set and asserts that a commit reaches Kafka
// through the ring, not the relay's poll.
func TestRelayDoorbell(t *testing.T) {
	// The relay holds the buckets (hold mode, a 30 s poll, an 8 s budget:
	// no poll and no lease round after its claim's probe); a message the
	// enqueue function commits meanwhile is published within seconds only
	// if the function rang and the relay listened. Without the ring the
	// relay's stop would find it and leave it to a continuation wake-up.
	t.Run("TheEnqueueFunctionRingsTheHoldingRelay", func(t *testing.T) {
		f := newFixture(t)
		bell := f.kafka.Topic("spillway-doorbell")
		if err := f.kafka.CreateTopic(t.Context(), bell, 2); err != nil {
			t.Fatal(err)
		}
		vars := map[string]string{outboxconf.EnvDoorbellTopic: bell}
		enqueue := f.start(t, "enqueue", vars)
		invoke[outboxlambda.EnqueueResponse](t, enqueue, f.sample(t, "enqueue.single.json"))
		wakes := f.invoke.Invocations()
		if len(wakes) != 1 {
			t.Fatalf("%d wake-ups, want 1", len(wakes))
		}
		relay := f.start(t, "relay", map[string]string{outboxconf.EnvDoorbellTopic: bell, outboxconf.EnvMode: "hold",
			outboxconf.EnvPollInterval: "30s", "AWS_LAMBDA_FUNCTION_TIMEOUT": "12"})
		type answer struct {
			resp outboxlambda.RelayResponse
			err  error
		}
		done := make(chan answer, 1)
		go func() {
			resp, err := relay.Invoke(t.Context(), wakes[0].Payload)
			var a answer
			if a.err = err; err == nil {
				a.err = json.Unmarshal(resp.Payload, &a.resp)
			}
			done <- a
		}()
		orders := f.kafka.Topic("orders")
		outboxtest.Consume(t, f.kafka, orders, 1) // the relay joined and published the first
		committed := time.Now()
		invoke[outboxlambda.EnqueueResponse](t, enqueue, f.sample(t, "enqueue.single.json"))
		outboxtest.Consume(t, f.kafka, orders, 2)
		took := time.Since(committed)
		a := <-done
		if a.err != nil {
			t.Fatal(a.err)
		}
		if a.resp.Published != 2 || took > 5*time.Second {
			t.Fatalf("the relay published %d (want 2, the second rung) and the second reached Kafka %v after its commit (poll 30 s): %+v",
				a.resp.Published, took, a.resp)
		}
		t.Logf("rung message on Kafka %v after its commit", took.Round(time.Millisecond))
	})
}

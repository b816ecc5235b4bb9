package scale

import (
	"fmt"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// Title is one line describing the burst.
func (r BurstReport) Title() string {
	c := r.Config
	return fmt.Sprintf("Burst: %d commits within %v over %d buckets, each waking the relay function (reserved concurrency %d), drain mode, until the fleet scaled back in",
		c.Commits, burstWindow, c.Buckets, c.Relays)
}

// Rows returns the burst's figures as (figure, value) rows.
func (r BurstReport) Rows() [][]string {
	secs := func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
	return [][]string{
		{"wake-ups sent / invocations / environments", fmt.Sprintf("%d / %d / %d", r.WakeUps, r.Invocations, r.Environments)},
		{"wake-ups throttled (refused at least once)", fmt.Sprintf("%d", r.Throttled)},
		{"invocations that found a live peer / nothing pending / joined", fmt.Sprintf("%d / %d / %d",
			r.InvocationsByReason[string(outbox.StopPeerLive)], r.InvocationsByReason[string(outbox.StopNothingPending)], r.JoinedInvocations)},
		{"trust checks that read a claimed bucket's lease again", fmt.Sprintf("%d", r.ClaimChecks)},
		{"rounds / claims / releases / lost", fmt.Sprintf("%d / %d / %d / %d", r.Rounds, r.Claims, r.Releases, r.Lost)},
		{"refused conditional writes (after every bucket had an owner)", fmt.Sprintf("%d (%d)", r.Refused, r.RefusedAfterOwned)},
		{"every bucket owned after", secs(r.AllOwnedAfter)},
		{"longest commit → publish wait", secs(r.MaxPublishWait)},
		{"last relay stopped after", secs(r.LastStopAfter)},
		{"leases left / commits unpublished", fmt.Sprintf("%d / %d", r.LeftOwned, r.Unpublished)},
		{"coordination RCU: total / busiest second", fmt.Sprintf("%.0f / %.0f (%.0f%% of 3,000)", r.ReadUnits, r.PeakReadUnits, 100*r.PeakReadUnits/PartitionReadUnits)},
		{"coordination WCU: total / busiest second", fmt.Sprintf("%.0f / %.0f (%.0f%% of 1,000)", r.WriteUnits, r.PeakWriteUnits, 100*r.PeakWriteUnits/PartitionWriteUnits)},
	}
}

// Notes explain the burst table.
func (r BurstReport) Notes() []string {
	return []string{
		"Each invocation runs the real relay handler in drain mode (outboxlambda.RelayHandler, one relay id and outboxddb.Store per environment): trust check, second look after the publisher's initialisation, rounds, polls, idle stop, graceful release, a continuation wake-up for released buckets with commits.",
		fmt.Sprintf("The relay function runs on the Lambda emulator (internal/lambdasim): a wake-up starts %v after it is sent, a new environment (one relay id) %v later; a wake-up refused for the reserved concurrency is retried 1 s later, then twice as long each time.", startLatency, coldStart),
		"Requests to the coordination partition interleave in simulated time (each waits its round trip; lease writes a round trip / 8, as a store sends 8 at once); the commits are held in memory and publishing is instant: the burst measures the coordination plane, not the message partitions or Kafka.",
		"The model does not throttle: a busiest second above the partition's limits means DynamoDB would have throttled (and the SDK retried) part of it.",
	}
}

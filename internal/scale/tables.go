package scale

import (
	"fmt"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/outbox"
)

// Tables renders the study as the bench command prints it: the coordination
// table, a row per fleet, then the burst's figures.
func (s Study) Tables() []lab.Table {
	return []lab.Table{s.coordinationTable(), s.Burst.table()}
}

func (s Study) coordinationTable() lab.Table {
	t := lab.Table{
		Title: fmt.Sprintf("Coordination partition in hold mode (a fleet starting together on an empty table, then %d settled renew intervals)", s.Validation.Model.Config.SteadyRounds),
		Header: []string{"buckets", "relays", "reads", "lease/renew", "rounds to settle", "refused at start", "start peak WCU/s",
			"RCU/s mean", "RCU/s peak", "% of 3000", "WCU/s mean", "WCU/s peak", "% of 1000",
			"pages/round", "KB/round"},
	}
	for _, r := range s.Runs {
		st := r.Steady
		settle := fmt.Sprint(r.RoundsToConverge)
		if !r.Converged {
			settle = fmt.Sprintf("> %d", r.RoundsToConverge)
		}
		t.Rows = append(t.Rows, []string{
			fmt.Sprint(r.Config.Buckets), fmt.Sprint(r.Config.Relays), r.Config.readsLabel(),
			fmt.Sprintf("%v/%v", r.Config.LeaseDuration, r.Config.LeaseRenewInterval), settle,
			fmt.Sprint(r.Start.Refused), fmt.Sprintf("%.0f", r.Start.PeakWriteUnits),
			fmt.Sprintf("%.1f", st.MeanReadUnits()), fmt.Sprintf("%.0f", st.PeakReadUnits), fmt.Sprintf("%.1f", 100*st.ReadShare()),
			fmt.Sprintf("%.1f", st.MeanWriteUnits()), fmt.Sprintf("%.0f", st.PeakWriteUnits), fmt.Sprintf("%.1f", 100*st.WriteShare()),
			fmt.Sprintf("%.2f", st.PagesPerRound()), fmt.Sprintf("%.1f", st.BytesPerRound()/1024),
		})
	}
	v := s.Validation
	agree := "agree"
	if err := v.Agree(); err != nil {
		agree = "DISAGREE: " + err.Error()
	}
	t.Notes = []string{
		"Each relay runs the real store (outboxddb) and planner; every request is counted with outboxlocal.Counter's capacity rules.",
		"reads: 'settled' relays read only the heartbeat records while their fleet is settled and unchanged, and everything once a lease duration (lease.Settled); 'seed' relays read everything every round, as the seed's relays and relays in other languages do; 'mixed' is half of each.",
		fmt.Sprintf("Figures come from the in-memory model of the partition; at %d buckets and %d relays the model and the embedded DynamoDB server %s (%d requests).",
			v.Embedded.Config.Buckets, v.Embedded.Config.Relays, agree, totalRequests(v.Embedded)),
		"Peak is the busiest simulated second; % columns are the peak's share of one partition's limits (3,000 RCU/s, 1,000 WCU/s).",
		"The relays start at seeded times within one renew interval; 'start peak WCU/s' is the busiest second before the fleet settled.",
	}
	return t
}

// table is the burst's figures as (figure, value) rows.
func (r BurstReport) table() lab.Table {
	c := r.Config
	secs := func(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
	return lab.Table{
		Title: fmt.Sprintf("Burst: %d commits within %v over %d buckets, each waking the relay function (reserved concurrency %d), drain mode, until the fleet scaled back in",
			c.Commits, burstWindow, c.Buckets, c.Relays),
		Header: []string{"figure", "value"},
		Rows: [][]string{
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
		},
		Notes: []string{
			"Each invocation runs the real relay handler in drain mode (outboxlambda.RelayHandler, one relay id and outboxddb.Store per environment): trust check, second look after the publisher's initialisation, rounds, polls, idle stop, graceful release, a continuation wake-up for released buckets with commits.",
			fmt.Sprintf("The relay function runs on the Lambda emulator (internal/lambdasim): a wake-up starts %v after it is sent, a new environment (one relay id) %v later; a wake-up refused for the reserved concurrency is retried 1 s later, then twice as long each time.", startLatency, coldStart),
			"Requests to the coordination partition interleave in simulated time (each waits its round trip; lease writes a round trip / 8, as a store sends 8 at once); the commits are held in memory and publishing is instant: the burst measures the coordination plane, not the message partitions or Kafka.",
			"The model does not throttle: a busiest second above the partition's limits means DynamoDB would have throttled (and the SDK retried) part of it.",
		},
	}
}

// readsLabel names how the run's relays read the partition.
func (c Config) readsLabel() string {
	switch c.SeedRelays {
	case 0:
		return "settled"
	case c.Relays:
		return "seed"
	}
	return "mixed"
}

func totalRequests(r Report) int {
	n := 0
	for _, p := range []Phase{r.Start, r.Steady} {
		for _, c := range p.Requests {
			n += c
		}
	}
	return n
}

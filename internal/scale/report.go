package scale

import (
	"fmt"
)

// Per-partition throughput limits of DynamoDB: what one partition key can
// serve per second, whatever the table's capacity mode.
const (
	PartitionReadUnits  = 3000
	PartitionWriteUnits = 1000
)

// Report is one run's figures, fixed by its seed.
type Report struct {
	Config Config `json:"config"`
	// Converged reports that the fleet settled within the bound on start
	// rounds; Steady is empty otherwise.
	Converged bool `json:"converged"`
	// RoundsToConverge is the number of renew intervals, from the first
	// relay's first round, in which leases still moved or writes were
	// refused.
	RoundsToConverge int `json:"roundsToConverge"`
	// Start covers those intervals, Steady the SteadyRounds intervals
	// after the first interval in which nothing moved.
	Start  Phase `json:"start"`
	Steady Phase `json:"steady"`
}

// Phase sums what the coordination partition served in consecutive renew
// intervals.
type Phase struct {
	Seconds int `json:"seconds"`
	// Rounds counts the relays' acquisition calls.
	Rounds int `json:"rounds"`
	// Claims, Releases and Lost count leases that changed hands.
	Claims   int `json:"claims"`
	Releases int `json:"releases"`
	Lost     int `json:"lost"`
	// Refused counts refused conditional writes.
	Refused int `json:"refused"`
	// Requests counts request attempts per operation.
	Requests map[string]int `json:"requests"`
	// ReadUnits and WriteUnits total the capacity units.
	ReadUnits  float64 `json:"readUnits"`
	WriteUnits float64 `json:"writeUnits"`
	// PeakReadUnits and PeakWriteUnits are the busiest simulated second's.
	PeakReadUnits  float64 `json:"peakReadUnits"`
	PeakWriteUnits float64 `json:"peakWriteUnits"`
	// ReadPages and ReadBytes total the Query pages and the bytes of the
	// items they returned.
	ReadPages int `json:"readPages"`
	ReadBytes int `json:"readBytes"`
}

// MeanReadUnits is the mean read units per second.
func (p Phase) MeanReadUnits() float64 { return ratio(p.ReadUnits, p.Seconds) }

// MeanWriteUnits is the mean write units per second.
func (p Phase) MeanWriteUnits() float64 { return ratio(p.WriteUnits, p.Seconds) }

// PagesPerRound is the mean Query pages per acquisition round.
func (p Phase) PagesPerRound() float64 { return ratio(float64(p.ReadPages), p.Rounds) }

// BytesPerRound is the mean bytes read per acquisition round.
func (p Phase) BytesPerRound() float64 { return ratio(float64(p.ReadBytes), p.Rounds) }

// ReadShare is the peak second's fraction of the partition's read limit.
func (p Phase) ReadShare() float64 { return p.PeakReadUnits / PartitionReadUnits }

// WriteShare is the peak second's fraction of the partition's write limit.
func (p Phase) WriteShare() float64 { return p.PeakWriteUnits / PartitionWriteUnits }

// ratio is x per n, 0 when n is 0 (a phase without seconds or rounds).
func ratio(x float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return x / float64(n)
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

// Title is one line describing the study.
func (s Study) Title() string {
	c := s.Validation.Model.Config
	return fmt.Sprintf("Coordination partition in hold mode (a fleet starting together on an empty table, then %d settled renew intervals)", c.SteadyRounds)
}

// Header names the columns of Rows.
func (s Study) Header() []string {
	return []string{"buckets", "relays", "reads", "lease/renew", "rounds to settle", "refused at start", "start peak WCU/s",
		"RCU/s mean", "RCU/s peak", "% of 3000", "WCU/s mean", "WCU/s peak", "% of 1000",
		"pages/round", "KB/round"}
}

// Rows returns one row per fleet.
func (s Study) Rows() [][]string {
	rows := make([][]string, 0, len(s.Runs))
	for _, r := range s.Runs {
		st := r.Steady
		settle := fmt.Sprint(r.RoundsToConverge)
		if !r.Converged {
			settle = fmt.Sprintf("> %d", r.RoundsToConverge)
		}
		rows = append(rows, []string{
			fmt.Sprint(r.Config.Buckets), fmt.Sprint(r.Config.Relays), r.Config.readsLabel(),
			fmt.Sprintf("%v/%v", r.Config.LeaseDuration, r.Config.LeaseRenewInterval), settle,
			fmt.Sprint(r.Start.Refused), fmt.Sprintf("%.0f", r.Start.PeakWriteUnits),
			fmt.Sprintf("%.1f", st.MeanReadUnits()), fmt.Sprintf("%.0f", st.PeakReadUnits), fmt.Sprintf("%.1f", 100*st.ReadShare()),
			fmt.Sprintf("%.1f", st.MeanWriteUnits()), fmt.Sprintf("%.0f", st.PeakWriteUnits), fmt.Sprintf("%.1f", 100*st.WriteShare()),
			fmt.Sprintf("%.2f", st.PagesPerRound()), fmt.Sprintf("%.1f", st.BytesPerRound()/1024),
		})
	}
	return rows
}

// Notes explain the table under it.
func (s Study) Notes() []string {
	v := s.Validation
	agree := "agree"
	if err := v.Agree(); err != nil {
		agree = "DISAGREE: " + err.Error()
	}
	return []string{
		"Each relay runs the real store (outboxddb) and planner; every request is counted with outboxlocal.Counter's capacity rules.",
		"reads: 'settled' relays read only the heartbeat records while their fleet is settled and unchanged, and everything once a lease duration (lease.Settled); 'seed' relays read everything every round, as the seed's relays and relays in other languages do; 'mixed' is half of each.",
		fmt.Sprintf("Figures come from the in-memory model of the partition; at %d buckets and %d relays the model and the embedded DynamoDB server %s (%d requests).",
			v.Embedded.Config.Buckets, v.Embedded.Config.Relays, agree, totalRequests(v.Embedded)),
		"Peak is the busiest simulated second; % columns are the peak's share of one partition's limits (3,000 RCU/s, 1,000 WCU/s).",
		"The relays start at seeded times within one renew interval; 'start peak WCU/s' is the busiest second before the fleet settled.",
	}
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

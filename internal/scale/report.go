package scale

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

	first int // the phase's first second since the run's start
}

// add adds o, a round or the phase's next renew interval, to p.
func (p *Phase) add(o Phase) {
	if p.Seconds == 0 {
		p.first = o.first
	}
	p.Seconds += o.Seconds
	p.Rounds += o.Rounds
	p.Claims += o.Claims
	p.Releases += o.Releases
	p.Lost += o.Lost
	p.Refused += o.Refused
	if p.Requests == nil {
		p.Requests = map[string]int{}
	}
	for op, n := range o.Requests {
		p.Requests[op] += n
	}
	p.ReadUnits += o.ReadUnits
	p.WriteUnits += o.WriteUnits
	p.ReadPages += o.ReadPages
	p.ReadBytes += o.ReadBytes
}

// moved reports whether any lease changed hands or any write was refused.
func (p Phase) moved() bool { return p.Claims+p.Releases+p.Lost+p.Refused > 0 }

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

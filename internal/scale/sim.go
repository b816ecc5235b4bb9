package scale

import (
	"context"
	"time"

	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// window sums the rounds of consecutive renew intervals.
type window struct {
	first, intervals       int // renew intervals [first, first+intervals)
	rounds                 int
	claims, releases, lost int
	tally                  tally
	pages, bytes           int
}

func (w *window) merge(o window) {
	if w.intervals == 0 {
		w.first = o.first
	}
	w.intervals += o.intervals
	w.rounds += o.rounds
	w.claims += o.claims
	w.releases += o.releases
	w.lost += o.lost
	w.tally.add(o.tally)
	w.pages += o.pages
	w.bytes += o.bytes
}

// moved reports whether any lease changed hands or any write was refused.
func (w window) moved() bool {
	return w.claims+w.releases+w.lost+w.tally.Refused > 0
}

// run is the state of one simulation.
type run struct {
	cfg   Config
	fleet *fleet
	be    backend
	tap   *readTap
	// read and write units per simulated second since the start
	readUnits, writeUnits []float64
}

// Run simulates cfg's fleet starting together on an empty table until it
// settles (a renew interval in which no lease moved, no write was refused
// and every bucket has exactly one owner: the rounds in it are the ones
// that find the fleet settled), then the cfg.SteadyRounds renew intervals
// of hold mode after that one, and reports the load on the coordination
// partition.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Report{}, err
	}
	be, err := newBackend(ctx, cfg)
	if err != nil {
		return Report{}, err
	}
	defer be.close()
	tap := &readTap{Client: be.client()}
	f, err := newFleet(cfg, tap, be.table(), outboxlocal.NewManualClock(start))
	if err != nil {
		return Report{}, err
	}
	r := &run{cfg: cfg, fleet: f, be: be, tap: tap}

	var startup, steady window
	k := 0
	for ; k < maxStartRounds; k++ {
		iv, err := r.interval(ctx, k)
		if err != nil {
			return Report{}, err
		}
		if !iv.moved() && f.settled() {
			break
		}
		startup.merge(iv)
	}
	rep := Report{Config: cfg, RoundsToConverge: k, Converged: k < maxStartRounds}
	rep.Start = r.phase(startup)
	if !rep.Converged {
		return rep, nil
	}
	for k++; steady.intervals < cfg.SteadyRounds; k++ {
		iv, err := r.interval(ctx, k)
		if err != nil {
			return Report{}, err
		}
		steady.merge(iv)
	}
	rep.Steady = r.phase(steady)
	cpu, err := f.planCPU(ctx)
	if err != nil {
		return Report{}, err
	}
	rep.PlanCPU = cpu.Nanoseconds()
	return rep, nil
}

// interval runs every relay's round due in renew interval k.
func (r *run) interval(ctx context.Context, k int) (window, error) {
	end := start.Add(time.Duration(k+1) * r.cfg.LeaseRenewInterval)
	iv := window{first: k, intervals: 1}
	for {
		next := r.fleet.nextRelay()
		if !next.next.Before(end) {
			return iv, nil
		}
		at := next.next
		before := r.be.tally()
		pages, bytes := r.tap.read()
		acq, err := r.fleet.round(ctx, next)
		if err != nil {
			return iv, err
		}
		d := r.be.tally().since(before)
		p, b := r.tap.read()
		iv.rounds++
		iv.claims += len(acq.Claimed)
		iv.releases += len(acq.Released)
		iv.lost += len(acq.Lost)
		iv.tally.add(d)
		iv.pages += p - pages
		iv.bytes += b - bytes
		r.charge(at, d)
	}
}

// charge adds a round's units to the second it ran in.
func (r *run) charge(at time.Time, d tally) {
	s := int(at.Sub(start) / time.Second)
	for len(r.readUnits) <= s {
		r.readUnits = append(r.readUnits, 0)
		r.writeUnits = append(r.writeUnits, 0)
	}
	r.readUnits[s] += d.ReadUnits
	r.writeUnits[s] += d.WriteUnits
}

// phase summarizes a window: totals, per-second mean and peak over the
// window's seconds, per-round averages.
func (r *run) phase(w window) Phase {
	p := Phase{
		Intervals:  w.intervals,
		Rounds:     w.rounds,
		Claims:     w.claims,
		Releases:   w.releases,
		Lost:       w.lost,
		Refused:    w.tally.Refused,
		Requests:   w.tally.Requests,
		ReadUnits:  w.tally.ReadUnits,
		WriteUnits: w.tally.WriteUnits,
		ReadPages:  w.pages,
		ReadBytes:  w.bytes,
		Seconds:    w.intervals * int(r.cfg.LeaseRenewInterval/time.Second),
	}
	if w.intervals == 0 {
		return p
	}
	from := w.first * int(r.cfg.LeaseRenewInterval/time.Second)
	for s := from; s < from+p.Seconds && s < len(r.readUnits); s++ {
		p.PeakReadUnits = max(p.PeakReadUnits, r.readUnits[s])
		p.PeakWriteUnits = max(p.PeakWriteUnits, r.writeUnits[s])
	}
	return p
}

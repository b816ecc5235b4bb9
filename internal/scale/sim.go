package scale

import (
	"context"
	"errors"
	"sync"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// run is the state of one simulation.
type run struct {
	cfg   Config
	fleet *fleet
	be    backend
	start time.Time

	mu    sync.Mutex
	cur   Phase // the rounds since the last interval's end
	units units
}

// Run simulates cfg's fleet starting together on an empty table until it
// settles (a renew interval in which no lease moved, no write was refused
// and every bucket has exactly one owner: the rounds in it are the ones
// that find the fleet settled), then the cfg.SteadyRounds renew intervals
// of hold mode after that one, and reports the load on the coordination
// partition. It runs only inside a testing/synctest bubble, whose clock is
// the simulation's.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Report{}, err
	}
	sim, err := lab.NewSim(ctx, lab.Config{Settle: synctest.Wait})
	if err != nil {
		return Report{}, err
	}
	be, err := newBackend(ctx, cfg)
	if err != nil {
		return Report{}, err
	}
	defer be.close()
	start := runStart(time.Now())
	r := &run{cfg: cfg, be: be, start: start, units: units{start: start, counted: be.tally()}}
	if r.fleet, err = newFleet(cfg, &lab.Client{Inner: be.client(), Observe: r.readPage}, be.table(), start); err != nil {
		return Report{}, err
	}
	for _, rl := range r.fleet.relays {
		sim.Every(rl.first, cfg.LeaseRenewInterval, func(now time.Time) bool { return r.round(sim, rl, now) })
	}
	rep, err := r.measure(sim)
	return rep, errors.Join(err, sim.Stop())
}

// measure lets the fleet run interval by interval until it settled, then
// for the settled intervals.
func (r *run) measure(sim *lab.Sim) (Report, error) {
	var startup, steady Phase
	k := 0
	for ; k < maxStartRounds; k++ {
		iv, err := r.interval(sim, k)
		if err != nil {
			return Report{}, err
		}
		if !iv.moved() && r.fleet.settled() {
			break
		}
		startup.add(iv)
	}
	rep := Report{Config: r.cfg, RoundsToConverge: k, Converged: k < maxStartRounds}
	rep.Start = r.peaks(startup)
	if !rep.Converged {
		return rep, nil
	}
	for i := 1; i <= r.cfg.SteadyRounds; i++ {
		iv, err := r.interval(sim, k+i)
		if err != nil {
			return Report{}, err
		}
		steady.add(iv)
	}
	rep.Steady = r.peaks(steady)
	return rep, nil
}

// interval lets the rounds due in renew interval k run and returns them.
func (r *run) interval(sim *lab.Sim, k int) (Phase, error) {
	if err := sim.RunUntil(r.start.Add(time.Duration(k+1) * r.cfg.LeaseRenewInterval)); err != nil {
		return Phase{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	iv := r.cur
	iv.first, iv.Seconds = k*int(r.cfg.LeaseRenewInterval/time.Second), int(r.cfg.LeaseRenewInterval/time.Second)
	r.cur = Phase{}
	return iv, nil
}

// round runs relay rl's round due at now and counts it. Rounds run on the
// simulation's driver, one at a time in time order (ties in the order the
// relays were built), because the backends answer without taking simulated
// time: relays due at the same instant (start offsets are whole
// milliseconds) would race for the order of their writes, and a seed would
// not reproduce the run.
func (r *run) round(sim *lab.Sim, rl *relay, now time.Time) (again bool) {
	acq, err := r.fleet.round(sim.Context(), rl, now)
	if err != nil {
		sim.Fail(err)
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Only the rounds send requests, one round at a time: what the
	// backend counted since the last round is this round's.
	d := r.units.charge(now, r.be.tally())
	r.cur.add(Phase{Rounds: 1, Claims: len(acq.Claimed), Releases: len(acq.Released), Lost: len(acq.Lost),
		Refused: d.Refused, Requests: d.Requests, ReadUnits: d.ReadUnits, WriteUnits: d.WriteUnits})
	return true
}

// readPage is the fleet's client's observer: it measures the coordination
// reads, Query pages and the bytes of the items they returned (DynamoDB's
// item sizing), whatever the backend.
func (r *run) readPage(_ context.Context, req lab.Request) {
	out, ok := req.Out.(*dynamodb.QueryOutput)
	if !ok || req.Err != nil {
		return
	}
	size := 0
	for _, item := range out.Items {
		size += outboxddb.ItemSize(item)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cur.ReadPages++
	r.cur.ReadBytes += size
}

// peaks sets p's busiest second's units.
func (r *run) peaks(p Phase) Phase {
	r.mu.Lock()
	defer r.mu.Unlock()
	p.PeakReadUnits, p.PeakWriteUnits = r.units.peak(p.first, p.first+p.Seconds)
	return p
}

// units charges the capacity units a backend counted to the simulated
// second they were spent in, counted from start. Its owner guards it.
type units struct {
	start time.Time
	// counted is the backend's tally at the latest charge.
	counted outboxlocal.Counts
	// read and write units per simulated second since start
	read, write []float64
}

// charge takes the backend's tally now, charges what it counted since the
// latest charge to at's second and returns it.
func (u *units) charge(at time.Time, now outboxlocal.Counts) outboxlocal.Counts {
	d := now.Since(u.counted)
	u.counted = now
	s := int(at.Sub(u.start) / time.Second)
	for len(u.read) <= s {
		u.read = append(u.read, 0)
		u.write = append(u.write, 0)
	}
	u.read[s] += d.ReadUnits
	u.write[s] += d.WriteUnits
	return d
}

// peak returns the most read and write units charged to one second of
// [from, to) (seconds since start), zero when none was.
func (u *units) peak(from, to int) (read, write float64) {
	for s := from; s < to && s < len(u.read); s++ {
		read = max(read, u.read[s])
		write = max(write, u.write[s])
	}
	return read, write
}

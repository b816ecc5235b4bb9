package scale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"time"
)

// ValidationSize is the fleet (its buckets and relays) run on both
// backends to check the model.
var ValidationSize = Config{Buckets: 64, Relays: 16}

// StudyRuns are the fleets the study measures: 256 and 1,024 buckets with
// 16, 64 and 128 relays, then three variants of the largest: the seed's
// reads (every relay reads the whole partition every round: the figures
// before the settled-fleet reads), a fleet mixing both kinds of relays (as
// a table shared with relays in other languages), and the relay's timings
// tripled (60 s lease, 20 s renew interval). A run takes its buckets,
// relays and seed relays from here, its timings when set, and the rest
// from the study's base configuration.
var StudyRuns = []Config{
	{Buckets: 256, Relays: 16}, {Buckets: 256, Relays: 64}, {Buckets: 256, Relays: 128},
	{Buckets: 1024, Relays: 16}, {Buckets: 1024, Relays: 64}, {Buckets: 1024, Relays: 128},
	{Buckets: 1024, Relays: 128, SeedRelays: 128},
	{Buckets: 1024, Relays: 128, SeedRelays: 64},
	{Buckets: 1024, Relays: 128, LeaseDuration: 60 * time.Second, LeaseRenewInterval: 20 * time.Second},
}

// Study is the coordination table: every StudyRuns fleet on the model,
// after the model was checked against the embedded server.
type Study struct {
	// Validation ran ValidationSize on the embedded server and the model.
	Validation Validation `json:"validation"`
	Runs       []Report   `json:"runs"`
	// Burst is the default burst on the model.
	Burst BurstReport `json:"burst"`
}

// Validation compares a fleet's counts on the embedded server and on the
// model.
type Validation struct {
	Embedded Report `json:"embedded"`
	Model    Report `json:"model"`
}

// Agree returns nil when both runs counted the same: rounds to converge,
// every request, refusal, capacity unit, page and byte of both phases.
func (v Validation) Agree() error {
	var errs []error
	if v.Embedded.RoundsToConverge != v.Model.RoundsToConverge {
		errs = append(errs, fmt.Errorf("rounds to converge: embedded %d, model %d", v.Embedded.RoundsToConverge, v.Model.RoundsToConverge))
	}
	if !reflect.DeepEqual(v.Embedded.Start, v.Model.Start) {
		errs = append(errs, fmt.Errorf("start: embedded %+v, model %+v", v.Embedded.Start, v.Model.Start))
	}
	if !reflect.DeepEqual(v.Embedded.Steady, v.Model.Steady) {
		errs = append(errs, fmt.Errorf("steady: embedded %+v, model %+v", v.Embedded.Steady, v.Model.Steady))
	}
	return errors.Join(errs...)
}

// Validate runs cfg on both backends.
func Validate(ctx context.Context, cfg Config) (Validation, error) {
	var v Validation
	var err error
	cfg.Backend = Embedded
	if v.Embedded, err = Run(ctx, cfg); err != nil {
		return v, err
	}
	cfg.Backend = Model
	if v.Model, err = Run(ctx, cfg); err != nil {
		return v, err
	}
	return v, nil
}

// RunStudy validates the model at ValidationSize and, if it agrees, runs
// every StudyRuns fleet and the default burst on it with base's timings
// and seed, writing a line per fleet to progress (nil: none). A model that disagrees with the embedded server is an error: its
// figures would mean nothing. Like Run, it runs only inside a
// testing/synctest bubble.
func RunStudy(ctx context.Context, base Config, progress io.Writer) (Study, error) {
	var st Study
	cfg := base
	cfg.Buckets, cfg.Relays = ValidationSize.Buckets, ValidationSize.Relays
	v, err := Validate(ctx, cfg)
	if err != nil {
		return st, err
	}
	st.Validation = v
	if err := v.Agree(); err != nil {
		return st, fmt.Errorf("scale: the model disagrees with the embedded server at %d buckets and %d relays: %w", cfg.Buckets, cfg.Relays, err)
	}
	for _, run := range StudyRuns {
		cfg := base
		cfg.Buckets, cfg.Relays, cfg.SeedRelays = run.Buckets, run.Relays, run.SeedRelays
		if run.LeaseDuration != 0 {
			cfg.LeaseDuration, cfg.LeaseRenewInterval = run.LeaseDuration, run.LeaseRenewInterval
		}
		cfg.Backend = Model
		rep, err := Run(ctx, cfg)
		if err != nil {
			return st, err
		}
		if progress != nil {
			fmt.Fprintf(progress, "scale: %d buckets, %d relays: settled after %d rounds\n", cfg.Buckets, cfg.Relays, rep.RoundsToConverge)
		}
		st.Runs = append(st.Runs, rep)
	}
	burst, err := RunBurst(ctx, Config{LeaseDuration: base.LeaseDuration, LeaseRenewInterval: base.LeaseRenewInterval, Seed: base.Seed})
	if err != nil {
		return st, err
	}
	st.Burst = burst
	return st, nil
}

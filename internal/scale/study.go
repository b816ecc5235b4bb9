package scale

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"time"
)

// Size is one fleet size of the study.
type Size struct {
	Buckets int `json:"buckets"`
	Relays  int `json:"relays"`
}

// StudySizes are the fleets the study measures: 256 and 1,024 buckets with
// 16, 64 and 128 relays.
var StudySizes = []Size{{256, 16}, {256, 64}, {256, 128}, {1024, 16}, {1024, 64}, {1024, 128}}

// ValidationSize is the fleet run on both backends to check the model.
var ValidationSize = Size{Buckets: 64, Relays: 16}

// StudyVariants are the runs the study adds at the largest size: the
// seed's reads (every relay reads the whole partition every round: the
// figures before the settled-fleet reads), a fleet mixing both kinds of
// relays (as a table shared with relays in other languages), and the
// relay's timings tripled (60 s lease, 20 s renew interval).
var StudyVariants = []Config{
	{Buckets: 1024, Relays: 128, SeedRelays: 128},
	{Buckets: 1024, Relays: 128, SeedRelays: 64},
	{Buckets: 1024, Relays: 128, LeaseDuration: 60 * time.Second, LeaseRenewInterval: 20 * time.Second},
}

// Study is the coordination table: every StudySizes fleet and every
// StudyVariants run on the model, after the model was checked against the
// embedded server.
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
// every StudySizes fleet, the StudyVariants and the default burst on it
// with base's timings and seed, writing a line per fleet to progress (nil:
// none). A model that disagrees with the embedded server is an error: its
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
	var runs []Config
	for _, size := range StudySizes {
		cfg := base
		cfg.Buckets, cfg.Relays = size.Buckets, size.Relays
		runs = append(runs, cfg)
	}
	for _, v := range StudyVariants {
		cfg := base
		cfg.Buckets, cfg.Relays, cfg.SeedRelays = v.Buckets, v.Relays, v.SeedRelays
		if v.LeaseDuration != 0 {
			cfg.LeaseDuration, cfg.LeaseRenewInterval = v.LeaseDuration, v.LeaseRenewInterval
		}
		runs = append(runs, cfg)
	}
	for _, cfg := range runs {
		size := Size{cfg.Buckets, cfg.Relays}
		cfg.Backend = Model
		rep, err := Run(ctx, cfg)
		if err != nil {
			return st, err
		}
		if progress != nil {
			fmt.Fprintf(progress, "scale: %d buckets, %d relays: settled after %d rounds\n", size.Buckets, size.Relays, rep.RoundsToConverge)
		}
		st.Runs = append(st.Runs, rep)
	}
	burst, err := RunBurst(ctx, BurstConfig{LeaseDuration: base.LeaseDuration, LeaseRenewInterval: base.LeaseRenewInterval, Seed: base.Seed})
	if err != nil {
		return st, err
	}
	st.Burst = burst
	return st, nil
}

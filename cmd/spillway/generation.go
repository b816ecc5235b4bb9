package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/spillway-dev/spillway/outbox/generation"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// generationEnv is the two generations' stores.
type generationEnv struct {
	prev, cur           *outboxddb.Store
	previous, successor generation.Generation
}

// openGenerations parses the shared flags (and extra, the command's own)
// and opens a store on each generation.
func openGenerations(ctx context.Context, name string, args []string, stdout io.Writer, extra func(*flag.FlagSet)) (*generationEnv, error) {
	fs := newFlagSet("generation "+name, stdout)
	ef := addTableFlags(fs).withOutbox()
	ef.add("previous-key-prefix", outboxconf.EnvPreviousKeyPrefix, "key prefix of the generation being retired")
	ef.add("previous-bucket-count", outboxconf.EnvPreviousBucketCount, "bucket count of the generation being retired")
	if extra != nil {
		extra(fs.FlagSet)
	}
	if err := parse(fs, args); err != nil {
		return nil, err
	}
	cfg, err := ef.config()
	if err != nil {
		return nil, usagef("%v", err)
	}
	if _, ok := cfg.Previous(); !ok {
		return nil, usagef("name the generation being retired with --previous-key-prefix and --previous-bucket-count (or set %s and %s)",
			outboxconf.EnvPreviousKeyPrefix, outboxconf.EnvPreviousBucketCount)
	}
	client, err := dynamoClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// Each generation's count against its layout record: the previous one
	// was given (required), the new one becomes the recorded one when it
	// was not (its record is written when it opens).
	writes := name != "status"
	if _, err := checkLayout(ctx, client, cfg.PreviousStoreOptions().Options, &cfg.PreviousBucketCount,
		countFlag{flag: "previous-bucket-count", env: outboxconf.EnvPreviousBucketCount, flagSet: ef.set()["previous-bucket-count"], envSet: true}, writes); err != nil {
		return nil, err
	}
	if _, err := checkLayout(ctx, client, cfg.TableOptions(), &cfg.BucketCount, ef.bucketCountSource(), writes); err != nil {
		return nil, err
	}
	previous, _ := cfg.Previous()
	e := &generationEnv{previous: previous, successor: cfg.Current()}
	popts, copts := cfg.PreviousStoreOptions(), cfg.StoreOptions()
	popts.CountParked, copts.CountParked = true, true
	if e.prev, err = outboxddb.NewStore(client, popts); err != nil {
		return nil, err
	}
	if e.cur, err = outboxddb.NewStore(client, copts); err != nil {
		return nil, err
	}
	return e, nil
}

// generationStatus is what status prints.
type generationStatus struct {
	Previous        string     `json:"previous"`
	Current         string     `json:"current"`
	Phase           string     `json:"phase"`
	MarkerSuccessor string     `json:"markerSuccessor,omitempty"`
	SealedAt        *time.Time `json:"sealedAt,omitempty"`
	DrainedAt       *time.Time `json:"drainedAt,omitempty"`
	PreviousPending int64      `json:"previousPending"`
	PreviousParked  int64      `json:"previousParked"`
	CurrentPending  int64      `json:"currentPending"`
	Next            string     `json:"next"`
}

func runGenerationStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var asJSON *bool
	e, err := openGenerations(ctx, "status", args, stdout, func(fs *flag.FlagSet) { asJSON = fs.Bool("json", false, "print JSON") })
	if err != nil {
		return err
	}
	m, err := e.prev.ReadGeneration(ctx)
	if err != nil {
		return err
	}
	st := generationStatus{Previous: e.previous.String(), Current: e.successor.String(), Phase: string(m.Phase)}
	if !m.Exists {
		st.Phase = "none"
	} else {
		st.MarkerSuccessor = m.Successor.String()
		st.SealedAt, st.DrainedAt = timePtr(m.SealedAt), timePtr(m.DrainedAt)
	}
	pb, err := e.prev.Backlog(ctx)
	if err != nil {
		return err
	}
	cb, err := e.cur.Backlog(ctx)
	if err != nil {
		return err
	}
	st.PreviousPending, st.PreviousParked, st.CurrentPending = pb.Pending, pb.Parked, cb.Pending
	st.Next = nextStep(m, e)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	fmt.Fprintf(stdout, "previous generation %s: %s", st.Previous, st.Phase)
	if st.MarkerSuccessor != "" {
		fmt.Fprintf(stdout, " (successor %s)", st.MarkerSuccessor)
	}
	fmt.Fprintf(stdout, "\n  pending ~%d, parked ~%d\ncurrent generation %s: pending ~%d\nnext: %s\n",
		st.PreviousPending, st.PreviousParked, st.Current, st.CurrentPending, st.Next)
	return nil
}

// nextStep says what the operator does next, given the marker.
func nextStep(m generation.Marker, e *generationEnv) string {
	switch {
	case !m.Exists:
		return fmt.Sprintf("deploy the relays with %s=%s and %s=%d; their first run opens the marker",
			outboxconf.EnvPreviousKeyPrefix, e.previous.KeyPrefix, outboxconf.EnvPreviousBucketCount, e.previous.BucketCount)
	case m.Successor != e.successor:
		return fmt.Sprintf("the marker names successor %s, not %s: fix the configuration", m.Successor, e.successor)
	case m.Phase == generation.PhaseOpen:
		return fmt.Sprintf("give every writer both generations (%s, previous %s), then `spillway generation seal --yes`", e.successor, e.previous)
	case m.Phase == generation.PhaseSealed:
		return "relays drain what is left and mark it drained; `spillway generation finish` does it now if it is empty"
	case m.Phase == generation.PhaseDrained:
		return fmt.Sprintf("remove %s and %s from the relays", outboxconf.EnvPreviousKeyPrefix, outboxconf.EnvPreviousBucketCount)
	}
	return fmt.Sprintf("unknown phase %q", m.Phase)
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func runGenerationSeal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var yes *bool
	e, err := openGenerations(ctx, "seal", args, stdout, func(fs *flag.FlagSet) { yes = fs.Bool("yes", false, "seal (without: say what sealing means)") })
	if err != nil {
		return err
	}
	if !*yes {
		// A dry run did what was asked: say what sealing means and how to apply it.
		fmt.Fprintf(stdout, "dry run: nothing was sealed. Seal %s only once every writer is configured with both generations, or with %s alone and its generation check (writers in other languages cannot be refused; what they write to %s after the seal overtakes or is never relayed); add --yes to seal\n",
			e.previous, e.previous, e.previous)
		return nil
	}
	m, err := e.prev.SealGeneration(ctx, e.successor)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "sealed %s at %s: writers with both generations write %s from now, Go writers that check the marker are refused; relays drain it, then serve %s\n",
		e.previous, m.SealedAt.UTC().Format(time.RFC3339), e.successor, e.successor)
	return nil
}

func runGenerationFinish(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	e, err := openGenerations(ctx, "finish", args, stdout, nil)
	if err != nil {
		return err
	}
	m, err := e.prev.ReadGeneration(ctx)
	if err != nil {
		return err
	}
	if m.Exists && m.Phase == generation.PhaseDrained && m.Successor == e.successor {
		fmt.Fprintf(stdout, "%s is already drained; relays serve %s\n", e.previous, e.successor)
		return nil
	}
	c, err := e.prev.GenerationContents(ctx)
	if err != nil {
		return err
	}
	if !c.Empty() {
		return fmt.Errorf("%s is not empty yet: messages in buckets %v, parked messages in buckets %v (replay or drop parked ones with `spillway parked` on --key-prefix %s --bucket-count %d)",
			e.previous, c.Messages, c.Parked, e.previous.KeyPrefix, e.previous.BucketCount)
	}
	if _, err := e.prev.FinishGeneration(ctx, e.successor); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "drained %s; relays serve %s from their next run\n", e.previous, e.successor)
	return nil
}

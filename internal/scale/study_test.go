package scale

import (
	"context"
	"reflect"
	"testing"
)

func TestStudy(t *testing.T) {
	// IsReproducedByItsSeed runs the whole study twice, at another
	// seed than the lab's and one settled interval per fleet (the lab's
	// TestStudies compares the default study with docs/lab/scale.txt): its
	// figures are the simulation's, so the two reports, JSON figures and all,
	// are the same.
	t.Run("IsReproducedByItsSeed", func(t *testing.T) {
		if testing.Short() {
			t.Skip("the study runs twice")
		}
		study := func(ctx context.Context) (Study, error) { return RunStudy(ctx, Config{Seed: 7, SteadyRounds: 1}, nil) }
		first, err := inBubble(t, study)
		if err != nil {
			t.Fatal(err)
		}
		second, err := inBubble(t, study)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(first, second) {
			t.Fatalf("seed 7 gave two studies:\n%+v\n%+v", first, second)
		}
	})
}

package generation

import (
	"errors"
	"testing"

	"github.com/spillway-dev/spillway/outbox"
)

func TestGeneration(t *testing.T) {
	t.Run("PlanGenerations", func(t *testing.T) {
		prev := Generation{KeyPrefix: "OUTBOX", BucketCount: 8}
		cur := Generation{KeyPrefix: "OUTBOX2", BucketCount: 32}
		marker := func(p Phase) Marker {
			return Marker{Exists: true, Phase: p, Generation: prev, Successor: cur}
		}
		full := Contents{Checked: true, Messages: []int{3}}
		parked := Contents{Checked: true, Parked: []int{5}}
		empty := Contents{Checked: true}
		for _, c := range []struct {
			name     string
			m        Marker
			contents Contents
			want     Step
		}{
			{"no marker yet: open it first", Marker{}, Contents{}, StepOpen},
			{"open: previous only", marker(PhaseOpen), Contents{}, StepServePrevious},
			{"open and empty: still previous only (writers may write)", marker(PhaseOpen), empty, StepServePrevious},
			{"sealed, not looked: look", marker(PhaseSealed), Contents{}, StepCheckEmpty},
			{"sealed, messages left: previous", marker(PhaseSealed), full, StepServePrevious},
			{"sealed, parked left: previous", marker(PhaseSealed), parked, StepServePrevious},
			{"sealed and empty: mark drained", marker(PhaseSealed), empty, StepMarkDrained},
			{"drained: current only", marker(PhaseDrained), Contents{}, StepServeCurrent},
			{"drained, whatever the contents", marker(PhaseDrained), full, StepServeCurrent},
		} {
			got, err := Plan(c.m, prev, cur, c.contents)
			if err != nil || got != c.want {
				t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
			}
		}
	})

	t.Run("PlanGenerations_BadInput", func(t *testing.T) {
		prev := Generation{KeyPrefix: "OUTBOX", BucketCount: 8}
		cur := Generation{KeyPrefix: "OUTBOX2", BucketCount: 32}
		ok := Marker{Exists: true, Phase: PhaseOpen, Generation: prev, Successor: cur}
		otherSuccessor, otherCount, unknown := ok, ok, ok
		otherSuccessor.Successor = Generation{KeyPrefix: "OUTBOX3", BucketCount: 32}
		otherCount.Generation.BucketCount = 16
		unknown.Phase = "retired"
		for _, c := range []struct {
			name      string
			m         Marker
			prev, cur Generation
			want      error
		}{
			{"marker names another successor", otherSuccessor, prev, cur, outbox.ErrMisconfigured},
			{"successor with another bucket count", ok, prev, Generation{KeyPrefix: "OUTBOX2", BucketCount: 16}, outbox.ErrMisconfigured},
			{"marker of a generation with another bucket count", otherCount, prev, cur, outbox.ErrMisconfigured},
			{"same prefix for both generations", ok, prev, Generation{KeyPrefix: "OUTBOX", BucketCount: 32}, outbox.ErrMisconfigured},
			{"unknown phase", unknown, prev, cur, ErrPhase},
		} {
			step, err := Plan(c.m, c.prev, c.cur, Contents{})
			if !errors.Is(err, c.want) {
				t.Errorf("%s: got %q, %v; want an error matching %v", c.name, step, err, c.want)
			}
		}
	})

	t.Run("CheckTransition", func(t *testing.T) {
		for _, c := range []struct {
			from, to Phase
			ok       bool
		}{
			{PhaseOpen, PhaseSealed, true},
			{PhaseSealed, PhaseDrained, true},
			{PhaseOpen, PhaseDrained, false},
			{PhaseSealed, PhaseOpen, false},
			{PhaseDrained, PhaseSealed, false},
			{PhaseDrained, PhaseOpen, false},
			{PhaseOpen, PhaseOpen, false},
			{"", PhaseSealed, false},
			{PhaseSealed, "gone", false},
		} {
			err := CheckTransition(c.from, c.to)
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrPhase)) {
				t.Errorf("%q → %q: %v; want ok=%v (else ErrPhase)", c.from, c.to, err, c.ok)
			}
		}
	})

	t.Run("Contents_EmptyOnlyWhenChecked", func(t *testing.T) {
		if (Contents{}).Empty() {
			t.Error("an unchecked generation reads as empty")
		}
		if !(Contents{Checked: true}).Empty() {
			t.Error("a checked generation with nothing left does not read as empty")
		}
	})

	t.Run("WriteTarget", func(t *testing.T) {
		prev := Generation{KeyPrefix: "OUTBOX", BucketCount: 8}
		cur := Generation{KeyPrefix: "OUTBOX2", BucketCount: 32}
		marker := func(p Phase) Marker {
			return Marker{Exists: true, Phase: p, Generation: prev, Successor: cur}
		}
		otherSuccessor, otherCount := marker(PhaseSealed), marker(PhaseOpen)
		otherSuccessor.Successor = Generation{KeyPrefix: "OUTBOX3", BucketCount: 32}
		otherCount.Generation.BucketCount = 16
		for _, c := range []struct {
			name    string
			m       Marker
			want    Generation
			wantErr error
		}{
			{"no marker yet: previous", Marker{}, prev, nil},
			{"open: previous, checked", marker(PhaseOpen), prev, nil},
			{"sealed: current, for good", marker(PhaseSealed), cur, nil},
			{"drained: current", marker(PhaseDrained), cur, nil},
			{"sealed for another successor", otherSuccessor, Generation{}, outbox.ErrMisconfigured},
			{"marker of another bucket count", otherCount, Generation{}, outbox.ErrMisconfigured},
			{"unknown phase", marker("retired"), Generation{}, ErrPhase},
		} {
			got, err := WriteTarget(c.m, prev, cur)
			if got != c.want || !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
				t.Errorf("%s: got %s, %v; want %s, %v", c.name, got, err, c.want, c.wantErr)
			}
		}
	})

	t.Run("CheckServable", func(t *testing.T) {
		prev := Generation{KeyPrefix: "OUTBOX", BucketCount: 8}
		cur := Generation{KeyPrefix: "OUTBOX2", BucketCount: 32}
		link := PredecessorMarker{Exists: true, Predecessor: prev}
		marker := func(p Phase) Marker {
			return Marker{Exists: true, Phase: p, Generation: prev, Successor: cur}
		}
		otherSuccessor, otherCount := marker(PhaseDrained), marker(PhaseDrained)
		otherSuccessor.Successor = Generation{KeyPrefix: "OUTBOX3", BucketCount: 32}
		otherCount.Generation.BucketCount = 16
		for _, c := range []struct {
			name string
			p    PredecessorMarker
			m    Marker
			want error // nil: serve
		}{
			{"no predecessor: serve", PredecessorMarker{}, Marker{}, nil},
			{"predecessor drained: serve", link, marker(PhaseDrained), nil},
			{"predecessor open: wait", link, marker(PhaseOpen), ErrNotOpen},
			{"predecessor sealed, maybe not empty: wait", link, marker(PhaseSealed), ErrNotOpen},
			{"predecessor without a marker: wait", link, Marker{}, ErrNotOpen},
			{"predecessor replaced by another generation", link, otherSuccessor, outbox.ErrMisconfigured},
			{"predecessor's marker of another bucket count", link, otherCount, outbox.ErrMisconfigured},
			{"unknown phase", link, marker("retired"), ErrPhase},
		} {
			err := CheckServable(c.p, c.m, cur)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Errorf("%s: %v; want %v", c.name, err, c.want)
			}
		}
	})
}

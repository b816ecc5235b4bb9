package outbox

import (
	"errors"
	"testing"
)

func TestPlanGenerations(t *testing.T) {
	prev := Generation{KeyPrefix: "OUTBOX", BucketCount: 8}
	cur := Generation{KeyPrefix: "OUTBOX2", BucketCount: 32}
	marker := func(p GenerationPhase) GenerationMarker {
		return GenerationMarker{Exists: true, Phase: p, Generation: prev, Successor: cur}
	}
	full := GenerationContents{Checked: true, Messages: []int{3}}
	parked := GenerationContents{Checked: true, Parked: []int{5}}
	empty := GenerationContents{Checked: true}
	for _, c := range []struct {
		name     string
		m        GenerationMarker
		contents GenerationContents
		want     GenerationStep
	}{
		{"no marker yet: open it first", GenerationMarker{}, GenerationContents{}, StepOpen},
		{"open: previous only", marker(PhaseOpen), GenerationContents{}, StepServePrevious},
		{"open and empty: still previous only (writers may write)", marker(PhaseOpen), empty, StepServePrevious},
		{"sealed, not looked: look", marker(PhaseSealed), GenerationContents{}, StepCheckEmpty},
		{"sealed, messages left: previous", marker(PhaseSealed), full, StepServePrevious},
		{"sealed, parked left: previous", marker(PhaseSealed), parked, StepServePrevious},
		{"sealed and empty: mark drained", marker(PhaseSealed), empty, StepMarkDrained},
		{"drained: current only", marker(PhaseDrained), GenerationContents{}, StepServeCurrent},
		{"drained, whatever the contents", marker(PhaseDrained), full, StepServeCurrent},
	} {
		got, err := PlanGenerations(c.m, prev, cur, c.contents)
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}

func TestPlanGenerations_BadInput(t *testing.T) {
	prev := Generation{KeyPrefix: "OUTBOX", BucketCount: 8}
	cur := Generation{KeyPrefix: "OUTBOX2", BucketCount: 32}
	ok := GenerationMarker{Exists: true, Phase: PhaseOpen, Generation: prev, Successor: cur}
	otherSuccessor, otherCount, unknown := ok, ok, ok
	otherSuccessor.Successor = Generation{KeyPrefix: "OUTBOX3", BucketCount: 32}
	otherCount.Generation.BucketCount = 16
	unknown.Phase = "retired"
	for _, c := range []struct {
		name      string
		m         GenerationMarker
		prev, cur Generation
		want      error
	}{
		{"marker names another successor", otherSuccessor, prev, cur, ErrMisconfigured},
		{"successor with another bucket count", ok, prev, Generation{KeyPrefix: "OUTBOX2", BucketCount: 16}, ErrMisconfigured},
		{"marker of a generation with another bucket count", otherCount, prev, cur, ErrMisconfigured},
		{"same prefix for both generations", ok, prev, Generation{KeyPrefix: "OUTBOX", BucketCount: 32}, ErrMisconfigured},
		{"unknown phase", unknown, prev, cur, ErrGenerationPhase},
	} {
		step, err := PlanGenerations(c.m, c.prev, c.cur, GenerationContents{})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %q, %v; want an error matching %v", c.name, step, err, c.want)
		}
	}
}

func TestCheckTransition(t *testing.T) {
	for _, c := range []struct {
		from, to GenerationPhase
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
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrGenerationPhase)) {
			t.Errorf("%q → %q: %v; want ok=%v (else ErrGenerationPhase)", c.from, c.to, err, c.ok)
		}
	}
}

func TestGenerationContents_EmptyOnlyWhenChecked(t *testing.T) {
	if (GenerationContents{}).Empty() {
		t.Error("an unchecked generation reads as empty")
	}
	if !(GenerationContents{Checked: true}).Empty() {
		t.Error("a checked generation with nothing left does not read as empty")
	}
}

func TestWriteTarget(t *testing.T) {
	prev := Generation{KeyPrefix: "OUTBOX", BucketCount: 8}
	cur := Generation{KeyPrefix: "OUTBOX2", BucketCount: 32}
	marker := func(p GenerationPhase) GenerationMarker {
		return GenerationMarker{Exists: true, Phase: p, Generation: prev, Successor: cur}
	}
	otherSuccessor, otherCount := marker(PhaseSealed), marker(PhaseOpen)
	otherSuccessor.Successor = Generation{KeyPrefix: "OUTBOX3", BucketCount: 32}
	otherCount.Generation.BucketCount = 16
	for _, c := range []struct {
		name    string
		m       GenerationMarker
		want    Generation
		wantErr error
	}{
		{"no marker yet: previous", GenerationMarker{}, prev, nil},
		{"open: previous, checked", marker(PhaseOpen), prev, nil},
		{"sealed: current, for good", marker(PhaseSealed), cur, nil},
		{"drained: current", marker(PhaseDrained), cur, nil},
		{"sealed for another successor", otherSuccessor, Generation{}, ErrMisconfigured},
		{"marker of another bucket count", otherCount, Generation{}, ErrMisconfigured},
		{"unknown phase", marker("retired"), Generation{}, ErrGenerationPhase},
	} {
		got, err := WriteTarget(c.m, prev, cur)
		if got != c.want || !errors.Is(err, c.wantErr) || (c.wantErr == nil) != (err == nil) {
			t.Errorf("%s: got %s, %v; want %s, %v", c.name, got, err, c.want, c.wantErr)
		}
	}
}

func TestCheckServable(t *testing.T) {
	prev := Generation{KeyPrefix: "OUTBOX", BucketCount: 8}
	cur := Generation{KeyPrefix: "OUTBOX2", BucketCount: 32}
	link := PredecessorMarker{Exists: true, Predecessor: prev}
	marker := func(p GenerationPhase) GenerationMarker {
		return GenerationMarker{Exists: true, Phase: p, Generation: prev, Successor: cur}
	}
	otherSuccessor, otherCount := marker(PhaseDrained), marker(PhaseDrained)
	otherSuccessor.Successor = Generation{KeyPrefix: "OUTBOX3", BucketCount: 32}
	otherCount.Generation.BucketCount = 16
	for _, c := range []struct {
		name string
		p    PredecessorMarker
		m    GenerationMarker
		want error // nil: serve
	}{
		{"no predecessor: serve", PredecessorMarker{}, GenerationMarker{}, nil},
		{"predecessor drained: serve", link, marker(PhaseDrained), nil},
		{"predecessor open: wait", link, marker(PhaseOpen), ErrGenerationNotOpen},
		{"predecessor sealed, maybe not empty: wait", link, marker(PhaseSealed), ErrGenerationNotOpen},
		{"predecessor without a marker: wait", link, GenerationMarker{}, ErrGenerationNotOpen},
		{"predecessor replaced by another generation", link, otherSuccessor, ErrMisconfigured},
		{"predecessor's marker of another bucket count", link, otherCount, ErrMisconfigured},
		{"unknown phase", link, marker("retired"), ErrGenerationPhase},
	} {
		err := CheckServable(c.p, c.m, cur)
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %v; want %v", c.name, err, c.want)
		}
	}
}

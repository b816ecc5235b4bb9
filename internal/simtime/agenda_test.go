package simtime

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

func TestAgendaRunsInTimeThenInsertionOrder(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := outboxlocal.NewManualClock(start)
	a := NewAgenda(clock)
	var got []string
	add := func(d time.Duration, name string) {
		a.At(start.Add(d), func(time.Time) error { got = append(got, name); return nil })
	}
	add(2*time.Second, "c")
	add(time.Second, "a")
	add(time.Second, "b")
	a.At(start.Add(time.Second), func(now time.Time) error {
		add(0, "added for now") // due already: runs in the same RunDue
		return nil
	})

	if ran, err := a.RunDue(start); ran || err != nil {
		t.Fatalf("RunDue at the start ran %v (%v), want nothing", ran, err)
	}
	// Advance stops the clock at the next event rather than jumping past it.
	if !a.Advance(start) || !clock.Now().Equal(start.Add(time.Second)) {
		t.Fatalf("clock at %v after AdvanceToNext, want +1s", clock.Now().Sub(start))
	}
	if ran, err := a.RunDue(clock.Now()); !ran || err != nil {
		t.Fatalf("RunDue at +1s: ran %v, %v", ran, err)
	}
	if want := []string{"a", "b", "added for now"}; !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
	a.Advance(clock.Now())
	boom := errors.New("boom")
	a.At(clock.Now(), func(time.Time) error { return boom })
	if _, err := a.RunDue(clock.Now()); !errors.Is(err, boom) || !slices.Equal(got, []string{"a", "b", "added for now", "c"}) {
		t.Fatalf("RunDue at +2s: %v, ran %v", err, got)
	}
}

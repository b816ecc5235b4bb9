package lab_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"
)

func newSim(t *testing.T) *lab.Sim {
	t.Helper()
	s, err := lab.NewSim(t.Context(), lab.Config{Settle: synctest.Wait})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSim(t *testing.T) {
	// RunsQueuedFunctionsInTimeOrderAndFIFOAtOneInstant: what At
	// queues runs by time, and at one instant in the order queued, whichever
	// goroutine a timer each would have woken first; RunUntil leaves what is
	// due at its end for the next window.
	t.Run("RunsQueuedFunctionsInTimeOrderAndFIFOAtOneInstant", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newSim(t)
			t0 := time.Now()
			var ran []string
			note := func(name string, at time.Duration) func(time.Time) error {
				return func(now time.Time) error {
					if got := now.Sub(t0); got != at {
						t.Errorf("%s ran at +%v, want +%v", name, got, at)
					}
					ran = append(ran, name)
					return nil
				}
			}
			s.At(t0.Add(2*time.Second), note("b1", 2*time.Second))
			s.At(t0.Add(time.Second), note("a", time.Second))
			s.At(t0.Add(2*time.Second), note("b2", 2*time.Second))
			s.At(t0.Add(3*time.Second), note("c", 3*time.Second))
			if err := s.RunUntil(t0.Add(3 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if want := []string{"a", "b1", "b2"}; !slices.Equal(ran, want) {
				t.Errorf("ran %v in the window, want %v (c is due at its end)", ran, want)
			}
			if err := s.RunUntil(t0.Add(4 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if want := []string{"a", "b1", "b2", "c"}; !slices.Equal(ran, want) {
				t.Errorf("ran %v, want %v", ran, want)
			}
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}
		})
	})

	// ParticipantsQueueWhileTheDriverWaits: a function a participant
	// queues for an instant earlier than the driver's next one still runs at
	// its instant, and the step sees every instant at which something ran.
	t.Run("ParticipantsQueueWhileTheDriverWaits", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newSim(t)
			t0 := time.Now()
			var ranAt time.Duration
			s.Go(func(ctx context.Context) error {
				time.Sleep(500 * time.Millisecond)
				s.At(time.Now().Add(100*time.Millisecond), func(now time.Time) error {
					ranAt = now.Sub(t0)
					return nil
				})
				<-ctx.Done()
				return nil
			})
			s.At(t0.Add(10*time.Second), func(time.Time) error { return nil })
			var steps []time.Duration
			err := s.Drive(time.Time{}, func(now time.Time) (bool, error) {
				steps = append(steps, now.Sub(t0))
				return now.Sub(t0) >= 10*time.Second, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if ranAt != 600*time.Millisecond {
				t.Errorf("the participant's function ran at +%v, want +600ms", ranAt)
			}
			if !slices.Contains(steps, 600*time.Millisecond) || steps[len(steps)-1] != 10*time.Second {
				t.Errorf("steps at %v: want one at +600ms and the last at +10s", steps)
			}
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}
		})
	})

	// TheFirstFailureEndsTheDrive: a queued function's error (or a
	// participant's) stops the simulation, and the driver returns it; what is
	// still queued never runs.
	t.Run("TheFirstFailureEndsTheDrive", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := newSim(t)
			t0 := time.Now()
			boom := errors.New("boom")
			later := false
			s.At(t0.Add(time.Second), func(time.Time) error { return boom })
			s.At(t0.Add(2*time.Second), func(time.Time) error { later = true; return nil })
			if err := s.RunUntil(t0.Add(time.Minute)); !errors.Is(err, boom) {
				t.Errorf("RunUntil = %v, want the function's error", err)
			}
			if err := s.Stop(); !errors.Is(err, boom) {
				t.Errorf("Stop = %v, want the first failure", err)
			}
			if later {
				t.Error("a function queued after the failure ran")
			}
		})
	})
}

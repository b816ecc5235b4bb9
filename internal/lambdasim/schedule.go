package lambdasim

import (
	"sync/atomic"
	"time"
)

// Scheduler runs functions at instants of the emulator's clock. A study in
// a testing/synctest bubble passes its lab.Sim, whose driver runs them on
// the bubble's clock; WallScheduler runs them on wall-clock timers.
type Scheduler interface {
	// At runs fn at t, or as soon as possible when t is not in the future.
	// Any goroutine may call it.
	At(t time.Time, fn func(now time.Time) error)
}

// WallScheduler runs each function on its own wall-clock timer. An error a
// function returns is kept; Err returns the first. The zero value is ready
// to use.
type WallScheduler struct {
	err atomic.Pointer[error]
}

var _ Scheduler = (*WallScheduler)(nil)

// At runs fn at t on the wall clock.
func (w *WallScheduler) At(t time.Time, fn func(now time.Time) error) {
	time.AfterFunc(time.Until(t), func() {
		if err := fn(time.Now()); err != nil {
			w.err.CompareAndSwap(nil, &err)
		}
	})
}

// Err returns the first error a scheduled function returned.
func (w *WallScheduler) Err() error {
	if p := w.err.Load(); p != nil {
		return *p
	}
	return nil
}

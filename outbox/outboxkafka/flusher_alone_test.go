package outboxkafka

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestFlusherAlone(t *testing.T) {
	// A hand-over of its own waits for the running Flush and keeps later
	// hand-overs out of its round; when its ctx ends first, it leaves no
	// reservation behind, and the hand-overs waiting for it go on.
	t.Run("Round_ReservesAndStepsAsideOnCtx", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &flusher{}
			running := &flushRound{done: make(chan struct{})}
			f.running = running

			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			aloneErr := make(chan error, 1)
			go func() {
				_, err := f.joinAlone(ctx)
				aloneErr <- err
			}()
			synctest.Wait()
			f.mu.Lock()
			reserved := f.reserved != nil
			f.mu.Unlock()
			if !reserved {
				t.Fatal("a hand-over of its own reserved nothing while a Flush ran")
			}
			joined := make(chan *flushRound, 1)
			go func() {
				r, err := f.join(t.Context())
				if err != nil {
					t.Error(err)
				}
				joined <- r
			}()
			synctest.Wait()
			if len(joined) != 0 {
				t.Fatal("a shared hand-over joined while a round of its own was reserved")
			}
			if err := <-aloneErr; !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("joinAlone = %v, want the deadline", err)
			}
			f.mu.Lock()
			f.running = nil
			f.mu.Unlock()
			close(running.done)
			r := <-joined
			if r == nil || r.alone || f.reserved != nil {
				t.Fatalf("after the reservation was dropped: round %+v, reserved %v; want a shared round and no reservation", r, f.reserved)
			}
		})
	})

	// With nothing running, a round of its own is the next round, holding
	// only its hand-over; a shared hand-over waits for its Flush.
	t.Run("Round_AdmitsNoOneElse", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &flusher{}
			round, err := f.joinAlone(t.Context())
			if err != nil || !round.alone || round.handing != 1 || f.next != round {
				t.Fatalf("joinAlone = %+v, %v; want the next round, alone, one hand-over", round, err)
			}
			joined := make(chan *flushRound, 1)
			go func() {
				r, _ := f.join(t.Context())
				joined <- r
			}()
			synctest.Wait()
			if len(joined) != 0 {
				t.Fatal("a shared hand-over joined a round of another's own")
			}
			// The Flush of the alone round ends.
			f.mu.Lock()
			f.next = nil
			f.mu.Unlock()
			close(round.done)
			if r := <-joined; r == round || r.alone {
				t.Fatal("the shared hand-over joined the alone round")
			}
		})
	})
}

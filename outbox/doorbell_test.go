package outbox_test

import (
	"slices"
	"testing"

	"github.com/spillway-dev/spillway/outbox"
)

func TestDoorbell(t *testing.T) {
	t.Parallel()
	signalled := func(r *outbox.Rings) bool {
		select {
		case <-r.Rung():
			return true
		default:
			return false
		}
	}

	t.Run("DeliversOnlyTheBucketsListenedFor", func(t *testing.T) {
		t.Parallel()
		r := outbox.NewRings()
		if r.Deliver(3) || signalled(r) {
			t.Fatal("a ring was taken in while listening for nothing")
		}
		r.Listen([]int{5, 3, 3})
		if got := r.Listening(); !slices.Equal(got, []int{3, 5}) {
			t.Fatalf("listening %v, want [3 5]", got)
		}
		if r.Deliver(4) {
			t.Fatal("bucket 4 was not listened for")
		}
		if !r.Deliver(5) || !r.Deliver(3) || !r.Deliver(5) {
			t.Fatal("a ring for a bucket listened for was dropped")
		}
		if !signalled(r) || signalled(r) {
			t.Fatal("want one signal for the rings taken in")
		}
		if got := r.Take(); !slices.Equal(got, []int{3, 5}) {
			t.Fatalf("took %v, want [3 5], each once", got)
		}
		if got := r.Take(); got != nil {
			t.Fatalf("took %v again", got)
		}
	})

	t.Run("ListeningForFewerBucketsDropsTheirRings", func(t *testing.T) {
		t.Parallel()
		r := outbox.NewRings()
		r.Listen([]int{1, 2})
		r.Deliver(1)
		r.Deliver(2)
		r.Listen([]int{2})
		if got := r.Take(); !slices.Equal(got, []int{2}) {
			t.Fatalf("took %v, want [2]: bucket 1 was released", got)
		}
		r.Listen(nil)
		if r.Deliver(2) {
			t.Fatal("a ring was taken in after listening stopped")
		}
	})
}

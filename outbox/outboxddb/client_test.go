package outboxddb

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/outbox/lease"
)

func TestClient(t *testing.T) {
	t.Run("ForEach_CancelledAfterEveryCallSucceeded_IsNoFailure", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var done atomic.Int32
		err := forEach(ctx, 2, 3, func(context.Context, int) error {
			if done.Add(1) == 3 {
				cancel() // the caller gives up just as the last request succeeds
			}
			return nil
		})
		if err != nil || done.Load() != 3 {
			t.Fatalf("forEach = %v after %d successful calls, want nil", err, done.Load())
		}
	})

	t.Run("ForEach_CancelledBeforeEveryCallStarted_ReportsTheCause", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var done atomic.Int32
		err := forEach(ctx, 1, 3, func(context.Context, int) error {
			done.Add(1)
			cancel()
			return nil
		})
		if !errors.Is(err, context.Canceled) || done.Load() == 3 {
			t.Fatalf("forEach = %v after %d calls, want context.Canceled before the third", err, done.Load())
		}
	})

	// Claims_AcceptedBeforeALateCancellation_AreOwned: the round's claims
	// were accepted by DynamoDB; a cancellation that arrives afterwards must
	// not report them failed.
	t.Run("Claims_AcceptedBeforeALateCancellation_AreOwned", func(t *testing.T) {
		s, f, _ := shapeStore(t, 4)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var claims atomic.Int32
		f.update = func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			if claims.Add(1) == 4 {
				cancel()
			}
			return &dynamodb.UpdateItemOutput{}, nil
		}
		acq, err := s.acquire(ctx, testLease, lease.RoundState{})
		if err != nil {
			t.Fatalf("accepted claims reported failed: %v", err)
		}
		wantInts(t, "claimed", acq.Claimed, []int{0, 1, 2, 3})
	})
}

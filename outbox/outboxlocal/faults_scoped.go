package outboxlocal

import (
	"context"
	"sync"
)

// LoseResponseIn returns a context in which the next attempt of op reaches
// the server and is applied, then is answered as LoseResponse answers it;
// the next throttled attempts of op made with the context after that fail
// with ProvisionedThroughputExceededException without reaching the server,
// as when the SDK's retries of a request that already took effect are
// throttled until it gives up. Only calls made with the returned context
// (or one derived from it) are affected, so the fault reaches one caller's
// request among concurrent callers of the same operation.
func (f *Faults) LoseResponseIn(ctx context.Context, op string, throttled int) context.Context {
	return context.WithValue(ctx, scopedLossKey{}, &scopedLoss{faults: f, op: op, lose: true, throttled: throttled})
}

// scopedLossKey carries a *scopedLoss in a context.
type scopedLossKey struct{}

// scopedLoss is the state of one LoseResponseIn: first the loss, then the
// throttled attempts.
type scopedLoss struct {
	faults    *Faults
	op        string
	mu        sync.Mutex
	lose      bool
	throttled int
}

// scopedLossFor returns the LoseResponseIn state of ctx for op on f, or nil.
func (f *Faults) scopedLossFor(ctx context.Context, op string) *scopedLoss {
	sl, _ := ctx.Value(scopedLossKey{}).(*scopedLoss)
	if sl == nil || sl.faults != f || sl.op != op {
		return nil
	}
	return sl
}

// takeThrottle reports whether this attempt is one of the throttled ones.
func (sl *scopedLoss) takeThrottle() bool {
	if sl == nil {
		return false
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.lose || sl.throttled == 0 {
		return false
	}
	sl.throttled--
	return true
}

// takeLoss reports whether this attempt's response is the one to lose.
func (sl *scopedLoss) takeLoss() bool {
	if sl == nil {
		return false
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	lose := sl.lose
	sl.lose = false
	return lose
}

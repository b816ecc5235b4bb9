package outbox

import (
	"context"
	"slices"
	"time"

	"github.com/spillway-dev/spillway/outbox/internal/sleep"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// joinCheck is a run's decision whether to take part in the fleet, and
// whether an idle relay still waits for the buckets it was woken for: reads
// of the table, never a write.
type joinCheck struct{ *run }

// shouldJoin decides whether this run takes part in the fleet. A schedule
// sweep or a wake-up costs one cheap read when a live peer already drains the
// work, instead of a heartbeat, claims, a stop stamp and releases: that churn
// would cost more than the messages themselves.
func (u joinCheck) shouldJoin() (bool, error) {
	r := u.r
	switch u.in.Trigger {
	case TriggerDirect:
		return true, nil
	case TriggerWake:
		if u.in.Join {
			return true, nil
		}
	case TriggerSchedule:
	default:
		return false, Misconfigured("run relay", "unknown trigger %q", u.in.Trigger)
	}
	hinted := u.validHints()
	if u.in.Trigger == TriggerSchedule || len(hinted) == 0 {
		pending, err := r.store.PendingBuckets(u.ctx, allBuckets(r.opts.BucketCount))
		if err != nil {
			return false, err
		}
		replays, err := r.park.replayReady(u.ctx, allBuckets(r.opts.BucketCount), true)
		if err != nil {
			return false, err
		}
		pending = union(pending, replays)
		if len(pending) == 0 {
			u.res.Reason = StopNothingPending
			return false, nil
		}
		hinted = pending
	}
	u.firstLook = r.clock.Now()
	// A wake-up can arrive after the work it announced was drained (a
	// queued or duplicate notification). One strongly consistent read per
	// hinted bucket is far cheaper than joining for nothing, and unlike the
	// eventually consistent probe it cannot miss the commit that sent the
	// wake-up. It goes beside the trust check, both being on the path from
	// the commit to its publish: a bucket the check leaves to a live peer
	// wastes its read. The first sweep fetches what it finds without
	// probing again (firstSweep).
	var heads func() ([]int, error)
	if u.in.Trigger == TriggerWake && len(u.validHints()) > 0 {
		heads = beside(func() ([]int, error) { return u.withHeads(u.ctx, hinted) })
	}
	orphans, err := u.uncovered(hinted)
	var pending []int
	var headErr error
	if heads != nil {
		pending, headErr = heads()
	}
	if err != nil {
		return false, err
	}
	if len(orphans) == 0 {
		u.res.Reason = StopPeerLive
		return false, nil
	}
	if heads != nil {
		if headErr != nil {
			return false, headErr
		}
		// A bucket with nothing at its head may still have a replay asked.
		if rest := without(orphans, pending); len(rest) > 0 {
			replays, err := r.park.replayReady(u.ctx, rest, true)
			if err != nil {
				return false, err
			}
			pending = union(pending, replays)
		}
		if orphans = intersect(orphans, pending); len(orphans) == 0 {
			u.res.Reason = StopNothingPending
			return false, nil
		}
		u.knownPending = orphans
	}
	u.waitFor = orphans
	return true, nil
}

// stillOrphaned repeats the pre-join check's coordination read once the
// publisher is initialised, just before the heartbeat. A cold
// initialisation (connection, TLS, authentication) takes long enough for a
// relay woken a moment earlier to claim the buckets meanwhile: under steady
// traffic every commit wakes a relay, and without this second look each
// wake-up landing in that window would join too, costing a heartbeat, a
// stopped stamp and possibly a rebalance for nothing. It costs one read
// per joining run, and only runs that checked before joining repeat it.
func (u joinCheck) stillOrphaned() (bool, error) {
	if len(u.waitFor) == 0 || !secondLookDue(u.firstLook, u.r.clock.Now()) {
		return true, nil
	}
	orphans, err := u.uncovered(u.waitFor)
	if err != nil {
		return false, err
	}
	if len(orphans) == 0 {
		u.res.Reason = StopPeerLive
		return false, nil
	}
	u.waitFor = orphans
	return true, nil
}

// beside runs f in a goroutine and returns the wait for its answer.
func beside[T any](f func() (T, error)) (wait func() (T, error)) {
	type answer struct {
		v   T
		err error
	}
	done := make(chan answer, 1)
	go func() {
		v, err := f()
		done <- answer{v, err}
	}()
	return func() (T, error) {
		a := <-done
		return a.v, a.err
	}
}

// withMessages returns the buckets of bs whose head holds a message, read
// with the consistent fetch, or that have a replay request.
func (u *run) withMessages(ctx context.Context, bs []int) ([]int, error) {
	out, err := u.withHeads(ctx, bs)
	if err != nil {
		return nil, err
	}
	replays, err := u.r.park.replayReady(ctx, bs, true)
	if err != nil {
		return nil, err
	}
	return union(out, replays), nil
}

// withHeads returns the buckets of bs whose head holds a message, read
// with the consistent fetch.
func (u *run) withHeads(ctx context.Context, bs []int) ([]int, error) {
	var out []int
	for _, b := range bs {
		msgs, err := u.r.store.FetchBatch(ctx, b, 1)
		if err != nil {
			return nil, err
		}
		if len(msgs) > 0 {
			out = append(out, b)
		}
	}
	return out, nil
}

// validHints returns the hinted buckets inside the bucket range, ascending
// and distinct.
func (u joinCheck) validHints() []int {
	var out []int
	for _, b := range u.in.Buckets {
		if b >= 0 && b < u.r.opts.BucketCount && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out
}

// uncovered is the trust check of the buckets bs: those no live peer
// covers (readUncovered). A bucket left to a live peer only because its
// round seemed to be claiming it is read again once lease.ClaimWindow has passed
// (confirmClaims, one strongly consistent read) and counts as uncovered if
// it is still free: the inference rests on the peer's clock, and when it
// is wrong the commit would wait for the peer's next round or the
// schedule. A continuation wake-up draws no such inference (readUnheld):
// its buckets were just released with work left.
func (u joinCheck) uncovered(bs []int) ([]int, error) {
	r := u.r
	if u.continuation() {
		return readUnheld(u.ctx, r.store, r.clock, r.req, bs)
	}
	cov, err := readUncovered(u.ctx, r.store, r.clock, r.req, bs)
	if err != nil || len(cov.Uncovered) > 0 || len(cov.Claimed) == 0 {
		return cov.Uncovered, err
	}
	if u.overBudget(r.clock.Now().Add(lease.ClaimWindow)) || !sleep.For(lease.ClaimWindow, u.stop.Done()) {
		return nil, u.stop.Err()
	}
	return confirmClaims(u.ctx, r.store, r.clock, r.opts.RelayID, cov.Claimed)
}

// continuation reports a run started by a relay's continuation wake-up.
func (u joinCheck) continuation() bool { return u.in.Trigger == TriggerWake && u.in.Hop > 0 }

// orphaned returns the buckets of bs that no live peer holds in coord
// (lease.Coordination.Unheld): free, expired, held by a stopped or silent relay,
// or named after this relay itself (its own lease from an earlier run,
// which it resumes). The idle-exit decision uses it: pending work a peer
// is only inferred to be claiming is no reason to stop.
func (u joinCheck) orphaned(coord lease.Coordination, bs []int, now time.Time) []int {
	r := u.r
	return coord.Unheld(bs, r.opts.RelayID, now, r.opts.LeaseDuration)
}

// stillWaiting re-checks the hinted buckets this run waits for: it stops
// waiting for those a live peer took over or that hold nothing any more.
func (u joinCheck) stillWaiting(now time.Time) (bool, error) {
	r := u.r
	pending, err := r.store.PendingBuckets(u.ctx, u.waitFor)
	if err != nil {
		return false, err
	}
	if len(pending) == 0 {
		u.waitFor = nil
		return false, nil
	}
	coord, err := r.store.ReadCoordination(u.ctx)
	if err != nil {
		return false, err
	}
	u.waitFor = u.orphaned(coord, pending, now)
	return len(u.waitFor) > 0, nil
}

func allBuckets(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// without returns the elements of a that are not in b, in a's order.
func without(a, b []int) []int {
	var out []int
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// intersect returns the elements of a that are in b, in a's order.
func intersect(a, b []int) []int {
	var out []int
	for _, x := range a {
		if slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

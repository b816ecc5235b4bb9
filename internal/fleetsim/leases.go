package fleetsim

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// overlapTolerance absorbs tick rounding (100 ns) and the embedded server's
// float64 comparison of tick numbers (exact to 12.8 µs).
const overlapTolerance = time.Millisecond

// belief is one interval during which a relay may treat a bucket as its
// own: from the return of the call that gave it the bucket until its host
// clock reads ref + LeaseDuration, or until a later call released or lost
// the bucket.
type belief struct {
	relay  string
	clock  *hostClock
	bucket int
	start  time.Time // true time the belief began
	// ref is the host clock's reading when the latest call confirming the
	// lease started; the stored expiry is at least ref + L.
	ref       time.Time
	startSkew time.Duration
	ended     time.Time // true time; zero unless ended by a call
	// confirmed is the true time of the latest round or renewal that
	// confirmed the belief, whether it renewed the lease or left it.
	confirmed time.Time
}

// leaseBook models what every relay believes it holds, from its store calls
// (see the package documentation for why the model bounds the engine's own
// view), and checks that a belief never outlasts the moment another relay
// took its bucket over by more than the two clocks' skew explains.
type leaseBook struct {
	lease time.Duration

	mu       sync.Mutex
	open     map[string]map[int]*belief // relay → bucket → latest belief
	byBucket map[int][]*belief          // ascending by start
	plain    map[string]bool            // relays that keep every round
	// firstRound is the true time each relay's first acquisition round
	// started: its first heartbeat, which a peer's round sees only if it
	// starts later.
	firstRound map[string]time.Time
}

func newLeaseBook(lease time.Duration) *leaseBook {
	return &leaseBook{lease: lease, open: map[string]map[int]*belief{}, byBucket: map[int][]*belief{}, plain: map[string]bool{},
		firstRound: map[string]time.Time{}}
}

// markPlain records a relay that keeps every lease every round.
func (lb *leaseBook) markPlain(relay string) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.plain[relay] = true
}

// checkMixed counts the beliefs that a relay keeping every round took
// over while their holder, a relay on schedule, still believed in them: two
// relays then publish one bucket. It returns the first such takeover that
// the mixed fleet must not make: the holder's last round started after the
// taker's first (so it read the taker's heartbeat and keeps every lease
// every round), confirmed the lease at most interval before the takeover,
// and the taker's clock was ahead of the holder's by at most skewLimit.
// Kept every round, a lease lasts L after each round, so such a taker sees
// it expire only after the next round is due: a takeover means the round
// left the lease unrenewed, with less than the skew the mixed fleet
// tolerates left. A taker's claim before any holder's round could see it
// is the limit docs/order.md states (Mixed fleets): counted, not failed.
func (lb *leaseBook) checkMixed(interval, skewLimit time.Duration) (*leaseViolation, int) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	var v *leaseViolation
	n := 0
	lb.takeoversLocked(func(r, x *belief) {
		overlap := lb.endOf(r).Sub(x.start)
		if !lb.plain[x.relay] || lb.plain[r.relay] || overlap <= overlapTolerance {
			return
		}
		n++
		skew := x.startSkew - r.clock.skewAt(x.start)
		seen := r.confirmed.After(lb.firstRound[x.relay])
		if v == nil && seen && x.start.Sub(r.confirmed) <= interval && skew <= skewLimit {
			v = &leaseViolation{bucket: r.bucket, first: r, second: x, overlap: overlap, allowed: 0}
		}
	})
	return v, n
}

// takeoversLocked calls fn with every belief r that another relay's
// belief x began at or after, x the first such (firstTaker); lb.mu is held.
func (lb *leaseBook) takeoversLocked(fn func(r, x *belief)) {
	for _, bs := range lb.byBucket {
		for _, r := range bs {
			if x := firstTaker(r, bs); x != nil {
				fn(r, x)
			}
		}
	}
}

// activeAt reports whether b holds at true time t.
func (lb *leaseBook) activeAt(b *belief, t time.Time) bool {
	if t.Before(b.start) || (!b.ended.IsZero() && !t.Before(b.ended)) {
		return false
	}
	return t.Add(b.clock.skewAt(t)).Before(b.ref.Add(lb.lease))
}

// endOf returns the true time b ended.
func (lb *leaseBook) endOf(b *belief) time.Time {
	end := b.clock.trueTimeReaching(b.start, b.ref.Add(lb.lease))
	if !b.ended.IsZero() && b.ended.Before(end) {
		end = b.ended
	}
	if end.Before(b.start) {
		end = b.start
	}
	return end
}

// acquired records a successful acquisition round: ref is the host reading
// and callStart the true time when the call started, ret when it returned.
// A bucket in claimed was won by a conditional write on a free or expired
// lease item, so no other relay held it then: its belief starts afresh at
// ret even when the relay still trusted an older lease on it, for a relay
// that took the bucket over meanwhile and gave it up no longer bounds the
// new belief.
func (lb *leaseBook) acquired(relay string, clock *hostClock, ref, callStart, ret time.Time, owned, claimed []int) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if _, ok := lb.firstRound[relay]; !ok {
		lb.firstRound[relay] = callStart
	}
	mine := lb.mineLocked(relay)
	for b, cur := range mine {
		if !slices.Contains(owned, b) && cur.ended.IsZero() {
			cur.ended = callStart
		}
	}
	for _, b := range owned {
		cur := mine[b]
		if cur != nil && cur.ended.IsZero() && lb.activeAt(cur, callStart) {
			if !slices.Contains(claimed, b) {
				cur.ref, cur.confirmed = ref, callStart
				continue
			}
			cur.ended = ret
		}
		nb := &belief{relay: relay, clock: clock, bucket: b, start: ret, ref: ref, startSkew: clock.skewAt(ret), confirmed: callStart}
		mine[b] = nb
		// Calls return in true-time order, so appending keeps the order.
		lb.byBucket[b] = append(lb.byBucket[b], nb)
	}
}

// dropped ends every belief of relay at callStart: a failed acquisition, a
// refused renewal and a release all make the engine drop its ownership, and
// it publishes nothing while such a call runs.
func (lb *leaseBook) dropped(relay string, callStart time.Time) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for _, cur := range lb.mineLocked(relay) {
		if cur.ended.IsZero() {
			cur.ended = callStart
		}
	}
}

// renewed records a successful in-flight renewal of buckets.
func (lb *leaseBook) renewed(relay string, ref, ret time.Time, buckets []int) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	mine := lb.mineLocked(relay)
	for _, b := range buckets {
		cur := mine[b]
		if cur == nil || !cur.ended.IsZero() {
			continue
		}
		if !lb.activeAt(cur, ret) {
			// Answered after the lease ran out: the engine drops it.
			cur.ended = ret
			continue
		}
		cur.ref, cur.confirmed = ref, ret
	}
}

func (lb *leaseBook) mineLocked(relay string) map[int]*belief {
	m := lb.open[relay]
	if m == nil {
		m = map[int]*belief{}
		lb.open[relay] = m
	}
	return m
}

// left returns how much of relay's lease on bucket its own clock shows
// left at true time t, and whether it believes it holds the bucket.
func (lb *leaseBook) left(relay string, bucket int, t time.Time) (time.Duration, bool) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	cur := lb.open[relay][bucket]
	if cur == nil || !lb.activeAt(cur, t) {
		return 0, false
	}
	return cur.ref.Add(lb.lease).Sub(t.Add(cur.clock.skewAt(t))), true
}

// allowed is the overlap the skew explains when x took a bucket over from
// r: x claimed once the expiry r's lease carries had passed on x's clock.
// Later holders got the bucket from x (or after it), so x, the first taker,
// bounds r's overlap with all of them. at is when r's skew is read. Two
// beliefs that began at the same instant do not tell who took over from
// whom: either order may explain the overlap.
func allowed(r, x *belief, at time.Time) time.Duration {
	d := x.startSkew - r.clock.skewAt(at)
	if x.start.Equal(r.start) {
		d = max(d, r.startSkew-x.clock.skewAt(at))
	}
	return max(0, d) + overlapTolerance
}

// leaseViolation describes two overlapping beliefs.
type leaseViolation struct {
	bucket           int
	first, second    *belief
	overlap, allowed time.Duration
}

// violation is v as a broken invariant, Detail ending in suffix.
func (v *leaseViolation) violation(invariant, suffix string) *Violation {
	return &Violation{Invariant: invariant, Detail: v.String() + suffix, bucket: v.bucket, relays: []string{v.first.relay, v.second.relay}}
}

func (v *leaseViolation) String() string {
	return fmt.Sprintf("bucket %d held by %s (since %s) while %s took it over (since %s) for %v; clock skew explains %v",
		v.bucket, v.first.relay, v.first.start.Format("15:04:05.000"), v.second.relay, v.second.start.Format("15:04:05.000"), v.overlap, v.allowed)
}

// firstTaker returns the first belief of another relay on r's bucket that
// began at or after r, from bs (ascending by start), or nil.
func firstTaker(r *belief, bs []*belief) *belief {
	for _, x := range bs {
		if x.relay != r.relay && !x.start.Before(r.start) {
			return x
		}
	}
	return nil
}

// checkAt checks every belief active at t against the relay that first took
// its bucket over.
func (lb *leaseBook) checkAt(t time.Time) *leaseViolation {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	var v *leaseViolation
	lb.takeoversLocked(func(r, x *belief) {
		if v != nil || !lb.activeAt(r, t) || x.start.After(t) {
			return
		}
		if overlap, limit := t.Sub(x.start), allowed(r, x, t); overlap > limit {
			v = &leaseViolation{bucket: r.bucket, first: r, second: x, overlap: overlap, allowed: limit}
		}
	})
	return v
}

// checkAll checks every belief over its whole interval; the step checks
// can miss the end of an overlap that fell between two steps. It also
// returns how many beliefs overlapped their first taker.
func (lb *leaseBook) checkAll() (*leaseViolation, int) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	var v *leaseViolation
	overlaps := 0
	lb.takeoversLocked(func(r, x *belief) {
		end := lb.endOf(r)
		overlap := end.Sub(x.start)
		if overlap <= 0 {
			return
		}
		overlaps++
		if limit := allowed(r, x, end); v == nil && overlap > limit {
			v = &leaseViolation{bucket: r.bucket, first: r, second: x, overlap: overlap, allowed: limit}
		}
	})
	return v, overlaps
}

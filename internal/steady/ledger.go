package steady

import (
	"slices"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// ledger is what the run measures, fed by the simulated processes as they
// act. Every change that can make a bucket orphaned or owned is observed
// at its instant; a lease lapsing between two changes is accounted at its
// expiry.
type ledger struct {
	mu sync.Mutex

	start, end    time.Time // of the run
	warmupEnd     time.Time
	leaseDuration time.Duration
	buckets       int

	msgs        map[outbox.MessageID]*msgState
	unpublished []int // per bucket: committed, not yet acknowledged
	committed   int
	published   int
	duplicates  int

	envs       []*env
	lastOwner  []string // per bucket: the relay that last claimed it
	handovers  int
	claims     int
	orphanFrom []time.Time // per bucket: since when pending without a live owner
	observed   time.Time   // the last observation
	maxOrphan  orphanSpell
	orphaned   time.Duration // summed over buckets

	coordWrites map[string]int
	coordReads  map[string]int
	msgReads    int
	msgWrites   int
	refused     map[string]int
	late        []refusal // refusals after the warm-up
}

type msgState struct {
	committedAt time.Time
	ackedAt     time.Time
	acks        int
}

// orphanSpell is a bucket's longest time pending without a live owner.
type orphanSpell struct {
	Bucket int
	From   time.Time
	Length time.Duration
}

type refusal struct {
	At   time.Time
	Kind string
}

func newLedger(buckets int, leaseDuration time.Duration, start, warmupEnd time.Time) *ledger {
	return &ledger{
		start:         start,
		observed:      start,
		warmupEnd:     warmupEnd,
		leaseDuration: leaseDuration,
		buckets:       buckets,
		msgs:          map[outbox.MessageID]*msgState{},
		unpublished:   make([]int, buckets),
		lastOwner:     make([]string, buckets),
		orphanFrom:    make([]time.Time, buckets),
		maxOrphan:     orphanSpell{Bucket: -1},
		coordWrites:   map[string]int{},
		coordReads:    map[string]int{},
		refused:       map[string]int{},
	}
}

// request counts one DynamoDB request.
func (l *ledger) request(r request, at time.Time, wasRefused bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case r.coordination && r.write:
		l.coordWrites[r.kind]++
	case r.coordination:
		l.coordReads[r.kind]++
	case r.write:
		l.msgWrites++
	default:
		l.msgReads++
	}
	if wasRefused {
		l.refused[r.kind]++
		if !at.Before(l.warmupEnd) {
			l.late = append(l.late, refusal{At: at, Kind: r.kind})
		}
	}
}

// committed records a message whose transaction returned at at.
func (l *ledger) commit(m outbox.Message, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lapseLocked(at)
	defer l.observeLocked(at)
	st := l.msgs[m.ID]
	if st == nil {
		st = &msgState{}
		l.msgs[m.ID] = st
	}
	st.committedAt = at
	l.committed++
	if st.acks == 0 {
		l.unpublished[m.Bucket()]++
	}
}

// acked records Kafka's acknowledgement of msgs at at.
func (l *ledger) acked(msgs []outbox.Message, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lapseLocked(at)
	defer l.observeLocked(at)
	for _, m := range msgs {
		st := l.msgs[m.ID]
		if st == nil {
			// Acknowledged before its writer recorded the commit: the
			// commit is counted when it is recorded.
			st = &msgState{}
			l.msgs[m.ID] = st
		}
		st.acks++
		if st.acks > 1 {
			l.duplicates++
			continue
		}
		st.ackedAt = at
		l.published++
		if !st.committedAt.IsZero() {
			l.unpublished[m.Bucket()]--
		}
	}
}

// acquired installs, at now, a round's outcome as the engine does: the
// owned set from the round's start, or nothing after a failed round.
func (l *ledger) acquired(e *env, start, now time.Time, acq lease.Acquisition, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lapseLocked(now)
	defer l.observeLocked(now)
	if err != nil {
		e.owned, e.leaseAt = nil, time.Time{}
		return
	}
	e.owned, e.leaseAt = slices.Clone(acq.Owned), start
	for _, b := range acq.Claimed {
		l.claims++
		if prev := l.lastOwner[b]; prev != "" && prev != e.relayID {
			l.handovers++
		}
		l.lastOwner[b] = e.relayID
	}
}

// renewed moves, at now, the lease reference of a successful renewal to
// its start; a refused one loses every bucket, a failed one changes
// nothing.
func (l *ledger) renewed(e *env, start, now time.Time, ok bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lapseLocked(now)
	defer l.observeLocked(now)
	switch {
	case err != nil:
	case ok:
		e.leaseAt = start
	default:
		e.owned, e.leaseAt = nil, time.Time{}
	}
}

// releasing ends the relay's ownership when its stop begins: the stopped
// stamp makes its peers stop counting it from then on.
func (l *ledger) releasing(e *env, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lapseLocked(now)
	defer l.observeLocked(now)
	e.owned, e.leaseAt = nil, time.Time{}
}

// started and ended bracket an invocation; a relay is a live owner only
// while its invocation runs (a frozen environment polls nothing).
func (l *ledger) started(e *env, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lapseLocked(now)
	defer l.observeLocked(now)
	if !slices.Contains(l.envs, e) {
		l.envs = append(l.envs, e)
	}
	e.running = true
}

func (l *ledger) ended(e *env, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lapseLocked(now)
	defer l.observeLocked(now)
	e.running = false
	e.owned, e.leaseAt = nil, time.Time{}
}

// lapseLocked opens the spells of the buckets whose last live owner's lease
// lapsed since the last observation: nothing else changed in between, so
// such a bucket is orphaned from that expiry on.
func (l *ledger) lapseLocked(now time.Time) {
	for b := range l.buckets {
		if l.unpublished[b] == 0 || !l.orphanFrom[b].IsZero() || l.liveOwnerLocked(b, now) {
			continue
		}
		from := l.observed
		for _, e := range l.envs {
			if e.running && slices.Contains(e.owned, b) {
				if exp := e.leaseAt.Add(l.leaseDuration); exp.After(from) {
					from = exp
				}
			}
		}
		l.orphanFrom[b] = from
	}
}

// observeLocked opens and closes the ownership spells after a change at
// now; the state seen lasts until the next change or a lease's expiry.
func (l *ledger) observeLocked(now time.Time) {
	l.observed = now
	for b := range l.buckets {
		orphan := l.unpublished[b] > 0 && !l.liveOwnerLocked(b, now)
		switch {
		case orphan && l.orphanFrom[b].IsZero():
			l.orphanFrom[b] = now
		case !orphan && !l.orphanFrom[b].IsZero():
			l.closeSpellLocked(b, now)
		}
	}
}

func (l *ledger) closeSpellLocked(b int, now time.Time) {
	from := l.orphanFrom[b]
	length := now.Sub(from)
	l.orphaned += length
	if length > l.maxOrphan.Length {
		l.maxOrphan = orphanSpell{Bucket: b, From: from, Length: length}
	}
	l.orphanFrom[b] = time.Time{}
}

func (l *ledger) liveOwnerLocked(b int, now time.Time) bool {
	for _, e := range l.envs {
		if e.running && slices.Contains(e.owned, b) && now.Before(e.leaseAt.Add(l.leaseDuration)) {
			return true
		}
	}
	return false
}

// finish closes the spells still open when the run ends at now.
func (l *ledger) finish(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lapseLocked(now)
	l.end = now
	for b := range l.buckets {
		if !l.orphanFrom[b].IsZero() {
			l.closeSpellLocked(b, now)
		}
	}
}

// pending returns the committed messages not yet acknowledged.
func (l *ledger) pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, u := range l.unpublished {
		n += u
	}
	return n
}

// latencies returns every published message's commit-to-ack time.
func (l *ledger) latencies() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]time.Duration, 0, len(l.msgs))
	for _, st := range l.msgs {
		if st.acks > 0 && !st.committedAt.IsZero() {
			out = append(out, st.ackedAt.Sub(st.committedAt))
		}
	}
	slices.Sort(out)
	return out
}

package lease

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// tableIO is a IO over an in-memory coordination partition that
// applies the table contract's conditions, so a keep with a stale version
// is refused as DynamoDB would refuse it.
type tableIO struct {
	leases map[int]State
	relays map[string]RelayState
	calls  []string
}

func newTableIO() *tableIO {
	return &tableIO{leases: map[int]State{}, relays: map[string]RelayState{}}
}

func (t *tableIO) Heartbeat(_ context.Context, id string, now time.Time, keepsAhead bool) (bool, error) {
	t.calls = append(t.calls, id+" heartbeat")
	t.relays[id] = RelayState{RelayID: id, LastSeen: now, KeepsAhead: keepsAhead}
	return true, nil
}

func (t *tableIO) Snapshot(context.Context) (Coordination, error) {
	t.calls = append(t.calls, "snapshot")
	var c Coordination
	for _, b := range slices.Sorted(maps.Keys(t.leases)) {
		c.Leases = append(c.Leases, t.leases[b])
	}
	c.Relays, _ = t.heartbeats()
	return c, nil
}

func (t *tableIO) Heartbeats(context.Context) ([]RelayState, error) {
	t.calls = append(t.calls, "heartbeats")
	return t.heartbeats()
}

func (t *tableIO) heartbeats() ([]RelayState, error) {
	var out []RelayState
	for _, id := range slices.Sorted(maps.Keys(t.relays)) {
		out = append(out, t.relays[id])
	}
	return out, nil
}

func (t *tableIO) WriteLeases(_ context.Context, id string, op Op, ws []Write) (accepted, refused []int, err error) {
	for _, w := range ws {
		t.calls = append(t.calls, fmt.Sprintf("%s %d", op, w.Bucket))
		l, ok := t.leases[w.Bucket]
		var pass bool
		switch op {
		case OpKeep:
			pass = ok && l.Owner == id && l.ExpiresAt.Equal(w.Seen) && !w.Seen.After(w.Expiry)
			l.ExpiresAt = w.Expiry
		case OpRelease:
			pass = ok && l.Owner == id && l.ExpiresAt.Equal(w.Seen)
			l.Owner, l.ExpiresAt = "", w.Now
		case OpClaim:
			pass = !ok || l.Owner == "" || !l.ExpiresAt.After(w.Now)
			l = State{Bucket: w.Bucket, Owner: id, ExpiresAt: w.Expiry}
		}
		if !pass {
			refused = append(refused, w.Bucket)
			continue
		}
		t.leases[w.Bucket] = l
		accepted = append(accepted, w.Bucket)
	}
	return accepted, refused, nil
}

func (t *tableIO) Prune(context.Context, string, PruneWrite) int { return 0 }

// takeCalls returns the calls since the last take.
func (t *tableIO) takeCalls() string {
	s := strings.Join(t.calls, ", ")
	t.calls = nil
	return s
}

// quietFleet runs relays' rounds on one table, carrying each one's state
// like the relay engine.
type quietFleet struct {
	io     *tableIO
	n      int
	states map[string]RoundState
}

func (f *quietFleet) round(t *testing.T, id string, now time.Time) (Acquisition, string) {
	t.Helper()
	st := f.states[id]
	acq, err := AcquireRound(context.Background(), f.io, nil, now, Request{RelayID: id, BucketCount: f.n, LeaseDuration: rl}, st)
	if err != nil {
		t.Fatalf("round of %s at %v: %v", id, now.Sub(rt), err)
	}
	st.Round++
	st.Standby, st.Settled = acq.Standby, acq.Settled
	f.states[id] = st
	return acq, f.io.takeCalls()
}

func TestLeaseRoundQuiet(t *testing.T) {
	t.Run("SettledFleet_ReadsOnlyHeartbeats_AndEveryLeaseOnceALeaseDuration", func(t *testing.T) {
		f := &quietFleet{io: newTableIO(), n: 4, states: map[string]RoundState{}}
		f.round(t, "a", rt)
		f.round(t, "b", at(time.Second))
		f.round(t, "a", at(10*time.Second)) // a releases b's range
		f.round(t, "b", at(11*time.Second)) // b claims it
		full := map[string]int{}
		for k := 2; k < 11; k++ {
			for i, id := range []string{"a", "b"} {
				acq, calls := f.round(t, id, at(time.Duration(10*k+i)*time.Second))
				if acq.Refused != 0 || len(acq.Owned) != 2 || len(acq.Claimed)+len(acq.Released)+len(acq.Lost) != 0 {
					t.Fatalf("round %d of %s moved something: %+v (%s)", k, id, acq, calls)
				}
				switch {
				case strings.Contains(calls, "snapshot"):
					full[id]++
					if acq.Quiet || !acq.Settled.IsSettled() {
						t.Fatalf("full round of %s in a settled fleet: %+v", id, acq)
					}
				case acq.Quiet:
					if want := id + " heartbeat, heartbeats, keep "; !strings.HasPrefix(calls, want) {
						t.Fatalf("quiet round of %s sent %q", id, calls)
					}
				default:
					t.Fatalf("round of %s neither full nor quiet: %q", id, calls)
				}
			}
		}
		// Nine rounds of 10 s with a 30 s lease: a full read every third
		// round, give or take the first.
		for _, id := range []string{"a", "b"} {
			if full[id] < 2 || full[id] > 4 {
				t.Fatalf("%s read every lease %d times in 9 rounds, want 3 (±1)", id, full[id])
			}
		}
	})

	t.Run("SettledFleet_ReadsEverythingAfterAJoin_AndAfterARefusedKeep", func(t *testing.T) {
		f := &quietFleet{io: newTableIO(), n: 4, states: map[string]RoundState{}}
		f.round(t, "a", rt)
		f.round(t, "b", at(time.Second))
		f.round(t, "a", at(10*time.Second))
		f.round(t, "b", at(11*time.Second))
		f.round(t, "a", at(20*time.Second))
		st := f.states["a"]
		if !st.Settled.IsSettled() {
			t.Fatal("a did not settle")
		}
		st.Settled.at = Ticks(at(20 * time.Second)) // current for the next round
		f.states["a"] = st
		// c joins: a's next round sees another fleet and reads everything.
		f.round(t, "c", at(25*time.Second))
		acq, calls := f.round(t, "a", at(30*time.Second))
		if !strings.Contains(calls, "heartbeats, snapshot") || acq.Quiet || acq.Settled.IsSettled() {
			t.Fatalf("round after a join: %+v, calls %q", acq, calls)
		}

		// Another writer changes a settled relay's lease (the relay wrote it
		// through an in-flight renewal and forgot to forget): the quiet keep
		// is refused, not applied, and the next round reads everything and
		// keeps the lease again.
		g := &quietFleet{io: newTableIO(), n: 2, states: map[string]RoundState{}}
		for k := range 2 {
			g.round(t, "a", at(time.Duration(10*k)*time.Second))
		}
		st = g.states["a"]
		if !st.Settled.IsSettled() {
			t.Fatal("a alone did not settle")
		}
		st.Settled.at = Ticks(at(10 * time.Second)) // current for the next round
		g.states["a"] = st
		l := g.io.leases[1]
		l.ExpiresAt = l.ExpiresAt.Add(time.Second)
		g.io.leases[1] = l
		acq, calls = g.round(t, "a", at(20*time.Second))
		if !acq.Quiet || !slices.Equal(acq.Lost, []int{1}) || acq.Refused != 1 || acq.Settled.IsSettled() {
			t.Fatalf("quiet round over a changed lease: %+v, calls %q", acq, calls)
		}
		acq, calls = g.round(t, "a", at(30*time.Second))
		if acq.Quiet || !slices.Equal(acq.Owned, []int{0, 1}) || acq.Refused != 0 {
			t.Fatalf("round after the refusal: %+v, calls %q", acq, calls)
		}
	})

	t.Run("SettledAfter_OnlyForASettledFleet", func(t *testing.T) {
		req := Request{RelayID: "a", BucketCount: 2, LeaseDuration: rl}
		live := at(20 * time.Second)
		keep := []Write{{Bucket: 0, Expiry: at(rl)}}
		settledSnap := Coordination{Leases: []State{lease(0, "a", live), lease(1, "b", live)}, Relays: []RelayState{beat("a", rt), beat("b", rt)}}
		if s := settledAfter(req, rt, settledSnap, RoundPlan{Keep: keep, StandbyRank: -1}, Acquisition{}, false); !s.IsSettled() || s.at != Ticks(rt) {
			t.Fatalf("settled fleet: %+v", s)
		}
		fresh := settledAfter(req, rt, settledSnap, RoundPlan{Keep: keep, StandbyRank: -1}, Acquisition{}, true)
		if off := Ticks(rt) - fresh.at; off < 0 || off >= durationTicks(rl) {
			t.Fatalf("fresh offset %d ticks, want within a lease", off)
		}
		for name, c := range map[string]struct {
			snap Coordination
			plan RoundPlan
			acq  Acquisition
		}{
			"a bucket free":       {Coordination{Leases: []State{lease(0, "a", live)}, Relays: settledSnap.Relays}, RoundPlan{Keep: keep}, Acquisition{}},
			"a lease expired":     {Coordination{Leases: []State{lease(0, "a", live), lease(1, "b", rt)}, Relays: settledSnap.Relays}, RoundPlan{Keep: keep}, Acquisition{}},
			"an inactive holder":  {Coordination{Leases: settledSnap.Leases, Relays: []RelayState{beat("a", rt), stopped("b", rt)}}, RoundPlan{Keep: keep}, Acquisition{}},
			"a share not met":     {Coordination{Leases: []State{lease(0, "b", live), lease(1, "b", live)}, Relays: settledSnap.Relays}, RoundPlan{}, Acquisition{}},
			"a claim this round":  {settledSnap, RoundPlan{Keep: keep, Claim: keep}, Acquisition{}},
			"a lost keep":         {settledSnap, RoundPlan{Keep: keep}, Acquisition{Lost: []int{0}}},
			"a refused heartbeat": {settledSnap, RoundPlan{Keep: keep}, Acquisition{HeartbeatRefused: true}},
			"a held-back keep":    {settledSnap, RoundPlan{Keep: keep, Guarded: []int{1}}, Acquisition{}},
		} {
			if s := settledAfter(req, rt, c.snap, c.plan, c.acq, false); s.IsSettled() {
				t.Errorf("%s: settled", name)
			}
		}
	})
}

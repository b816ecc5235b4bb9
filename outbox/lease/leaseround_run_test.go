package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// scriptedIO is a IO that records the calls of a round and answers
// from a script.
type scriptedIO struct {
	snap      Coordination
	refuseHB  bool
	refuse    map[int]bool // lease writes refused, by bucket
	failOp    Op
	pruneRefs int
	// onClaim and onPrune, when set, run as the claims and the prune are
	// sent, outside the lock.
	onClaim, onPrune func()

	mu    sync.Mutex // the prune is sent beside the lease writes
	calls []string
}

func (s *scriptedIO) record(call string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, call)
}

// sent returns the calls so far, the prune last: it goes beside the
// lease writes, in no order with them.
func (s *scriptedIO) sent() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.calls)
	slices.SortStableFunc(out, func(a, b string) int {
		return cmpBool(strings.HasPrefix(a, "prune"), strings.HasPrefix(b, "prune"))
	})
	return out
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func (s *scriptedIO) Heartbeat(_ context.Context, id string, now time.Time, _ bool) (bool, error) {
	s.record(fmt.Sprintf("heartbeat %s %s", id, now.Format(time.TimeOnly)))
	return !s.refuseHB, nil
}

func (s *scriptedIO) Snapshot(context.Context) (Coordination, error) {
	s.record("snapshot")
	return s.snap, nil
}

func (s *scriptedIO) Heartbeats(context.Context) ([]RelayState, error) {
	s.record("heartbeats")
	return s.snap.Relays, nil
}

func (s *scriptedIO) WriteLeases(_ context.Context, _ string, op Op, ws []Write) (accepted, refused []int, err error) {
	if op == OpClaim && len(ws) > 0 && s.onClaim != nil {
		s.onClaim()
	}
	for _, w := range ws {
		s.record(fmt.Sprintf("%s %d", op, w.Bucket))
		if op == s.failOp {
			return nil, nil, errors.New("throttled")
		}
		if s.refuse[w.Bucket] {
			refused = append(refused, w.Bucket)
		} else {
			accepted = append(accepted, w.Bucket)
		}
	}
	return accepted, refused, nil
}

func (s *scriptedIO) Prune(_ context.Context, _ string, p PruneWrite) int {
	s.record("prune " + strings.Join(p.Relays, ","))
	if s.onPrune != nil {
		s.onPrune()
	}
	return s.pruneRefs
}

func TestAcquireRound(t *testing.T) {
	t.Run("SendsThePlanInContractOrder", func(t *testing.T) {
		io := &scriptedIO{
			snap: Coordination{
				Leases: []State{lease(0, "m", at(5*time.Second)), lease(1, "m", at(5*time.Second)), lease(2, "m", at(5*time.Second))},
				Relays: []RelayState{beat("m", rt), beat("b", rt), stopped("old", at(-time.Hour))},
			},
			refuse:    map[int]bool{2: true},
			pruneRefs: 1,
		}
		req := Request{RelayID: "m", BucketCount: 4, LeaseDuration: rl}
		acq, err := AcquireRound(context.Background(), io, nil, rt, req, RoundState{})
		if err != nil {
			t.Fatal(err)
		}
		// Fleet {b, m}: b's range is [0, 1], m's [2, 3]; m keeps 2 and, rather
		// than swap it, 0, and releases 1. The keep of 2 is refused (a peer
		// took it), and so is the prune (the relay came back).
		want := []string{"heartbeat m 05:06:07", "snapshot", "keep 0", "keep 2", "release 1", "prune old"}
		if !slices.Equal(io.sent(), want) {
			t.Fatalf("calls %q, want %q", io.sent(), want)
		}
		if !slices.Equal(acq.Owned, []int{0}) || !slices.Equal(acq.Lost, []int{2}) || !slices.Equal(acq.Released, []int{1}) || acq.Refused != 2 {
			t.Fatalf("acquisition %+v", acq)
		}
	})

	t.Run("RestsWithoutARequest_AndAFailedWriteForgetsTheStandby", func(t *testing.T) {
		io := &scriptedIO{}
		req := Request{RelayID: "c", BucketCount: 1, LeaseDuration: rl}
		sb := Standby{relayID: "c", since: Ticks(rt), lastCall: Ticks(rt), rank: 2}
		acq, err := AcquireRound(context.Background(), io, nil, at(10*time.Second), req, RoundState{Round: 1, Standby: sb})
		if err != nil || !acq.Rested || acq.StandbyRank != 2 || !acq.Standby.Distant() || len(io.sent()) != 0 {
			t.Fatalf("rest: %+v %v, calls %q", acq, err, io.sent())
		}

		io = &scriptedIO{failOp: OpClaim}
		acq, err = AcquireRound(context.Background(), io, nil, at(30*time.Second), req, RoundState{Round: 2, Standby: acq.Standby})
		if err == nil || acq.Standby.Distant() {
			t.Fatalf("failed claim: %+v %v", acq, err)
		}
		if want := []string{"heartbeat c 05:06:37", "snapshot", "claim 0"}; !slices.Equal(io.sent(), want) {
			t.Fatalf("calls %q, want %q (no prune on the third round)", io.sent(), want)
		}
	})

	t.Run("RefusedHeartbeat_ClaimsNothing", func(t *testing.T) {
		var logs bytes.Buffer
		io := &scriptedIO{refuseHB: true, snap: Coordination{Leases: []State{lease(0, "a", at(time.Second))}}}
		req := Request{RelayID: "a", BucketCount: 2, LeaseDuration: rl}
		acq, err := AcquireRound(context.Background(), io, slog.New(slog.NewTextHandler(&logs, nil)), rt, req, RoundState{Round: 4})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"heartbeat a 05:06:07", "snapshot", "keep 0"}; !slices.Equal(io.sent(), want) {
			t.Fatalf("calls %q, want %q", io.sent(), want)
		}
		if !acq.HeartbeatRefused || acq.Refused != 1 || !slices.Equal(acq.Owned, []int{0}) {
			t.Fatalf("acquisition %+v", acq)
		}
		if !strings.Contains(logs.String(), "claiming nothing") || !strings.Contains(logs.String(), "withheldClaims=[1]") {
			t.Fatalf("log %q", logs.String())
		}
	})

	t.Run("EmptyRelayID_IsSkippedWithAWarning_AndPruned", func(t *testing.T) {
		var logs bytes.Buffer
		io := &scriptedIO{snap: Coordination{Relays: []RelayState{beat("", at(-11*rl)), beat("b", rt)}}}
		req := Request{RelayID: "a", BucketCount: 2, LeaseDuration: rl}
		acq, err := AcquireRound(context.Background(), io, slog.New(slog.NewTextHandler(&logs, nil)), rt, req, RoundState{})
		if err != nil {
			t.Fatalf("a heartbeat record with an empty id failed the round: %v", err)
		}
		if acq.IgnoredRelays != 1 || !slices.Equal(acq.Claimed, []int{0}) {
			t.Fatalf("acquisition %+v", acq)
		}
		if calls := io.sent(); calls[len(calls)-1] != "prune " {
			t.Fatalf("calls %q, want the empty id pruned", calls)
		}
		if !strings.Contains(logs.String(), "empty relay id") {
			t.Fatalf("no warning: %q", logs.String())
		}
	})

	// The prune touches only stale heartbeat records: the claims go out
	// while it is in flight, so a woken relay's first grant does not wait
	// for it; the round still returns once it is answered, its refusals
	// counted.
	t.Run("PrunesBesideTheClaims", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			pruning, claimed := make(chan struct{}), make(chan struct{})
			var claimedDuringPrune bool
			io := &scriptedIO{
				snap:      Coordination{Relays: []RelayState{stopped("old", at(-time.Hour))}},
				pruneRefs: 1,
				onPrune: func() {
					close(pruning)
					<-claimed
				},
				onClaim: func() {
					select {
					case <-pruning:
						claimedDuringPrune = true
					case <-time.After(time.Second):
					}
					close(claimed)
				},
			}
			req := Request{RelayID: "a", BucketCount: 2, LeaseDuration: rl}
			acq, err := AcquireRound(t.Context(), io, nil, rt, req, RoundState{})
			if err != nil {
				t.Fatal(err)
			}
			if !claimedDuringPrune {
				t.Errorf("the claims waited for the prune: calls %q", io.sent())
			}
			if !slices.Equal(acq.Claimed, []int{0, 1}) || acq.Refused != 1 {
				t.Errorf("acquisition %+v, want both buckets claimed and the refused prune counted", acq)
			}
		})
	})
}

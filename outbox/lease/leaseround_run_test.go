package lease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
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
	calls     []string
}

func (s *scriptedIO) Heartbeat(_ context.Context, id string, now time.Time, _ bool) (bool, error) {
	s.calls = append(s.calls, fmt.Sprintf("heartbeat %s %s", id, now.Format(time.TimeOnly)))
	return !s.refuseHB, nil
}

func (s *scriptedIO) Snapshot(context.Context) (Coordination, error) {
	s.calls = append(s.calls, "snapshot")
	return s.snap, nil
}

func (s *scriptedIO) Heartbeats(context.Context) ([]RelayState, error) {
	s.calls = append(s.calls, "heartbeats")
	return s.snap.Relays, nil
}

func (s *scriptedIO) WriteLeases(_ context.Context, _ string, op Op, ws []Write) (accepted, refused []int, err error) {
	for _, w := range ws {
		s.calls = append(s.calls, fmt.Sprintf("%s %d", op, w.Bucket))
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
	s.calls = append(s.calls, "prune "+strings.Join(p.Relays, ","))
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
		if !slices.Equal(io.calls, want) {
			t.Fatalf("calls %q, want %q", io.calls, want)
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
		if err != nil || !acq.Rested || acq.StandbyRank != 2 || !acq.Standby.Distant() || len(io.calls) != 0 {
			t.Fatalf("rest: %+v %v, calls %q", acq, err, io.calls)
		}

		io = &scriptedIO{failOp: OpClaim}
		acq, err = AcquireRound(context.Background(), io, nil, at(30*time.Second), req, RoundState{Round: 2, Standby: acq.Standby})
		if err == nil || acq.Standby.Distant() {
			t.Fatalf("failed claim: %+v %v", acq, err)
		}
		if want := []string{"heartbeat c 05:06:37", "snapshot", "claim 0"}; !slices.Equal(io.calls, want) {
			t.Fatalf("calls %q, want %q (no prune on the third round)", io.calls, want)
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
		if want := []string{"heartbeat a 05:06:07", "snapshot", "keep 0"}; !slices.Equal(io.calls, want) {
			t.Fatalf("calls %q, want %q", io.calls, want)
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
		if io.calls[len(io.calls)-1] != "prune " {
			t.Fatalf("calls %q, want the empty id pruned last", io.calls)
		}
		if !strings.Contains(logs.String(), "empty relay id") {
			t.Fatalf("no warning: %q", logs.String())
		}
	})
}

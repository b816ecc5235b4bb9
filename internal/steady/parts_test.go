package steady

import (
	"errors"
	"maps"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestParts(t *testing.T) {
	// RequestsAreClassifiedByKind drives the real DynamoDB store through
	// one lease lifecycle of two relays and checks every coordination request
	// landed in its kind, and the refused renewal in the refusals after the
	// warm-up.
	t.Run("RequestsAreClassifiedByKind", func(t *testing.T) {
		synctest.Test(t, testRequestsAreClassifiedByKind)
	})

	// LedgerMeasuresOrphanSpells checks the ownership accounting: a spell
	// opens when a bucket has an unpublished message and no running relay
	// holds an unexpired lease on it, and closes when one does.
	t.Run("LedgerMeasuresOrphanSpells", func(t *testing.T) {
		start := time.Date(2030, time.January, 7, 9, 0, 0, 0, time.UTC)
		l := newLedger(2, 30*time.Second, start, start.Add(time.Minute))
		e := &env{relayID: "relay-a"}
		at := func(d time.Duration) time.Time { return start.Add(d) }
		msg := func(b int) outbox.Message { return outbox.Stored(outbox.Message{ID: outbox.NewMessageID()}, b, 0) }

		m1 := msg(0)
		l.commit(m1, at(time.Second))           // no relay: a spell opens
		l.started(e, at(1200*time.Millisecond)) // running, owns nothing yet
		l.acquired(e, at(1400*time.Millisecond), at(1500*time.Millisecond), lease.Acquisition{Owned: []int{0, 1}, Claimed: []int{0, 1}}, nil)
		l.acked([]outbox.Message{m1}, at(2*time.Second))
		// The lease, from the round's start, lapses at 31.4 s without a
		// renewal: bucket 1's message committed at 40 s has no live owner
		// until the relay renews at 41 s.
		l.commit(msg(1), at(40*time.Second))
		l.renewed(e, at(41*time.Second), at(41*time.Second), true, nil)
		// The lease lapses again at 71 s with messages pending on both
		// buckets: their spells open at the expiry, which the next change
		// (the invocation's end at 80 s) accounts.
		m3 := msg(0)
		l.commit(m3, at(60*time.Second))
		l.ended(e, at(80*time.Second))
		l.acked([]outbox.Message{m3}, at(81*time.Second))
		// Bucket 1's message is still pending when the run ends.
		l.finish(at(84 * time.Second))

		if l.maxOrphan.Length != 13*time.Second || l.maxOrphan.Bucket != 1 || !l.maxOrphan.From.Equal(at(71*time.Second)) {
			t.Errorf("longest spell %+v, want 13s on bucket 1 from +71s", l.maxOrphan)
		}
		if want := 500*time.Millisecond + time.Second + 10*time.Second + 13*time.Second; l.orphaned != want {
			t.Errorf("orphaned total %v, want %v", l.orphaned, want)
		}
		if l.pending() != 1 || l.published != 2 || l.committed != 3 {
			t.Errorf("pending %d published %d committed %d", l.pending(), l.published, l.committed)
		}
		if got := l.end.Sub(l.start); got != 84*time.Second {
			t.Errorf("run ended at +%v, want +84s", got)
		}
		l.acked([]outbox.Message{m1}, at(90*time.Second))
		if l.duplicates != 1 || l.published != 2 {
			t.Errorf("a second acknowledgement counted as published: duplicates %d published %d", l.duplicates, l.published)
		}
		if lat := l.latencies(); len(lat) != 2 || lat[0] != time.Second || lat[1] != 21*time.Second {
			t.Errorf("latencies %v, want [1s 21s] (commit to first acknowledgement)", lat)
		}
	})

	t.Run("Percentiles", func(t *testing.T) {
		var d []time.Duration
		for i := 1; i <= 100; i++ {
			d = append(d, time.Duration(i)*time.Millisecond)
		}
		want := Percentiles{P50: 50 * time.Millisecond, P90: 90 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}
		if got := percentiles(d); got != want {
			t.Errorf("percentiles = %+v, want %+v", got, want)
		}
		if got := percentiles(nil); got != (Percentiles{}) {
			t.Errorf("percentiles of nothing = %+v", got)
		}
	})

	t.Run("ConfigMapsOntoTheFunctionSettings", func(t *testing.T) {
		cfg := Config{StopMargin: 3 * time.Second, Relay: outbox.RelayOptions{PollInterval: 250 * time.Millisecond, IdleTimeout: 5 * time.Second, Mode: outbox.ModeHold}}.WithDefaults()
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		fn, err := cfg.functionConfig("t")
		if err != nil {
			t.Fatal(err)
		}
		if fn.PollInterval != 250*time.Millisecond || fn.IdleTimeout != 5*time.Second || fn.StopMargin != 3*time.Second ||
			fn.Mode != outbox.ModeHold || fn.LeaseDuration != outbox.DefaultLeaseDuration || fn.BucketCount != 8 {
			t.Errorf("function config %+v", fn)
		}
		for _, bad := range []Config{
			{Relay: outbox.RelayOptions{MaxConcurrency: 2}},
			{Relay: outbox.RelayOptions{StopMargin: time.Second}},
			{Relay: outbox.RelayOptions{LeaseRenewInterval: time.Minute}},
			{RelayTimeout: time.Minute, StopMargin: time.Minute},
			{ValueSize: -1},
		} {
			if err := bad.WithDefaults().Validate(); !errors.Is(err, outbox.ErrMisconfigured) {
				t.Errorf("%+v: err %v, want a misconfiguration", bad, err)
			}
		}
		if got, want := cfg.StartBound(), 15*time.Millisecond+50*time.Millisecond+250*time.Millisecond+100*time.Millisecond+35*time.Millisecond; got != want {
			t.Errorf("StartBound = %v, want %v", got, want)
		}
	})
}

func testRequestsAreClassifiedByKind(t *testing.T) {
	ddb := outboxtest.NewDynamoDB(t, outboxlocal.InMemory(), outboxlocal.WithoutEnvironment())
	table := outboxtest.CreateTable(t, ddb)
	// No simulated latency: the test calls the stores itself and sleeps
	// between the calls.
	cfg := Config{Latency: Latency{DynamoDB: -1}}.WithDefaults()
	s, err := newSim(t.Context(), cfg, ddb, table)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	before := ddb.Counter.Snapshot()
	type relayStore struct {
		outbox.Store
		hook roundHook
	}
	relay := func(id string) relayStore {
		store, err := outboxddb.NewStore(s.client, outboxddb.StoreOptions{Options: outboxddb.Options{TableName: table, Clock: s.clock}})
		if err != nil {
			t.Fatal(err)
		}
		re := &lab.RelayEnv{RelayID: id}
		st := s.newEnvStore(re, store)
		return relayStore{st, roundHook{s, envOf(re)}}
	}
	req := func(id string) lease.Request {
		return lease.Request{RelayID: id, BucketCount: 8, LeaseDuration: 30 * time.Second}
	}
	a, b := relay("relay-a"), relay("relay-b")
	ctx := t.Context()
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// round runs a relay's round as the relay does, telling the ledger
	// through the relay's hook.
	round := func(r relayStore, id string, st lease.RoundState) lease.Acquisition {
		t.Helper()
		start := s.clock.Now()
		acq, err := lease.AcquireRound(ctx, r, nil, start, req(id), st)
		r.hook.OnRound(id, s.clock.Now().Sub(start), acq, err)
		must(err)
		return acq
	}

	round(a, "relay-a", lease.RoundState{})                          // heartbeat, read, 8 claims
	_, err = lease.Renew(ctx, a, s.clock.Now(), req("relay-a"), all) // 8 renewals, heartbeat
	must(err)
	time.Sleep(10 * time.Second)
	round(a, "relay-a", lease.RoundState{Round: 1}) // heartbeat, read, 8 keeps
	time.Sleep(60 * time.Second)                    // past the warm-up; relay-a's leases lapsed
	if ok, err := lease.Renew(ctx, b, s.clock.Now(), req("relay-b"), []int{0}); err != nil || ok {
		t.Fatalf("renewal of a bucket relay-b never held: %v %v, want refused", ok, err)
	}
	_, err = a.ReleaseLeases(ctx, "relay-a") // stamp, read, 8 releases, read
	must(err)
	time.Sleep(31 * time.Second)
	acq := round(b, "relay-b", lease.RoundState{}) // heartbeat, read, 8 claims, prune relay-a
	_, err = b.ReadCoordination(ctx)
	must(err)

	l := s.ledger
	wantWrites := map[string]int{KindHeartbeat: 4, KindClaim: 16, KindRenew: 9, KindKeep: 8, KindStopped: 1, KindRelease: 8, KindPrune: 1}
	wantReads := map[string]int{KindRoundRead: 3, KindStopRead: 2, KindTrustCheck: 1}
	if !maps.Equal(l.coordWrites, wantWrites) || !maps.Equal(l.coordReads, wantReads) {
		t.Errorf("coordination writes %v, reads %v; want %v, %v", l.coordWrites, l.coordReads, wantWrites, wantReads)
	}
	if l.msgReads != 0 || l.msgWrites != 0 {
		t.Errorf("message requests %d reads, %d writes; want none", l.msgReads, l.msgWrites)
	}
	if !maps.Equal(l.refused, map[string]int{KindRenew: 1}) || len(l.late) != 1 || !l.late[0].At.Equal(s.start.Add(70*time.Second)) {
		t.Errorf("refused %v, late %v; want the renewal at +70s", l.refused, l.late)
	}
	if len(acq.Claimed) != 8 || l.handovers != 8 || l.claims != 16 {
		t.Errorf("relay-b claimed %v; ledger claims %d handovers %d, want 16 and 8", acq.Claimed, l.claims, l.handovers)
	}
	// The same requests, seen by the SDK middleware.
	if got, want := ddb.Counter.Snapshot().Since(before).Requests, map[string]int{"PutItem": 5, "UpdateItem": 41, "Query": 6, "DeleteItem": 1}; !maps.Equal(got, want) {
		t.Errorf("Counter requests %v, want %v", got, want)
	}
}

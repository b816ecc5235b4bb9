package lease

import (
	"slices"
	"time"
)

// Lease-round constants of the table contract.
const (
	// PruneEvery: a run prunes stale heartbeat records on its first full
	// round and on every PruneEvery-th full round after it.
	PruneEvery = 10
	// DeadAfterLeases: a heartbeat record that is not stopped and older
	// than this many lease durations is stale.
	DeadAfterLeases = 10
)

// RoundState is what an acquisition round needs from the relay's earlier
// rounds. The relay keeps it; a store only passes it to the protocol.
type RoundState struct {
	// Round is the number of full rounds (rounds that did not rest) the
	// run completed before this one: 0 on a run's first round.
	Round int
	// Standby is the distant-standby state the previous round returned in
	// Acquisition.Standby; the zero value when the relay is none.
	Standby Standby
	// Settled is what the previous round returned in Acquisition.Settled;
	// the zero value makes the round read the whole partition. Forget it
	// (zero) after an in-flight renewal or a failed round: it remembers
	// the expiries the relay wrote.
	Settled Settled
}

// Standby remembers that a relay is a distant standby: behind one
// first-in-line standby per bucket, so it may skip every other round. Its
// zero value means "not a distant standby".
type Standby struct {
	relayID  string
	since    int64 // ticks of the full round that made it one
	lastCall int64 // ticks of the latest acquisition call
	rank     int
}

// Distant reports whether the relay was a distant standby after the round
// that produced s.
func (s Standby) Distant() bool { return s.relayID != "" }

// RoundStart is what a round decides before it sends anything.
type RoundStart struct {
	// Rest reports a distant standby's round that sends no request at all.
	Rest bool
	// StandbyRank is the remembered standby rank of a resting relay.
	StandbyRank int
	// Standby is the state to return for the next round.
	Standby Standby
}

// StartRound is the rest check, the first step of every round. A distant
// standby rests (sends nothing) while rested + sinceLastCall stays below
// three quarters of the lease duration, measured in ticks since the full
// round that made it one and since its previous call: with the default
// timings (30 s lease, 10 s rounds) every other round, and its heartbeat is
// never older than 20 s, so peers keep counting it. The relay's round
// interval is not an input: the check measures it between calls. A state
// of another relay, or a clock that went back, ends the rest.
func StartRound(now time.Time, req Request, st RoundState) RoundStart {
	sb := st.Standby
	if !sb.Distant() || sb.relayID != req.RelayID {
		return RoundStart{}
	}
	t := Ticks(now)
	rested, sinceLastCall := t-sb.since, t-sb.lastCall
	sb.lastCall = t
	if rested >= 0 && sinceLastCall >= 0 && rested+sinceLastCall < durationTicks(req.LeaseDuration)/4*3 {
		return RoundStart{Rest: true, StandbyRank: sb.rank, Standby: sb}
	}
	return RoundStart{}
}

// Op names a conditional lease write of an acquisition round.
type Op string

// Lease writes; the values are the request kinds of the table contract.
const (
	// OpKeep renews an owned lease: the owner and the expiry read must be
	// unchanged, and the new expiry must not move it backwards.
	OpKeep Op = "keep"
	// OpRelease hands a lease back: the owner and the expiry read must be
	// unchanged; the expiry becomes Now and the owner is removed.
	OpRelease Op = "release"
	// OpClaim takes a free lease: no owner, no expiry, or an expiry at
	// or before Now.
	OpClaim Op = "claim"
	// OpRenew extends an owned lease outside a round (Renew): the owner
	// must be unchanged and the lease must last beyond Now, so a renewal
	// never revives a lapsed lease, and the new expiry must not move it
	// backwards.
	OpRenew Op = "renew"
)

// Write is one conditional lease write, complete: a store sends it as
// it is, with no decision of its own.
type Write struct {
	Bucket int
	// Seen is the stored expiry the round read (keep, release): the
	// expiry acts as the lease's version.
	Seen time.Time
	// Now is the round's now (release, claim).
	Now time.Time
	// Expiry is the new expiry, Now plus the lease duration (keep, claim).
	Expiry time.Time
}

// PruneWrite is the round's prune: one conditional delete per stale
// heartbeat record, removed only if it is still missing, older than
// DeadBefore, or stopped and older than StoppedBefore.
type PruneWrite struct {
	Relays        []string
	DeadBefore    time.Time
	StoppedBefore time.Time
}

// RoundInput is what PlanRound decides from.
type RoundInput struct {
	Request Request
	// Now is the round's one clock reading, taken before the heartbeat.
	Now time.Time
	// Snapshot is the strongly consistent read of the coordination
	// partition that followed the heartbeat.
	Snapshot Coordination
	// HeartbeatRecorded is false when the store refused the heartbeat (a
	// later heartbeat of this relay is stored: its clock went back).
	HeartbeatRecorded bool
	// State is what the relay carried from its earlier rounds.
	State RoundState
}

// RoundPlan is every write of a full round after the heartbeat and the read:
// keeps, releases and claims, sent in that order, and the prune, sent
// beside them. It never grants ownership: the conditional writes do.
type RoundPlan struct {
	Keep    []Write
	Release []Write
	Claim   []Write
	// Unrenewed lists owned buckets whose keep is not sent because the
	// stored expiry (Seen) still lasts KeepAhead: the relay owns them
	// without a write (see Request.RenewInterval).
	Unrenewed []Write
	// Guarded lists owned buckets whose keep is not sent because the stored
	// expiry is later than this round's (the host clock went back): the
	// lease still names the relay, so no peer takes it, but the relay does
	// not publish the bucket until its clock has caught up.
	Guarded []int
	// Withheld lists the claims the plan gave the relay that are not sent
	// because the heartbeat was refused: a lease claimed with a clock that
	// is behind would expire early on the peers' clocks.
	Withheld []int
	// Prune is the round's prune; nil when this round does not prune.
	Prune *PruneWrite
	// StandbyRank is -1 when the relay has a share or owns a lease,
	// otherwise its place in the standby queue.
	StandbyRank int
	// Unmarked lists the heartbeat records without the keep-ahead mark
	// that made the round keep every owned lease (see PlanRound).
	Unmarked []string
	// IgnoredRelays counts heartbeat records that name no relay (sort key
	// exactly RELAY#, an empty id): never counted as active, pruned like
	// any other record once stale.
	IgnoredRelays int
	// Standby is the state to carry to the next round.
	Standby Standby
}

// PlanRound is the lease protocol of one full round, a pure function of its
// input:
//
//  1. classify heartbeat records: active (RelayState.Active, the trust
//     window), stale (stopped more than a lease ago, or silent for
//     DeadAfterLeases lease durations), or neither; a record with an empty
//     id is ignored for activity;
//  2. plan keeps, releases and claims with PlanLeases;
//  3. the keep guard: a keep whose stored expiry is later than this round's
//     expiry is not sent; nor is one whose stored expiry still lasts
//     KeepAhead (the lease stays owned, unrenewed), unless the request
//     keeps every round or a heartbeat record the prune would not remove
//     yet lacks the keep-ahead mark (see unmarkedRelays);
//  4. no claim after a refused heartbeat;
//  5. prune on the run's first full round and every PruneEvery-th;
//  6. a relay whose heartbeat was accepted and whose standby rank is at
//     least the bucket count becomes a distant standby.
//
// Lease items outside [0, BucketCount) are ignored: they are left over from
// a larger count. Errors are misconfigurations from PlanLeases.
func PlanRound(in RoundInput) (RoundPlan, error) {
	req, n := in.Request, in.Request.BucketCount
	if n < 1 {
		return RoundPlan{}, Misconfigured("plan round", "bucket count %d, want >= 1", n)
	}
	now := Ticks(in.Now)
	lease := durationTicks(req.LeaseDuration)
	expiry := now + lease

	active, stale, ignored := classifyRelays(in.Snapshot.Relays, now, lease)
	states := make([]BucketLease, n)
	seen := make([]int64, n)
	for _, l := range in.Snapshot.Leases {
		if l.Bucket < 0 || l.Bucket >= n {
			continue // left over from a larger bucket count
		}
		seen[l.Bucket] = Ticks(l.ExpiresAt)
		states[l.Bucket] = BucketLease{Owner: l.Owner, Expired: seen[l.Bucket] <= now}
	}
	leases, err := PlanLeases(n, active, req.RelayID, states)
	if err != nil {
		return RoundPlan{}, err
	}
	at, until := TimeFromTicks(now), TimeFromTicks(expiry)
	plan := RoundPlan{StandbyRank: leases.StandbyRank, IgnoredRelays: ignored}
	kept := make([]Write, len(leases.Keep))
	for i, b := range leases.Keep {
		kept[i] = Write{Bucket: b, Seen: TimeFromTicks(seen[b])}
	}
	plan.Unmarked = unmarkedRelays(in.Snapshot.Relays, req.RelayID, now, lease)
	plan.Keep, plan.Unrenewed, plan.Guarded = planKeeps(req, now, kept, len(plan.Unmarked) > 0)
	for _, b := range leases.Release {
		plan.Release = append(plan.Release, Write{Bucket: b, Seen: TimeFromTicks(seen[b]), Now: at})
	}
	if in.HeartbeatRecorded {
		for _, b := range leases.Claim {
			plan.Claim = append(plan.Claim, Write{Bucket: b, Now: at, Expiry: until})
		}
	} else {
		plan.Withheld = slices.Clone(leases.Claim)
	}
	if pruneDue(in.State.Round) {
		plan.Prune = &PruneWrite{Relays: stale,
			DeadBefore: TimeFromTicks(now - DeadAfterLeases*lease), StoppedBefore: TimeFromTicks(now - lease)}
	}
	if in.HeartbeatRecorded && leases.StandbyRank >= n {
		plan.Standby = Standby{relayID: req.RelayID, since: now, lastCall: now, rank: leases.StandbyRank}
	}
	return plan, nil
}

// KeepMargin is the least lease a running relay keeps ahead of its own
// clock: every round on schedule finds each owned lease with at least this
// much left, and no publish or delete starts with less (the relay renews
// first). For rounds that leave leases unrenewed (KeepAhead > 0) it is
// LeaseDuration − 2 × interval, at least one interval and at most
// LeaseDuration − interval; for rounds that keep every lease it is
// LeaseDuration − interval. It is also the fleet-wide clock-skew limit: a
// peer whose clock runs ahead by more sees a lease expire while its holder
// still trusts it. 10 s with the default timings. Zero when the interval
// is not set.
func KeepMargin(lease, interval time.Duration) time.Duration {
	if interval <= 0 {
		return 0
	}
	if ahead := KeepAhead(lease, interval); ahead > 0 {
		return min(ahead-interval/2, lease-interval)
	}
	return max(lease-interval, 0)
}

// KeepAhead is how much of an owned lease must be left for a round with
// the given round interval to leave it unrenewed: KeepMargin plus half an
// interval, that is LeaseDuration − 1.5 × interval, and at least one and a
// half intervals. The relay's next round is then due when the lease is
// down to KeepMargin, at least half an interval later, and keeps it; peers see it held as before: they judge by its expiry and by the
// heartbeat, which every round still writes. With the default timings
// (30 s lease, 10 s rounds) that is 15 s: a keep every other round, and at
// least KeepMargin left at every round. Zero (never skip a keep) when the
// interval is not set or the lease is too short for a skipped round to be
// safe.
func KeepAhead(lease, interval time.Duration) time.Duration {
	ahead := max(interval+interval/2, lease-interval-interval/2)
	if interval <= 0 || ahead >= lease {
		return 0
	}
	return ahead
}

// planKeeps splits the keeps of owned leases (Seen: the stored expiry) at
// now into those to send with the round's expiry, those left unrenewed
// (see KeepAhead; none when the request does not keep ahead or everyRound)
// and those held back because the stored expiry is later than the round's
// (the host clock went back).
//
// Leases claimed together would otherwise all be kept in the same rounds,
// and a fleet started together would send every keep in every other
// round: the busiest second would stay as busy as with a keep every
// round. So a lease the next round would have to keep is kept one round
// early on alternate round slots of the bucket's parity: after a round or
// two, half of a relay's leases are kept in each round.
func planKeeps(req Request, now int64, owned []Write, everyRound bool) (keep, unrenewed []Write, guarded []int) {
	expiry := now + durationTicks(req.LeaseDuration)
	var ahead int64
	if req.KeepsAhead() && !everyRound {
		ahead = durationTicks(KeepAhead(req.LeaseDuration, req.RenewInterval))
	}
	interval := durationTicks(req.RenewInterval)
	for _, w := range owned {
		seen := Ticks(w.Seen)
		early := seen-now < ahead+interval && (int64(w.Bucket)+now/max(interval, 1))%2 == 0
		switch {
		case seen > expiry:
			guarded = append(guarded, w.Bucket)
		case ahead > 0 && seen-now >= ahead && !early:
			unrenewed = append(unrenewed, Write{Bucket: w.Bucket, Seen: w.Seen})
		default:
			keep = append(keep, Write{Bucket: w.Bucket, Seen: w.Seen, Expiry: TimeFromTicks(expiry)})
		}
	}
	return keep, unrenewed, guarded
}

// unmarkedRelays returns the ids of the heartbeat records of relays other
// than relayID without the keep-ahead mark that the prune would not remove
// yet: relays that are active, stopped less than a lease ago, or silent
// for fewer than DeadAfterLeases leases. Such a relay (another language's, or a Spillway
// relay that keeps every round) renews every lease every round and is
// promised the larger skew limit of such relays (KeepMargin with every
// round kept); a lease left unrenewed can have as little as the
// keep-ahead KeepMargin left, which it could see expired while its holder
// still trusts it. Counting recent stopped and silent records too
// keeps a fleet whose other-language relays come and go (a restart, a
// deployment) from leaving leases unrenewed between their runs. Records
// with an empty id are skipped.
func unmarkedRelays(relays []RelayState, relayID string, now, lease int64) []string {
	var out []string
	for _, r := range relays {
		seen := Ticks(r.LastSeen)
		stale := r.Stopped && seen < now-lease || !r.Stopped && seen < now-DeadAfterLeases*lease
		if r.RelayID != "" && r.RelayID != relayID && !r.KeepsAhead && !stale {
			out = append(out, r.RelayID)
		}
	}
	return out
}

// classifyRelays splits heartbeat records into the active relays (counted
// towards fair share, RelayState.Active: it stops counting on the very tick
// its leases, written in the same round, expire) and the stale ones (to
// prune).
// A record with an empty id names no relay: it is never active, only
// counted, and pruned by the same age rules.
func classifyRelays(relays []RelayState, now, lease int64) (active, stale []string, ignored int) {
	at, window := TimeFromTicks(now), time.Duration(lease)*100
	for _, r := range relays {
		seen := Ticks(r.LastSeen)
		if r.RelayID == "" {
			ignored++
		}
		switch {
		case r.Active(at, window):
			if r.RelayID != "" {
				active = append(active, r.RelayID)
			}
		case r.Stopped && seen < now-lease:
			stale = append(stale, r.RelayID)
		case !r.Stopped && seen < now-DeadAfterLeases*lease:
			stale = append(stale, r.RelayID)
		}
	}
	return active, stale, ignored
}

// durationTicks converts a duration to ticks (100 ns), truncating.
func durationTicks(d time.Duration) int64 { return int64(d / 100) }

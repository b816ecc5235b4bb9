package lease

import "time"

// Request identifies the relay and the lease terms for every lease call.
type Request struct {
	// RelayID is the relay's identity: printable ASCII, at most 128 bytes.
	RelayID string
	// BucketCount must equal the store's bucket count; a difference is a
	// misconfiguration.
	BucketCount int
	// LeaseDuration is how long a claimed or renewed lease lasts.
	LeaseDuration time.Duration
	// RenewInterval is the relay's round interval (the relay passes
	// outbox.RelayOptions.LeaseRenewInterval). When set, a round does not renew an
	// owned lease that still lasts at least KeepAhead(LeaseDuration,
	// RenewInterval): with the default timings it renews every other
	// round, which halves the coordination partition's writes. Zero, the
	// table contract's plain round, renews every owned lease every round.
	// A round also keeps every lease while a relay without the keep-ahead
	// mark is around (RelayState.KeepsAhead).
	RenewInterval time.Duration
	// KeepEveryRound makes every round keep every owned lease and the
	// heartbeat carry no keep-ahead mark, as relays of other languages do
	// (outbox.RelayOptions.KeepEveryRound).
	KeepEveryRound bool
}

// KeepsAhead reports whether rounds of r may leave leases unrenewed
// (KeepAhead) and its heartbeats carry the keep-ahead mark.
func (r Request) KeepsAhead() bool {
	return !r.KeepEveryRound && KeepAhead(r.LeaseDuration, r.RenewInterval) > 0
}

// Acquisition is the outcome of one acquisition round.
type Acquisition struct {
	// Owned lists the buckets the relay holds after the round, ascending.
	Owned []int
	// Claimed lists the buckets newly claimed in this round, ascending.
	Claimed []int
	// Released lists the buckets handed back in this round, ascending.
	Released []int
	// Lost lists buckets the relay held (or tried to keep) whose keep was
	// refused, ascending.
	Lost []int
	// Unrenewed lists the owned buckets whose lease the round left as it
	// was (see Request.RenewInterval), ascending.
	Unrenewed []int
	// UnrenewedExpiry is the earliest stored expiry of the Unrenewed
	// leases; zero when the round renewed or claimed every owned lease. A
	// relay trusts its owned set until the earlier of this and its round's
	// start plus the lease duration.
	UnrenewedExpiry time.Time
	// Refused counts the conditional writes the store refused in the round.
	Refused int
	// HeartbeatRefused reports that the heartbeat was refused (clock behind a
	// stored heartbeat); the round claimed nothing.
	HeartbeatRefused bool
	// StandbyRank is -1 when the relay has a share, otherwise its place in
	// the standby queue.
	StandbyRank int
	// Rested reports a distant standby's round that sent no request.
	Rested bool
	// IgnoredRelays counts heartbeat records with an empty relay id that
	// the round skipped (a warning is logged; the prune removes them once
	// stale).
	IgnoredRelays int
	// Standby is the distant-standby state to pass to the next round in
	// RoundState.
	Standby Standby
	// Settled is the settled-fleet state to pass to the next round in
	// RoundState; the zero value when the fleet is not settled.
	Settled Settled
	// Quiet reports a round that read only the heartbeat records.
	Quiet bool
}

// Release is the outcome of a graceful release.
type Release struct {
	// Released lists the buckets whose lease this call freed, ascending.
	Released []int
	// Refused counts release writes a peer's takeover refused.
	Refused int
	// Unfinished reports that leases still named the relay after every pass;
	// they lapse after the lease duration.
	Unfinished bool
}

// State is one bucket's lease as read from the coordination partition.
type State struct {
	Bucket int
	// Owner is the holding relay; empty when the bucket is free.
	Owner string
	// ExpiresAt is the lease expiry; zero when never set.
	ExpiresAt time.Time
}

// Expired reports whether the lease is free for others at now.
func (l State) Expired(now time.Time) bool { return !l.ExpiresAt.After(now) }

// RelayState is one relay's heartbeat record.
type RelayState struct {
	RelayID  string
	LastSeen time.Time
	// Stopped reports a record stamped by a graceful stop.
	Stopped bool
	// KeepsAhead reports the keep-ahead mark, an attribute only Spillway
	// relays whose rounds leave leases unrenewed write (other relays ignore
	// attributes they do not know). A record without it is a relay that
	// keeps every lease every round and is promised a clock skew of up to
	// LeaseDuration − LeaseRenewInterval: while one is around, rounds keep
	// every lease (see PlanRound).
	KeepsAhead bool
}

// Coordination is one consistent view of the leases and heartbeats.
type Coordination struct {
	// ReadAt is the store clock's now when the view was read.
	ReadAt time.Time
	// Leases holds the lease items of buckets below the bucket count,
	// ascending by bucket; buckets never claimed are absent.
	Leases []State
	// Relays holds every heartbeat record, ascending by id.
	Relays []RelayState
}

// OwnerViewTTL is how long a writer may trust a view of the coordination
// partition that shows a live relay holding a bucket, and skip the wake-up
// for a commit to it: a stopping relay watches the buckets it released for
// this long after the release and wakes a relay for what was committed
// meanwhile, so no commit whose wake-up was skipped waits for the
// schedule. Writers and relays share it as a protocol constant.
const OwnerViewTTL = time.Second

// HeldUntil returns, for each bucket a live relay holds in the view, until
// when it stays held at the latest: the lease's expiry, or the end of the
// holder's heartbeat window (liveUntil) if that comes first. A holder
// counts as live by the trust window's rule (RelayState.Active). Free,
// expired and stopped or silent holders' buckets are absent.
func (c Coordination) HeldUntil(now time.Time, leaseDuration time.Duration) map[int]time.Time {
	live := map[string]time.Time{}
	for _, rs := range c.Relays {
		if rs.Active(now, leaseDuration) {
			live[rs.RelayID] = liveUntil(rs.LastSeen, leaseDuration)
		}
	}
	held := map[int]time.Time{}
	for _, l := range c.Leases {
		until, ok := live[l.Owner]
		if l.Owner == "" || !ok || l.Expired(now) {
			continue
		}
		held[l.Bucket] = minTime(l.ExpiresAt, until)
	}
	return held
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

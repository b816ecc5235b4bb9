package outboxtest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/generation"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// contractParkLease: a park carries the bucket's lease into the table. It
// applies while the lease names the owner and lasts beyond the given
// moment; otherwise it is ErrLeaseLost, not a conflict, and the row stays.
func contractParkLease(t *testing.T, c *contract) {
	q := c.quarantine()
	msgs := c.enqueue(2, "k1", "k2")
	c.acquire("relay-a", lease.RoundState{})
	expiry := c.clock.Now().Add(contractLease.LeaseDuration)
	park := func(m outbox.Message, owner string, beyond time.Time) error {
		return q.Park(t.Context(), outbox.Parking{Bucket: 2, Sequence: m.Sequence(), Reason: outbox.ParkMaxAttempts,
			Lease: outbox.LeaseCheck{Owner: owner, Beyond: beyond}})
	}
	lost := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, outbox.ErrLeaseLost) || errors.Is(err, outbox.ErrParkConflict) {
			t.Fatalf("%s: %v; want ErrLeaseLost alone", what, err)
		}
		if got := c.fetch(2, 10); keys(got) != "k1 k2" {
			t.Fatalf("%s moved a row: bucket holds %s; want k1 k2", what, keys(got))
		}
	}
	lost("a park needing the lease until its expiry", park(msgs[0], "relay-a", expiry))
	lost("a park carrying another relay's lease", park(msgs[0], "relay-b", c.clock.Now()))
	if err := park(msgs[0], "relay-a", expiry.Add(-time.Millisecond)); err != nil {
		t.Fatalf("a park within the lease: %v", err)
	}
	if got := c.fetch(2, 10); keys(got) != "k2" {
		t.Fatalf("bucket after the park: %s; want k2", keys(got))
	}
	c.clock.Set(expiry)
	if acq := c.acquire("relay-b", lease.RoundState{}); !slices.Contains(acq.Claimed, 2) {
		t.Fatalf("relay-b at relay-a's expiry: %+v; want bucket 2 claimed", acq)
	}
	if err := park(msgs[1], "relay-a", c.clock.Now()); !errors.Is(err, outbox.ErrLeaseLost) {
		t.Fatalf("a park under a lease that passed to relay-b: %v; want ErrLeaseLost", err)
	}
	if got := c.fetch(2, 10); keys(got) != "k2" {
		t.Fatalf("bucket after the refused park: %s; want k2", keys(got))
	}
}

// contractGaps: numbers a writer reserved and never committed leave gaps a
// fetch reads across, in order. The store's own writer says which numbers
// each transaction wrote, so a fetch of its messages needs no probe of the
// gaps: one Query per page, however many gaps.
func contractGaps(t *testing.T, c *contract) {
	if c.Abandon == nil {
		t.Skip("the store cannot leave a gap")
	}
	abandon := func(bucket, n int) {
		t.Helper()
		for range n {
			if err := c.Abandon(t.Context(), c.message(bucket, "abandoned")); err != nil {
				t.Fatalf("abandon a reservation in bucket %d: %v", bucket, err)
			}
		}
	}
	queries := func(f func()) int {
		if c.Requests == nil {
			f()
			return -1
		}
		before := c.Requests()["Query"]
		f()
		return c.Requests()["Query"] - before
	}
	c.enqueue(1, "k1")
	abandon(1, 1)
	c.enqueue(1, "k2")
	abandon(1, 2)
	c.enqueue(1, "k3")
	var got []outbox.Message
	n := queries(func() { got = c.fetch(1, 10) })
	if keys(got) != "k1 k2 k3" || got[1].Sequence()-got[0].Sequence() != 2 || got[2].Sequence()-got[1].Sequence() != 3 {
		t.Fatalf("fetch across two gaps: %s at %v; want k1 k2 k3 one and two numbers apart", keys(got), sequences(got))
	}
	if n >= 0 && n != 1 {
		t.Fatalf("fetch across two gaps sent %d queries; want 1 (the read)", n)
	}
	if err := c.Store.MarkPublished(t.Context(), 1, got); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		abandon(1, 1)
		c.enqueue(1, string(rune('a'+i)))
	}
	n = queries(func() { got = c.fetch(1, 100) })
	if keys(got) != "a b c d e f g h i j" {
		t.Fatalf("fetch across ten gaps: %s; want a to j", keys(got))
	}
	if n >= 0 && n != 1 {
		t.Fatalf("fetch across ten gaps sent %d queries; want 1 (the read)", n)
	}
}

// contractBatchCut: a batch of fewer than max messages without an error
// leaves nothing of the bucket to fetch now; one the store ends earlier
// (before a transaction its limit would split, say) comes with
// outbox.ErrBatchCut and at least one message, and the next fetch goes on
// from it. The relay fetches again at once only after a full or cut batch.
func contractBatchCut(t *testing.T, c *contract) {
	const limit = 4
	want := append(c.enqueue(1, "a", "a"), c.enqueue(1, "b", "b", "b")...)
	var got []outbox.Message
	for range len(want) + 1 {
		msgs, err := c.Store.FetchBatch(t.Context(), 1, limit)
		cut := errors.Is(err, outbox.ErrBatchCut)
		switch {
		case err != nil && !cut:
			t.Fatalf("fetch after %s: %v", keys(got), err)
		case cut && (len(msgs) == 0 || len(msgs) >= limit):
			t.Fatalf("fetch after %s: %d messages with ErrBatchCut; want 1 to %d", keys(got), len(msgs), limit-1)
		case len(msgs) == 0:
			if keys(got) != keys(want) || !slices.Equal(sequences(got), sequences(want)) {
				t.Fatalf("fetched %s at %v; want %s at %v", keys(got), sequences(got), keys(want), sequences(want))
			}
			return
		}
		if err := c.Store.MarkPublished(t.Context(), 1, msgs); err != nil {
			t.Fatal(err)
		}
		got = append(got, msgs...)
		if len(msgs) == limit || cut {
			continue
		}
		if left := c.fetch(1, limit); len(left) > 0 {
			t.Fatalf("a batch of %d under the limit %d without ErrBatchCut, then %s fetched: the relay would wait for it", len(msgs), limit, keys(left))
		}
	}
	t.Fatalf("fetches never ended: %s", keys(got))
}

func sequences(msgs []outbox.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Sequence()
	}
	return out
}

// contractLeaseWrites: each conditional lease write alone. A claim is
// refused while another relay's lease lasts; a keep or a release is
// refused when the stored expiry (the lease's version) is not the one the
// round read or the lease names another relay, and a keep never moves the
// expiry backwards. A lease lapses at its expiry.
func contractLeaseWrites(t *testing.T, c *contract) {
	io := c.Store
	c.acquire("relay-a", lease.RoundState{})
	expiry := c.clock.Now().Add(contractLease.LeaseDuration)
	c.clock.Add(time.Second)
	now := c.clock.Now()
	write := func(what, relayID string, op lease.Op, w lease.Write, accepted bool) {
		t.Helper()
		acc, ref, err := io.WriteLeases(t.Context(), relayID, op, []lease.Write{w})
		if err != nil || slices.Equal(acc, []int{w.Bucket}) != accepted || slices.Equal(ref, []int{w.Bucket}) == accepted {
			t.Fatalf("%s: accepted %v, refused %v, %v; want accepted %v", what, acc, ref, err, accepted)
		}
	}
	write("relay-b claims a bucket relay-a holds", "relay-b", lease.OpClaim, lease.Write{Bucket: 0, Now: now, Expiry: now.Add(contractLease.LeaseDuration)}, false)
	write("relay-a keeps with an expiry it did not read", "relay-a", lease.OpKeep, lease.Write{Bucket: 1, Seen: expiry.Add(-time.Second), Expiry: now.Add(contractLease.LeaseDuration)}, false)
	write("relay-b keeps relay-a's lease", "relay-b", lease.OpKeep, lease.Write{Bucket: 1, Seen: expiry, Expiry: now.Add(contractLease.LeaseDuration)}, false)
	write("relay-a keeps backwards", "relay-a", lease.OpKeep, lease.Write{Bucket: 1, Seen: expiry, Expiry: expiry.Add(-time.Second)}, false)
	write("relay-a keeps", "relay-a", lease.OpKeep, lease.Write{Bucket: 1, Seen: expiry, Expiry: now.Add(contractLease.LeaseDuration)}, true)
	write("relay-a releases with an expiry it did not read", "relay-a", lease.OpRelease, lease.Write{Bucket: 2, Seen: now, Now: now}, false)
	write("relay-b releases relay-a's lease", "relay-b", lease.OpRelease, lease.Write{Bucket: 2, Seen: expiry, Now: now}, false)
	write("relay-a releases", "relay-a", lease.OpRelease, lease.Write{Bucket: 2, Seen: expiry, Now: now}, true)
	write("relay-b claims the released bucket", "relay-b", lease.OpClaim, lease.Write{Bucket: 2, Now: now, Expiry: now.Add(contractLease.LeaseDuration)}, true)
	if owners := c.owners(); !slices.Equal(owners, []string{"relay-a", "relay-a", "relay-b", "relay-a"}) {
		t.Fatalf("owners %v; want relay-b on bucket 2 alone", owners)
	}
	for _, l := range c.coordination().Leases {
		want := expiry
		if l.Bucket == 1 || l.Bucket == 2 {
			want = now.Add(contractLease.LeaseDuration)
		}
		if !l.ExpiresAt.Equal(want) {
			t.Fatalf("lease %+v; want expiry %v", l, want)
		}
	}
	// At its expiry a lease has lapsed: claims of several buckets at once
	// are split in the order given.
	c.clock.Set(expiry)
	now = expiry
	w := func(b int) lease.Write {
		return lease.Write{Bucket: b, Now: now, Expiry: now.Add(contractLease.LeaseDuration)}
	}
	acc, ref, err := io.WriteLeases(t.Context(), "relay-c", lease.OpClaim, []lease.Write{w(3), w(2), w(0), w(1)})
	if err != nil || !slices.Equal(acc, []int{3, 0}) || !slices.Equal(ref, []int{2, 1}) {
		t.Fatalf("relay-c claims 3 2 0 1 at relay-a's first expiry: accepted %v, refused %v, %v; want 3 0 accepted, 2 1 refused", acc, ref, err)
	}
}

// contractGenerations: the marker of a generation being replaced moves
// open → sealed → drained, one conditional write each; a repeated move is
// answered with the marker as stored, a skipped one is generation.ErrPhase.
// The contents name the buckets still holding messages.
func contractGenerations(t *testing.T, c *contract) {
	g, ok := c.Store.(generation.Store)
	if !ok {
		t.Skip("the store keeps no generation marker")
	}
	m, err := g.ReadGeneration(t.Context())
	if err != nil || m.Exists {
		t.Fatalf("marker of a new table: %+v, %v; want none", m, err)
	}
	succ := generation.Generation{KeyPrefix: "NEXT", BucketCount: 2 * contractLease.BucketCount}
	other := generation.Generation{KeyPrefix: "OTHER", BucketCount: 1}
	check := func(what string, m generation.Marker, err error, phase generation.Phase) {
		t.Helper()
		if err != nil || !m.Exists || m.Phase != phase || m.Successor != succ || m.Generation.BucketCount != contractLease.BucketCount {
			t.Fatalf("%s: %+v, %v; want %s, succeeded by %v, of %d buckets", what, m, err, phase, succ, contractLease.BucketCount)
		}
	}
	m, err = g.OpenGeneration(t.Context(), succ)
	check("open", m, err, generation.PhaseOpen)
	if !m.OpenedAt.Equal(c.clock.Now()) {
		t.Fatalf("opened at %v; want the store clock's %v", m.OpenedAt, c.clock.Now())
	}
	m, err = g.OpenGeneration(t.Context(), other)
	check("a second open naming another successor", m, err, generation.PhaseOpen)
	if _, err := g.FinishGeneration(t.Context(), succ); !errors.Is(err, generation.ErrPhase) {
		t.Fatalf("drain an open generation: %v; want generation.ErrPhase", err)
	}
	c.clock.Add(time.Second)
	m, err = g.SealGeneration(t.Context(), succ)
	check("seal", m, err, generation.PhaseSealed)
	m, err = g.SealGeneration(t.Context(), succ)
	check("seal again", m, err, generation.PhaseSealed)
	contents, err := g.GenerationContents(t.Context())
	if err != nil || !contents.Empty() {
		t.Fatalf("contents of an empty generation: %+v, %v; want checked and empty", contents, err)
	}
	parked := c.enqueue(3, "k1")[0]
	c.enqueue(1, "k2")
	contents, err = g.GenerationContents(t.Context())
	if err != nil || !contents.Checked || !slices.Equal(contents.Messages, []int{1, 3}) || len(contents.Parked) != 0 {
		t.Fatalf("contents with messages in buckets 1 and 3: %+v, %v", contents, err)
	}
	if q, ok := c.Store.(outbox.Quarantine); ok {
		if err := q.Park(t.Context(), outbox.Parking{Bucket: 3, Sequence: parked.Sequence(), Reason: outbox.ParkMaxAttempts}); err != nil {
			t.Fatal(err)
		}
		contents, err = g.GenerationContents(t.Context())
		if err != nil || !slices.Equal(contents.Messages, []int{1}) || !slices.Equal(contents.Parked, []int{3}) {
			t.Fatalf("contents with bucket 3's message parked: %+v, %v", contents, err)
		}
	}
	m, err = g.FinishGeneration(t.Context(), succ)
	check("drain", m, err, generation.PhaseDrained)
	m, err = g.FinishGeneration(t.Context(), succ)
	check("drain again", m, err, generation.PhaseDrained)
	m, err = g.ReadGeneration(t.Context())
	check("read after the drain", m, err, generation.PhaseDrained)
}

package outboxtest

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// StepClock is an outbox.Clock that stays put until it is moved: the store
// contract's clock, and one for tests of code that holds a Clock.
type StepClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewStepClock returns a clock reading t.
func NewStepClock(t time.Time) *StepClock { return &StepClock{now: t} }

// Now implements outbox.Clock.
func (c *StepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t, backwards too.
func (c *StepClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Add moves the clock by d.
func (c *StepClock) Add(d time.Duration) { c.Set(c.Now().Add(d)) }

// StoreUnderTest is one store the contract suite checks, and the writer
// that fills it.
type StoreUnderTest struct {
	// Store reads the clock the suite passed to NewStore.
	Store outbox.Store
	// Enqueue commits msgs in one transaction and returns them as stored
	// (sequence numbers and CreatedAt set).
	Enqueue func(ctx context.Context, msgs ...outbox.Message) ([]outbox.Message, error)
	// Requests, when set, returns the DynamoDB requests sent so far by
	// operation name (outboxlocal.Counter); the suite then pins the requests
	// of a lease round and of a relayed batch, which the cost model counts.
	Requests func() map[string]int
	// MarkReplay, when set, is the operator's replay request: it marks the
	// bucket's parked messages seqs for replay and raises the bucket's
	// replay request. The suite then checks the store's outbox.Quarantine.
	MarkReplay func(ctx context.Context, bucket int, seqs []int64) error
	// Abandon, when set, takes the next sequence number of m's bucket and
	// stores nothing under it (a writer whose transaction failed after its
	// reservation). The suite then checks fetches across gaps.
	Abandon func(ctx context.Context, m outbox.Message) error
}

// NewStore builds an empty store of bucketCount buckets on clock for one
// case of the suite; the case's t owns its cleanup.
type NewStore func(t *testing.T, clock outbox.Clock, bucketCount int) StoreUnderTest

// contractStart is the suite's clock at the start of every case.
var contractStart = time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC)

// quiet discards the lease protocol's logs.
var quiet = slog.New(slog.DiscardHandler)

// nopPublisher is the publisher of a relay the suite builds but never runs.
type nopPublisher struct{}

func (nopPublisher) Init(context.Context) error { return nil }

func (nopPublisher) Publish(_ context.Context, msgs []outbox.Message) (int, error) {
	return len(msgs), nil
}

// contractLease is the suite's lease: the defaults, and the table
// contract's plain round (every owned lease kept every round).
var contractLease = lease.Request{BucketCount: 4, LeaseDuration: outbox.DefaultLeaseDuration}

// RunStoreTests runs the contract every outbox.Store keeps — the store
// outboxddb gives on DynamoDB (the embedded server or DynamoDB Local) and
// the in-memory one of outboxmem — as subtests of t: the lease protocol
// run over the store's primitives as a relay runs it (lease.AcquireRound,
// lease.Renew: claims, keeps, shares, refusals and their causes, renewals,
// releases, the prune), each conditional lease write alone, the messages
// (fetch in order, pending probes, deletes, backlog, a batch cut short
// with messages behind it), the typed errors, and, where the store offers
// them, the requests the cost model counts (StoreUnderTest.Requests), the
// quarantine's parks (with the lease they carry), replay marks and
// requests (StoreUnderTest.MarkReplay), fetches across gaps
// (StoreUnderTest.Abandon) and the generation marker (a store that is a
// generation.Store). Each case builds its own store with newStore,
// on a StepClock it moves itself.
func RunStoreTests(t *testing.T, newStore NewStore) {
	cases := []struct {
		name string
		run  func(t *testing.T, c *contract)
	}{
		{"LoneRelayClaimsEveryBucket", contractLoneRelay},
		{"TwoRelaysShareTheBuckets", contractShare},
		{"KeepMovesTheExpiryForward", contractKeep},
		{"ClockSetBack_HeartbeatRefused_ClaimsNothing", contractClockBack},
		{"ExpiredLeasesAreClaimedByAnother_AndTheirRenewalRefused", contractTakeover},
		{"RenewLeases", contractRenew},
		{"ReleaseFreesEveryLease_AndStampsTheRelayStopped", contractRelease},
		{"PruneRemovesAStoppedRelayAfterOneLease", contractPrune},
		{"BucketCount_ARelayOfAnotherIsRefused_AnInvalidMessage", contractMisconfigured},
		{"FetchInOrder_DeleteAPrefix_Backlog", contractMessages},
		{"EmptyStore", contractEmpty},
		{"RequestsOfARoundAndABatch", contractRequests},
		{"ParkMovesTheRow_AndQuarantinesItsKey", contractPark},
		{"ReplayMarks_Requests_Deletes_Refusals", contractReplay},
		{"ParkCarriesTheLease_RefusedAsLeaseLost", contractParkLease},
		{"FetchReadsAcrossGaps_WithoutAProbePerGap", contractGaps},
		{"ABatchEndedShort_IsCutOnlyWithMessagesBehindIt", contractBatchCut},
		{"LeaseWrites_RefusedClaimsKeepsAndReleases", contractLeaseWrites},
		{"GenerationMarker_OpenSealDrain", contractGenerations},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := NewStepClock(contractStart)
			sut := newStore(t, clock, contractLease.BucketCount)
			tc.run(t, &contract{t: t, clock: clock, StoreUnderTest: sut})
		})
	}
}

// contract is one case's store and clock.
type contract struct {
	StoreUnderTest
	t     *testing.T
	clock *StepClock
}

func (c *contract) acquire(relayID string, st lease.RoundState) lease.Acquisition {
	c.t.Helper()
	req := contractLease
	req.RelayID = relayID
	acq, err := lease.AcquireRound(c.t.Context(), c.Store, quiet, c.clock.Now(), req, st)
	if err != nil {
		c.t.Fatalf("acquire leases for %s: %v", relayID, err)
	}
	return acq
}

func (c *contract) coordination() lease.Coordination {
	c.t.Helper()
	coord, err := c.Store.ReadCoordination(c.t.Context())
	if err != nil {
		c.t.Fatal(err)
	}
	return coord
}

// owners returns each bucket's owner in the coordination view, "" for a
// free or never claimed bucket.
func (c *contract) owners() []string {
	c.t.Helper()
	out := make([]string, contractLease.BucketCount)
	for _, l := range c.coordination().Leases {
		out[l.Bucket] = l.Owner
	}
	return out
}

func (c *contract) relay(id string) (lease.RelayState, bool) {
	c.t.Helper()
	for _, r := range c.coordination().Relays {
		if r.RelayID == id {
			return r, true
		}
	}
	return lease.RelayState{}, false
}

func (c *contract) enqueue(bucket int, keys ...string) []outbox.Message {
	c.t.Helper()
	msgs := make([]outbox.Message, len(keys))
	for i, k := range keys {
		msgs[i] = c.message(bucket, k)
	}
	stored, err := c.Enqueue(c.t.Context(), msgs...)
	if err != nil {
		c.t.Fatalf("enqueue into bucket %d: %v", bucket, err)
	}
	for _, m := range stored {
		if m.Bucket() != bucket {
			c.t.Fatalf("enqueue into bucket %d stored %s in bucket %d", bucket, m.ID, m.Bucket())
		}
	}
	return stored
}

// message builds a message of key k for bucket: the one place the suite
// builds one.
func (c *contract) message(bucket int, k string) outbox.Message {
	c.t.Helper()
	// An explicit partition chooses the bucket (partition mod count).
	partition := int32(bucket)
	m, err := outbox.NewMessage("orders", []byte(k), []byte("value-"+k), outbox.MessageOptions{
		Partition: &partition, CreatedAt: c.clock.Now()})
	if err != nil {
		c.t.Fatalf("message for bucket %d: %+v, %v", bucket, m, err)
	}
	return m
}

func (c *contract) fetch(bucket, limit int) []outbox.Message {
	c.t.Helper()
	msgs, err := c.Store.FetchBatch(c.t.Context(), bucket, limit)
	if err != nil {
		c.t.Fatalf("fetch bucket %d: %v", bucket, err)
	}
	return msgs
}

func allBuckets() []int {
	out := make([]int, contractLease.BucketCount)
	for b := range out {
		out[b] = b
	}
	return out
}

func contractLoneRelay(t *testing.T, c *contract) {
	acq := c.acquire("relay-a", lease.RoundState{})
	if !slices.Equal(acq.Owned, allBuckets()) || !slices.Equal(acq.Claimed, allBuckets()) || acq.Refused != 0 || acq.StandbyRank != -1 {
		t.Fatalf("lone relay's first round: %+v; want every bucket claimed and owned, nothing refused", acq)
	}
	coord := c.coordination()
	wantExpiry := contractStart.Add(contractLease.LeaseDuration)
	if len(coord.Leases) != contractLease.BucketCount {
		t.Fatalf("leases %+v, want one per bucket", coord.Leases)
	}
	for _, l := range coord.Leases {
		if l.Owner != "relay-a" || !l.ExpiresAt.Equal(wantExpiry) {
			t.Fatalf("lease %+v, want relay-a's until %v", l, wantExpiry)
		}
	}
	if r, ok := c.relay("relay-a"); !ok || !r.LastSeen.Equal(contractStart) || r.Stopped {
		t.Fatalf("heartbeat %+v (found %v), want relay-a seen at %v, not stopped", r, ok, contractStart)
	}
}

func contractShare(t *testing.T, c *contract) {
	a := c.acquire("relay-a", lease.RoundState{})
	c.clock.Add(time.Second)
	b := c.acquire("relay-b", lease.RoundState{})
	if len(b.Claimed) != 0 || b.Refused != 0 {
		t.Fatalf("a newcomer's first round while a live peer holds everything: %+v; want no claim, no refusal", b)
	}
	for round := 1; round <= 3; round++ {
		c.clock.Add(time.Second)
		a = c.acquire("relay-a", lease.RoundState{Round: round})
		c.clock.Add(time.Second)
		b = c.acquire("relay-b", lease.RoundState{Round: round})
	}
	half := contractLease.BucketCount / 2
	if len(a.Owned) != half || len(b.Owned) != half {
		t.Fatalf("after three rounds each: relay-a owns %v, relay-b %v; want %d each", a.Owned, b.Owned, half)
	}
	owners := c.owners()
	for _, bucket := range a.Owned {
		if owners[bucket] != "relay-a" {
			t.Fatalf("owners %v, relay-a reports %v", owners, a.Owned)
		}
	}
	for _, bucket := range b.Owned {
		if owners[bucket] != "relay-b" {
			t.Fatalf("owners %v, relay-b reports %v", owners, b.Owned)
		}
	}
}

func contractKeep(t *testing.T, c *contract) {
	c.acquire("relay-a", lease.RoundState{})
	c.clock.Add(10 * time.Second)
	acq := c.acquire("relay-a", lease.RoundState{Round: 1})
	if !slices.Equal(acq.Owned, allBuckets()) || len(acq.Claimed) != 0 || len(acq.Unrenewed) != 0 || acq.Refused != 0 {
		t.Fatalf("second round of a lone relay: %+v; want every bucket kept", acq)
	}
	want := c.clock.Now().Add(contractLease.LeaseDuration)
	for _, l := range c.coordination().Leases {
		if !l.ExpiresAt.Equal(want) {
			t.Fatalf("lease %+v after a keep, want expiry %v", l, want)
		}
	}
}

func contractClockBack(t *testing.T, c *contract) {
	c.clock.Add(time.Minute)
	c.acquire("relay-a", lease.RoundState{})
	c.acquire("relay-b", lease.RoundState{})
	c.clock.Set(contractStart)
	acq := c.acquire("relay-a", lease.RoundState{Round: 1})
	if !acq.HeartbeatRefused || len(acq.Claimed) != 0 || acq.Refused < 1 {
		t.Fatalf("round with the clock set back a minute: %+v; want the heartbeat refused, counted, and no claim", acq)
	}
	if r, _ := c.relay("relay-a"); !r.LastSeen.Equal(contractStart.Add(time.Minute)) {
		t.Fatalf("heartbeat %+v, want the later one kept", r)
	}
}

func contractTakeover(t *testing.T, c *contract) {
	c.acquire("relay-a", lease.RoundState{})
	c.clock.Add(contractLease.LeaseDuration + time.Second)
	acq := c.acquire("relay-b", lease.RoundState{})
	if !slices.Equal(acq.Claimed, allBuckets()) {
		t.Fatalf("relay-b after relay-a's leases lapsed: %+v; want every bucket claimed", acq)
	}
	req := contractLease
	req.RelayID = "relay-a"
	renewed, err := lease.Renew(t.Context(), c.Store, c.clock.Now(), req, allBuckets())
	if err != nil || renewed {
		t.Fatalf("relay-a renews buckets relay-b took: %v, %v; want false", renewed, err)
	}
	if owners := c.owners(); slices.ContainsFunc(owners, func(o string) bool { return o != "relay-b" }) {
		t.Fatalf("owners %v after a refused renewal, want relay-b's", owners)
	}
}

func contractRenew(t *testing.T, c *contract) {
	req := contractLease
	req.RelayID = "relay-a"
	if ok, err := lease.Renew(t.Context(), c.Store, c.clock.Now(), req, nil); !ok || err != nil {
		t.Fatalf("renewing nothing: %v, %v; want true", ok, err)
	}
	c.acquire("relay-a", lease.RoundState{})
	c.clock.Add(5 * time.Second)
	if ok, err := lease.Renew(t.Context(), c.Store, c.clock.Now(), req, []int{1, 2}); !ok || err != nil {
		t.Fatalf("renewing owned leases: %v, %v; want true", ok, err)
	}
	renewedUntil := c.clock.Now().Add(contractLease.LeaseDuration)
	for _, l := range c.coordination().Leases {
		want := contractStart.Add(contractLease.LeaseDuration)
		if l.Bucket == 1 || l.Bucket == 2 {
			want = renewedUntil
		}
		if !l.ExpiresAt.Equal(want) {
			t.Fatalf("lease %+v, want expiry %v", l, want)
		}
	}
	if r, _ := c.relay("relay-a"); !r.LastSeen.Equal(c.clock.Now()) {
		t.Fatalf("heartbeat %+v, want it refreshed by the renewal", r)
	}
	if ok, err := lease.Renew(t.Context(), c.Store, c.clock.Now(), req, []int{contractLease.BucketCount}); ok || err != nil {
		t.Fatalf("renewing a bucket outside the store: %v, %v; want false", ok, err)
	}
	c.clock.Set(contractStart.Add(contractLease.LeaseDuration))
	if ok, err := lease.Renew(t.Context(), c.Store, c.clock.Now(), req, []int{0}); ok || err != nil {
		t.Fatalf("renewing a lease at its expiry: %v, %v; want false (a renewal never revives a lapsed lease)", ok, err)
	}
}

func contractRelease(t *testing.T, c *contract) {
	c.acquire("relay-a", lease.RoundState{})
	c.clock.Add(time.Second)
	req := contractLease
	req.RelayID = "relay-a"
	rel, err := c.Store.ReleaseLeases(t.Context(), req.RelayID)
	if err != nil || !slices.Equal(rel.Released, allBuckets()) || rel.Refused != 0 || rel.Unfinished {
		t.Fatalf("release: %+v, %v; want every bucket released", rel, err)
	}
	for _, l := range c.coordination().Leases {
		if l.Owner != "" || !l.Expired(c.clock.Now()) {
			t.Fatalf("lease %+v after the release, want free", l)
		}
	}
	if r, ok := c.relay("relay-a"); !ok || !r.Stopped {
		t.Fatalf("heartbeat %+v after the release, want stamped stopped", r)
	}
	acq := c.acquire("relay-b", lease.RoundState{})
	if !slices.Equal(acq.Claimed, allBuckets()) {
		t.Fatalf("relay-b after relay-a's release: %+v; want every bucket at once", acq)
	}
}

func contractPrune(t *testing.T, c *contract) {
	c.acquire("relay-a", lease.RoundState{})
	req := contractLease
	req.RelayID = "relay-a"
	if _, err := c.Store.ReleaseLeases(t.Context(), req.RelayID); err != nil {
		t.Fatal(err)
	}
	c.clock.Add(time.Second)
	c.acquire("relay-b", lease.RoundState{})
	if _, ok := c.relay("relay-a"); !ok {
		t.Fatal("a stopped record was pruned before a lease duration passed")
	}
	c.clock.Add(contractLease.LeaseDuration + time.Second)
	c.acquire("relay-b", lease.RoundState{Round: lease.PruneEvery - 1}) // the PruneEvery-th full round
	if r, ok := c.relay("relay-a"); ok {
		t.Fatalf("stopped record %+v still there on a pruning round a lease duration later", r)
	}
}

func contractMisconfigured(t *testing.T, c *contract) {
	if n := c.Store.BucketCount(); n != contractLease.BucketCount {
		t.Fatalf("BucketCount = %d, want the %d the store was built with", n, contractLease.BucketCount)
	}
	_, err := outbox.NewRelay(outbox.RelayConfig{Store: c.Store, Publisher: nopPublisher{},
		Options: outbox.RelayOptions{RelayID: "relay-a", BucketCount: contractLease.BucketCount + 1}})
	var mis *outbox.MisconfigurationError
	if !errors.As(err, &mis) {
		t.Fatalf("a relay with another bucket count: %v; want a MisconfigurationError", err)
	}
	if owners := c.owners(); slices.ContainsFunc(owners, func(o string) bool { return o != "" }) {
		t.Fatalf("owners %v after a misconfigured relay, want none", owners)
	}
	noTopic := outbox.Message{ID: outbox.NewMessageID(), Key: []byte("k")}
	if _, err := c.Enqueue(t.Context(), noTopic); !errors.Is(err, outbox.ErrInvalidMessage) {
		t.Fatalf("enqueue of a message without a topic: %v; want an outbox.ErrInvalidMessage", err)
	}
}

func contractMessages(t *testing.T, c *contract) {
	first := c.enqueue(2, "k1", "k2")
	c.clock.Add(time.Second)
	second := c.enqueue(2, "k3")
	c.enqueue(0, "k4")
	stored := append(first, second...)
	for i := 1; i < len(stored); i++ {
		if stored[i].Sequence() <= stored[i-1].Sequence() {
			t.Fatalf("sequences %d then %d: want them increasing in commit order", stored[i-1].Sequence(), stored[i].Sequence())
		}
	}
	pending, err := c.Store.PendingBuckets(t.Context(), allBuckets())
	if err != nil || !slices.Equal(pending, []int{0, 2}) {
		t.Fatalf("pending buckets %v, %v; want [0 2]", pending, err)
	}
	got := c.fetch(2, 2)
	if keys(got) != "k1 k2" || got[0].Sequence() != stored[0].Sequence() || got[0].ID != stored[0].ID || string(got[0].Value) != "value-k1" {
		t.Fatalf("fetch of 2: %s (%+v); want k1 k2 as stored", keys(got), got)
	}
	if all := c.fetch(2, 10); keys(all) != "k1 k2 k3" {
		t.Fatalf("fetch of 10: %s; want k1 k2 k3", keys(all))
	}
	bl, err := c.Store.Backlog(t.Context())
	if err != nil || bl.Pending != 4 || !bl.Oldest.Equal(contractStart) {
		t.Fatalf("backlog %+v, %v; want 4 pending, the oldest at %v", bl, err, contractStart)
	}
	if err := c.Store.MarkPublished(t.Context(), 2, got); err != nil {
		t.Fatal(err)
	}
	if rest := c.fetch(2, 10); keys(rest) != "k3" {
		t.Fatalf("after deleting k1 k2: %s; want k3", keys(rest))
	}
	if err := c.Store.MarkPublished(t.Context(), 2, got); err != nil {
		t.Fatalf("deleting the same prefix again (a retry): %v", err)
	}
	if err := c.Store.MarkPublished(t.Context(), 0, c.fetch(0, 10)); err != nil {
		t.Fatal(err)
	}
	bl, err = c.Store.Backlog(t.Context())
	if err != nil || bl.Pending != 1 || !bl.Oldest.Equal(contractStart.Add(time.Second)) {
		t.Fatalf("backlog %+v, %v; want k3 alone, created a second later", bl, err)
	}
	pending, err = c.Store.PendingBuckets(t.Context(), allBuckets())
	if err != nil || !slices.Equal(pending, []int{2}) {
		t.Fatalf("pending buckets %v, %v; want [2]", pending, err)
	}
}

func contractEmpty(t *testing.T, c *contract) {
	if got := c.fetch(1, 10); len(got) != 0 {
		t.Fatalf("fetch of an empty bucket: %d messages", len(got))
	}
	pending, err := c.Store.PendingBuckets(t.Context(), allBuckets())
	if err != nil || len(pending) != 0 {
		t.Fatalf("pending buckets %v, %v; want none", pending, err)
	}
	bl, err := c.Store.Backlog(t.Context())
	if err != nil || bl != (outbox.Backlog{}) {
		t.Fatalf("backlog %+v, %v; want zero", bl, err)
	}
	coord := c.coordination()
	if len(coord.Leases) != 0 || len(coord.Relays) != 0 {
		t.Fatalf("coordination of an empty store: %+v", coord)
	}
}

func keys(msgs []outbox.Message) string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Key)
	}
	return strings.Join(out, " ")
}

// contractRequests pins the requests the cost model counts: a first round
// is a heartbeat, one coordination read and one claim per bucket; relaying
// a batch is one read and one batched delete.
func contractRequests(t *testing.T, c *contract) {
	if c.Requests == nil {
		t.Skip("the store does not count DynamoDB requests")
	}
	msgs := c.enqueue(1, "k1", "k2", "k3")
	since := func(before map[string]int) map[string]int {
		out := map[string]int{}
		for op, n := range c.Requests() {
			if d := n - before[op]; d != 0 {
				out[op] = d
			}
		}
		return out
	}
	before := c.Requests()
	c.acquire("relay-a", lease.RoundState{})
	want := map[string]int{"PutItem": 1, "Query": 1, "UpdateItem": contractLease.BucketCount}
	if got := since(before); !maps.Equal(got, want) {
		t.Fatalf("a lone relay's first round sent %v, want %v", got, want)
	}
	before = c.Requests()
	got := c.fetch(1, 10)
	if err := c.Store.MarkPublished(t.Context(), 1, got); err != nil || len(got) != len(msgs) {
		t.Fatalf("relayed %d of %d: %v", len(got), len(msgs), err)
	}
	want = map[string]int{"Query": 1, "BatchWriteItem": 1}
	if got := since(before); !maps.Equal(got, want) {
		t.Fatalf("fetching and deleting a batch of %d sent %v, want %v", len(msgs), got, want)
	}
}

// quarantine returns the store's outbox.Quarantine, or skips the case.
func (c *contract) quarantine() outbox.Quarantine {
	c.t.Helper()
	q, ok := c.Store.(outbox.Quarantine)
	if !ok || c.MarkReplay == nil {
		c.t.Skip("the store has no quarantine")
	}
	return q
}

func (c *contract) parkedKeys(q outbox.Quarantine, bucket int) outbox.ParkedSet {
	c.t.Helper()
	set, err := q.ParkedKeys(c.t.Context(), bucket)
	if err != nil {
		c.t.Fatal(err)
	}
	return set
}

func contractPark(t *testing.T, c *contract) {
	q := c.quarantine()
	msgs := c.enqueue(1, "k1", "k2", "k1")
	if err := q.Park(t.Context(), outbox.Parking{Bucket: 1, Sequence: msgs[0].Sequence(), Reason: outbox.ParkMaxAttempts,
		Error: "refused", Attempts: 3, FirstFailedAt: contractStart}); err != nil {
		t.Fatal(err)
	}
	if got := c.fetch(1, 10); keys(got) != "k2 k1" || got[1].Sequence() != msgs[2].Sequence() {
		t.Fatalf("bucket after the park: %s; want k2 and the later k1", keys(got))
	}
	if err := q.Park(t.Context(), outbox.Parking{Bucket: 1, Sequence: msgs[0].Sequence(), Reason: outbox.ParkMaxAttempts}); !errors.Is(err, outbox.ErrParkConflict) {
		t.Fatalf("parking a row already moved: %v; want ErrParkConflict", err)
	}
	if err := q.Park(t.Context(), outbox.Parking{Bucket: 1, Sequence: msgs[2].Sequence(), Reason: outbox.ParkKeyQuarantined, Behind: msgs[1].Sequence()}); !errors.Is(err, outbox.ErrParkConflict) {
		t.Fatalf("parking behind a message that is not parked: %v; want ErrParkConflict", err)
	}
	if err := q.Park(t.Context(), outbox.Parking{Bucket: 1, Sequence: msgs[2].Sequence(), Reason: outbox.ParkKeyQuarantined, Behind: msgs[0].Sequence()}); err != nil {
		t.Fatalf("parking behind the key's parked message: %v", err)
	}
	set := c.parkedKeys(q, 1)
	if want := map[string][]int64{"k1": {msgs[0].Sequence(), msgs[2].Sequence()}}; !maps.EqualFunc(set.Keys, want, slices.Equal) || len(set.Replays) != 0 {
		t.Fatalf("parked set %+v; want k1 quarantined by both, no replay", set)
	}
	if requests, err := q.ReplayRequests(t.Context()); err != nil || len(requests) != 0 {
		t.Fatalf("replay requests %v, %v; want none", requests, err)
	}
}

func contractReplay(t *testing.T, c *contract) {
	q := c.quarantine()
	msgs := c.enqueue(3, "k1", "k1", "k1")
	for i, m := range msgs[:2] {
		p := outbox.Parking{Bucket: 3, Sequence: m.Sequence(), Reason: outbox.ParkMaxAttempts}
		if i > 0 {
			p.Reason, p.Behind = outbox.ParkKeyQuarantined, msgs[0].Sequence()
		}
		if err := q.Park(t.Context(), p); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.MarkReplay(t.Context(), 3, []int64{msgs[0].Sequence()}); err != nil {
		t.Fatal(err)
	}
	requests, err := q.ReplayRequests(t.Context())
	if err != nil || len(requests) != 1 || requests[3] == 0 {
		t.Fatalf("replay requests %v, %v; want one for bucket 3", requests, err)
	}
	set := c.parkedKeys(q, 3)
	if len(set.Replays) != 1 || set.Replays[0].ID != msgs[0].ID || set.Replays[0].Sequence() != msgs[0].Sequence() || string(set.Replays[0].Value) != "value-k1" {
		t.Fatalf("replays %+v; want the first message as stored", set.Replays)
	}
	if err := q.Park(t.Context(), outbox.Parking{Bucket: 3, Sequence: msgs[2].Sequence(), Reason: outbox.ParkKeyQuarantined, Behind: msgs[0].Sequence()}); !errors.Is(err, outbox.ErrParkConflict) {
		t.Fatalf("parking behind a message marked for replay: %v; want ErrParkConflict", err)
	}
	if err := q.DeleteReplayed(t.Context(), 3, set.Replays); err != nil {
		t.Fatal(err)
	}
	if err := c.MarkReplay(t.Context(), 3, []int64{msgs[1].Sequence()}); err != nil {
		t.Fatal(err)
	}
	if err := q.ReplayDone(t.Context(), 3, requests[3]); !errors.Is(err, outbox.ErrParkConflict) {
		t.Fatalf("withdrawing a replay request a newer one replaced: %v; want ErrParkConflict", err)
	}
	newer, err := q.ReplayRequests(t.Context())
	if err != nil || newer[3] == 0 || newer[3] == requests[3] {
		t.Fatalf("replay requests %v after the older one was done, %v; want the newer one kept", newer, err)
	}
	if err := q.RefuseReplay(t.Context(), 3, msgs[1].Sequence(), "refused again"); err != nil {
		t.Fatal(err)
	}
	set = c.parkedKeys(q, 3)
	if want := map[string][]int64{"k1": {msgs[1].Sequence()}}; !maps.EqualFunc(set.Keys, want, slices.Equal) || len(set.Replays) != 0 {
		t.Fatalf("parked set %+v; want the second message still quarantining k1, unmarked", set)
	}
	if err := q.ReplayDone(t.Context(), 3, newer[3]); err != nil {
		t.Fatal(err)
	}
	if left, err := q.ReplayRequests(t.Context()); err != nil || len(left) != 0 {
		t.Fatalf("replay requests %v, %v; want none", left, err)
	}
}

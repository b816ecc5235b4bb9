package outboxwake

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
)

// DefaultNotifyTimeout bounds one asynchronous invoke. An Event invoke is
// only queued by Lambda, so it answers in milliseconds; a slow answer must
// not hold the writer that committed.
const DefaultNotifyTimeout = 2 * time.Second

// Invoker is the Lambda call the notifier makes. *lambda.Client satisfies
// it.
type Invoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

var _ Invoker = (*lambda.Client)(nil)

// NotifierConfig configures a Notifier.
type NotifierConfig struct {
	// Client invokes the relay function (required).
	Client Invoker
	// FunctionName is the relay function's name or ARN (required).
	FunctionName string
	// Timeout bounds each invoke. Default DefaultNotifyTimeout.
	Timeout time.Duration
	// Hooks each implement outbox.HookWakeUp and hear of every invoke,
	// with its error on failure. Default none. Leave them out where the
	// caller reports wake-ups itself (a relay reports its continuation
	// wake-ups), or they count twice.
	Hooks []outbox.Hook
	// Clock dates the relays' views of the leases. Default
	// outbox.SystemClock.
	Clock outbox.Clock
	// Logger receives failed invokes. Default slog.Default().
	Logger *slog.Logger
	// Owners, when set, lets a writer's notifier skip the wake-ups that
	// would only find a live relay holding the buckets (see Notifier).
	// *outboxddb.Store satisfies it. Leave it nil for a relay's
	// continuation wake-ups. Optional.
	Owners OwnerReader
	// LeaseDuration is the relays' lease duration, which says for how long
	// a heartbeat proves a relay alive. Default outbox.DefaultLeaseDuration.
	LeaseDuration time.Duration
	// Doorbell, when set, rings the relay holding the buckets of every
	// writer's wake-up (hop 0, buckets named) before the notifier decides
	// whether to invoke: a live holder listening on the doorbell fetches
	// the message at once instead of at its next probe. outboxkafka's
	// Ringer produces the ring; leave it nil for a process that does not
	// link Kafka. Optional.
	Doorbell outbox.Ringer
}

// OwnerReader reads the coordination partition: which relay holds which
// bucket, and the relays' heartbeats.
type OwnerReader interface {
	ReadCoordination(ctx context.Context) (lease.Coordination, error)
}

// Notifier is an outbox.Notifier that wakes the relay function with an
// asynchronous invoke (InvocationType Event) carrying
// {"trigger":"wake","buckets":[…],"hop":n,"join":b}.
//
// Wake-ups are coalesced per process: while one invoke is in flight, later
// wake-ups are merged into a single follow-up invoke (the union of their
// buckets, the highest hop, join if any asked for it; an unknown bucket set
// absorbs the others) that the caller of the in-flight invoke sends once it
// returns. Merged callers return at once with a nil error. A burst of
// commits therefore costs two invokes, not one per commit.
//
// With Owners set, a writer's wake-up (hop 0, not a join) is skipped when
// every hinted bucket is covered: a view of the coordination partition read
// less than lease.OwnerViewTTL ago showed a live relay holding it, or a
// wake-up for it was sent less than lease.OwnerViewTTL ago (the woken relay
// joins, or trusts a live holder). The live holder polls the bucket, and if
// it stops meanwhile it watches the released buckets for
// lease.OwnerViewTTL and sends the wake-up itself, so a skipped wake-up
// delays no message beyond the holder's poll. When the coverage has lapsed,
// the sender reads the view once before invoking (one eventually
// consistent Query) and skips the invoke if the view covers the buckets;
// before the first view, it invokes at once and reads the view afterwards.
// Under steady traffic this turns one invocation per commit into about one
// read per lease.OwnerViewTTL per process.
//
// A failed invoke is logged, counted (Stats, and the Hooks) and returned
// to its caller, which must not fail its write for it: the relay's schedule
// finds the messages anyway.
type Notifier struct {
	client   Invoker
	function string
	timeout  time.Duration
	hooks    []outbox.HookWakeUp
	clock    outbox.Clock
	log      *slog.Logger
	owners   OwnerReader
	lease    time.Duration
	bell     outbox.Ringer

	mu       sync.Mutex
	inFlight bool
	pending  *outbox.WakeUp
	// covered maps a bucket to when the notifier stops trusting that a
	// relay looks at it; viewedAt is when the last view was read (zero:
	// never), held the buckets it showed a live relay holding; lingers
	// that an invoke sent on an older view found the holder still there
	// (readFirst).
	covered  map[int]time.Time
	viewedAt time.Time
	held     map[int]bool
	lingers  bool
	// lastSent is when the last wake-up went out.
	lastSent time.Time

	sent, failed, merged, skipped, reads, rang, ringFailed atomic.Int64
}

var _ outbox.Notifier = (*Notifier)(nil)

// NewNotifier validates cfg and returns a notifier.
func NewNotifier(cfg NotifierConfig) (*Notifier, error) {
	if cfg.Client == nil || cfg.FunctionName == "" {
		return nil, outbox.Misconfigured("new wake-up notifier", "a Lambda client and the relay function name are required")
	}
	if cfg.Timeout < 0 || cfg.LeaseDuration < 0 {
		return nil, outbox.Misconfigured("new wake-up notifier", "negative timeout %v or lease duration %v", cfg.Timeout, cfg.LeaseDuration)
	}
	var hooks []outbox.HookWakeUp
	for i, h := range cfg.Hooks {
		w, ok := h.(outbox.HookWakeUp)
		if !ok {
			return nil, outbox.Misconfigured("new wake-up notifier", "Hooks[%d] (%T) does not implement outbox.HookWakeUp", i, h)
		}
		hooks = append(hooks, w)
	}
	n := &Notifier{
		hooks:    hooks,
		client:   cfg.Client,
		function: cfg.FunctionName,
		timeout:  cfg.Timeout,
		clock:    cfg.Clock,
		log:      cfg.Logger,
		owners:   cfg.Owners,
		bell:     cfg.Doorbell,
		lease:    cmp.Or(cfg.LeaseDuration, outbox.DefaultLeaseDuration),
		covered:  map[int]time.Time{},
	}
	if n.timeout == 0 {
		n.timeout = DefaultNotifyTimeout
	}
	if n.clock == nil {
		n.clock = outbox.SystemClock{}
	}
	if n.log == nil {
		n.log = slog.Default()
	}
	return n, nil
}

// NotifierStats counts a notifier's wake-ups since it was created.
type NotifierStats struct {
	// Sent counts invokes Lambda accepted.
	Sent int64
	// Failed counts invokes that failed or timed out.
	Failed int64
	// Merged counts wake-ups folded into a follow-up invoke.
	Merged int64
	// Skipped counts wake-ups not sent because a live relay covered their
	// buckets; OwnerReads the coordination views read to decide it.
	Skipped    int64
	OwnerReads int64
	// Rang counts the wake-ups rung on the doorbell, RingFailed those
	// whose ring the Ringer refused.
	Rang, RingFailed int64
}

// Stats returns the counts so far.
func (n *Notifier) Stats() NotifierStats {
	return NotifierStats{Sent: n.sent.Load(), Failed: n.failed.Load(), Merged: n.merged.Load(),
		Skipped: n.skipped.Load(), OwnerReads: n.reads.Load(), Rang: n.rang.Load(), RingFailed: n.ringFailed.Load()}
}

// Notify implements outbox.Notifier. It returns the error of its own invoke,
// which ends at ctx's deadline or the notifier's Timeout, whichever comes
// first (ctx's cancellation does not end it); a wake-up merged into a
// follow-up returns nil at once, and a follow-up's failure is logged and
// counted only.
func (n *Notifier) Notify(ctx context.Context, w outbox.WakeUp) error {
	n.ring(ctx, w)
	n.mu.Lock()
	if n.skippable(w) && n.coveredLocked(w.Buckets, n.clock.Now()) {
		n.mu.Unlock()
		n.skipped.Add(1)
		return nil
	}
	if n.inFlight {
		n.pending = mergeWakeUps(n.pending, w)
		n.mu.Unlock()
		n.merged.Add(1)
		return nil
	}
	n.inFlight = true
	n.mu.Unlock()

	// Follow-ups go out on behalf of callers that already returned, so the
	// first caller's cancellation must not drop them; each invoke has its
	// own timeout instead. The caller's deadline still bounds its own
	// invoke (a relay's stop must end before its Lambda deadline, whether
	// or not the Lambda API answers), and a caller with a deadline hands
	// the follow-ups to a goroutine rather than wait for them.
	base := context.WithoutCancel(ctx)
	own, limit := base, callerFollowUps
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		own, cancel = context.WithDeadline(base, d)
		defer cancel()
		limit = 0
	}
	err := n.invoke(own, w)
	n.followUps(base, limit)
	return err
}

// ring rings the doorbell for a writer's wake-up. Its failure is logged
// and counted only: the holder's poll finds the message.
func (n *Notifier) ring(ctx context.Context, w outbox.WakeUp) {
	if n.bell == nil || w.Hop != 0 || len(w.Buckets) == 0 {
		return
	}
	if err := n.bell.Ring(ctx, w.Buckets); err != nil {
		n.ringFailed.Add(1)
		n.log.WarnContext(ctx, "ringing the doorbell failed; the relay's poll finds the message", "buckets", w.Buckets, "error", err)
		return
	}
	n.rang.Add(1)
}

// callerFollowUps bounds the follow-ups a caller sends before it hands the
// rest to a goroutine. Under continuous commits from many goroutines (a Go
// service) the pending set refills while each follow-up is in flight, and
// without a bound one caller's write would be held up by everyone's
// wake-ups. A Lambda invocation has a single caller, so it never gets there.
const callerFollowUps = 2

// followUps sends the merged wake-ups until none is pending; after limit
// invokes (a negative limit: none) it hands the rest to a new goroutine,
// which keeps the notifier in flight until it is done.
func (n *Notifier) followUps(ctx context.Context, limit int) {
	for sent := 0; ; sent++ {
		n.mu.Lock()
		next := n.pending
		if next == nil {
			n.inFlight = false
			n.mu.Unlock()
			return
		}
		if sent == limit {
			n.mu.Unlock()
			go n.followUps(ctx, -1)
			return
		}
		n.pending = nil
		n.mu.Unlock()
		_ = n.invoke(ctx, *next)
	}
}

// invoke sends one wake-up unless a fresh view of the owners covers it,
// and marks its buckets covered once sent.
func (n *Notifier) invoke(ctx context.Context, w outbox.WakeUp) error {
	if !n.skippable(w) {
		return n.send(ctx, w)
	}
	n.mu.Lock()
	heldAtView := slices.Contains(n.heldAtViewLocked(w.Buckets), true)
	first := readFirst(n.viewedAt, heldAtView, n.lingers, n.lastSent, n.clock.Now())
	n.mu.Unlock()
	if first {
		// The coverage just lapsed: one read decides whether a relay
		// still holds the buckets.
		read := n.refresh(ctx)
		n.mu.Lock()
		covered := n.coveredLocked(w.Buckets, n.clock.Now())
		if read && !covered {
			// The holder stopped: the relays linger as briefly as that.
			n.lingers = false
		}
		n.mu.Unlock()
		if covered {
			n.skipped.Add(1)
			return nil
		}
	}
	err := n.send(ctx, w)
	if err == nil {
		now := n.clock.Now()
		n.cover(w.Buckets, now.Add(lease.OwnerViewTTL))
		n.mu.Lock()
		n.lastSent = now
		n.mu.Unlock()
	}
	if !first && n.refresh(ctx) && heldAtView {
		// The view was too old to trust: a holder still there lingers
		// longer (steady traffic).
		n.mu.Lock()
		n.lingers = n.lingers || slices.Contains(n.heldAtViewLocked(w.Buckets), true)
		n.mu.Unlock()
	}
	return err
}

// readFirst decides whether a wake-up whose buckets are not covered reads
// the owners' view before it invokes (and skips the invoke if the view
// covers them) or invokes first and reads the view afterwards, for the
// wake-ups that follow. It reads first when the last view, read at
// viewedAt, showed a live relay holding one of the buckets (heldAtView)
// less than that relay's likely linger before now (lingerGuess): the relay
// is likely still there, lingering between messages; or when this notifier
// woke a relay less than lease.OwnerViewTTL before now (lastSent), which
// is claiming every bucket meanwhile: either way the read may save an
// invocation. Before any view, or when the last one showed no relay
// holding them or is older than the linger, and nothing was sent lately
// (the relay stopped, as between the messages of sparse traffic), the
// invoke goes first, so the woken relay's start is not delayed by the
// read.
func readFirst(viewedAt time.Time, heldAtView, lingers bool, lastSent, now time.Time) bool {
	if viewedAt.IsZero() {
		return false
	}
	return (heldAtView && now.Sub(viewedAt) < lingerGuess(lingers)) ||
		(!lastSent.IsZero() && now.Sub(lastSent) < lease.OwnerViewTTL)
}

// lingerGuess is how long a relay seen holding a bucket likely stays after
// it: a drain-mode relay lingers outbox.DefaultIdleTimeout after its last
// work, and the default MaxIdleTimeout under steady traffic (see
// RelayOptions), which the notifier assumes once an invoke sent on an
// older view found the holder still there (lingers), until a read finds
// the buckets free. A guess too short costs a wake-up that finds the
// relay live (an invocation and its trust check), one too long a read
// before the invoke.
func lingerGuess(lingers bool) time.Duration {
	if lingers {
		return relayDefaults.MaxIdleTimeout
	}
	return relayDefaults.IdleTimeout
}

// relayDefaults are the relay options whose linger a notifier assumes.
var relayDefaults = outbox.RelayOptions{}.WithDefaults()

// heldAtViewLocked reports, for each bucket, whether the last view read
// showed a live relay holding it.
func (n *Notifier) heldAtViewLocked(buckets []int) []bool {
	out := make([]bool, len(buckets))
	for i, b := range buckets {
		out[i] = n.held[b]
	}
	return out
}

// skippable reports whether w may be skipped: a writer's wake-up with its
// buckets named, on a notifier that can read the owners.
func (n *Notifier) skippable(w outbox.WakeUp) bool {
	return n.owners != nil && w.Hop == 0 && !w.Join && len(w.Buckets) > 0
}

// coveredLocked reports whether every bucket is covered at now.
func (n *Notifier) coveredLocked(buckets []int, now time.Time) bool {
	if n.owners == nil || len(buckets) == 0 {
		return false
	}
	for _, b := range buckets {
		if !now.Before(n.covered[b]) {
			return false
		}
	}
	return true
}

// cover extends the coverage of buckets to until.
func (n *Notifier) cover(buckets []int, until time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, b := range buckets {
		if until.After(n.covered[b]) {
			n.covered[b] = until
		}
	}
}

// refresh reads the owners and covers every bucket a live relay holds, for
// at most lease.OwnerViewTTL from the read's start, and reports whether it
// read. A failed read covers nothing: the wake-up is sent.
func (n *Notifier) refresh(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	view, err := n.owners.ReadCoordination(ctx)
	n.reads.Add(1)
	if err != nil {
		n.log.WarnContext(ctx, "reading the relays' leases failed; sending the wake-up", "error", err)
		return false
	}
	trustUntil := view.ReadAt.Add(lease.OwnerViewTTL)
	heldUntil := view.HeldUntil(view.ReadAt, n.lease)
	n.mu.Lock()
	n.viewedAt = view.ReadAt
	n.held = map[int]bool{}
	for b := range heldUntil {
		n.held[b] = true
	}
	n.mu.Unlock()
	for b, until := range heldUntil {
		if until.After(trustUntil) {
			until = trustUntil
		}
		n.cover([]int{b}, until)
	}
	return true
}

// send invokes the relay function with one wake-up and reports it.
func (n *Notifier) send(ctx context.Context, w outbox.WakeUp) error {
	payload, err := json.Marshal(Payload{Trigger: outbox.TriggerWake, Buckets: nonNil(w.Buckets), Hop: w.Hop, Join: w.Join})
	if err != nil {
		return fmt.Errorf("outboxwake: encode wake-up: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	out, err := n.client.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(n.function),
		InvocationType: types.InvocationTypeEvent,
		Payload:        payload,
	})
	if err == nil && out != nil && out.StatusCode != 202 {
		err = fmt.Errorf("status %d, want 202", out.StatusCode)
	}
	if err != nil {
		err = fmt.Errorf("outboxwake: wake relay function %s for buckets %v (hop %d): %w", n.function, w.Buckets, w.Hop, err)
		n.failed.Add(1)
		n.log.WarnContext(ctx, "wake-up invoke failed; the schedule finds the messages",
			"function", n.function, "buckets", w.Buckets, "hop", w.Hop, "error", err)
	} else {
		n.sent.Add(1)
	}
	for _, h := range n.hooks {
		h.OnWakeUp(w, err)
	}
	return err
}

// mergeWakeUps folds w into acc. An empty bucket list means "unknown" and
// makes the merged wake-up unknown too; the highest hop keeps a chain's
// bound; join survives the merge.
func mergeWakeUps(acc *outbox.WakeUp, w outbox.WakeUp) *outbox.WakeUp {
	if acc == nil {
		c := outbox.WakeUp{Buckets: slices.Clone(w.Buckets), Hop: w.Hop, Join: w.Join}
		slices.Sort(c.Buckets)
		c.Buckets = slices.Compact(c.Buckets)
		if len(w.Buckets) == 0 {
			c.Buckets = nil
		}
		return &c
	}
	acc.Hop = max(acc.Hop, w.Hop)
	acc.Join = acc.Join || w.Join
	if len(acc.Buckets) == 0 || len(w.Buckets) == 0 {
		acc.Buckets = nil
		return acc
	}
	acc.Buckets = append(acc.Buckets, w.Buckets...)
	slices.Sort(acc.Buckets)
	acc.Buckets = slices.Compact(acc.Buckets)
	return acc
}

func nonNil(b []int) []int {
	if b == nil {
		return []int{}
	}
	return b
}

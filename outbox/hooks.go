package outbox

import (
	"time"

	"github.com/spillway-dev/spillway/outbox/lease"
)

// Hook is a value that receives a relay's reports. It implements one or
// more of HookLease, HookBatch, HookPark, HookRun, HookStranded and
// HookWakeUp, and is
// called only through those. NewRelay sorts RelayConfig.Hooks once, so a
// report costs one call per hook that wants it; a hook implementing none of
// them is a misconfiguration. Hooks run synchronously on the relay's
// goroutines: they must be safe for concurrent use and fast, and they never
// change delivery. A panic in a hook is not recovered. Adapters define
// hooks of their own beside these (outboxddb.HookRequest for DynamoDB
// throttles and refused writes, outboxlambda.HookEnqueue for the enqueue
// function, outboxinbox.HookConsume for an inbox); outboxobs/emf.Recorder
// implements all but the inbox's, which emf.InboxRecorder implements.
type Hook any

// HookLease receives a relay's lease bookkeeping.
type HookLease interface {
	// OnRound: an acquisition round ended after took with acq (what the
	// relay now holds, claimed and lost, and the round's standby and
	// settled states); err is its failure, with acq as the round left it.
	OnRound(relayID string, took time.Duration, acq lease.Acquisition, err error)
	// OnLeases: the owned set changed, or a round confirmed it: owned
	// buckets now, of which claimed were new, and released leases given
	// up (rebalance or stop).
	OnLeases(relayID string, owned, claimed, released int)
	// OnLeaseLost: lost leases are no longer trusted, for why.
	OnLeaseLost(relayID string, lost int, why LossReason)
	// OnReleaseSkipped: the stop protocol did not fit before the deadline;
	// lapsing leases run out after LeaseDuration instead.
	OnReleaseSkipped(relayID string, lapsing int)
}

// LossReason says why a relay stopped trusting leases it held. The values
// are the phrases the relay logs with "dropping bucket ownership".
type LossReason string

// Loss reasons.
const (
	// LossKeepRefused: a round's conditional keep was refused (a peer took
	// the bucket, or its expiry moved).
	LossKeepRefused LossReason = "keep refused"
	// LossExpiredBetweenRounds: the leases ran out before the next round
	// started.
	LossExpiredBetweenRounds LossReason = "expired between rounds"
	// LossAcquisitionFailed: a round failed, so ownership is unknown.
	LossAcquisitionFailed LossReason = "acquisition failed"
	// LossAcquisitionOutlasted: a round took longer than LeaseDuration.
	LossAcquisitionOutlasted LossReason = "lease acquisition took longer than LeaseDuration"
	// LossFetchOutlasted: fetching a batch took the lease past its end.
	LossFetchOutlasted LossReason = "fetching a batch outlasted LeaseDuration"
	// LossPublishOutlasted: the lease ran out while a batch was published.
	LossPublishOutlasted LossReason = "lease expired while publishing"
	// LossRenewalRefused: an in-flight renewal was refused.
	LossRenewalRefused LossReason = "in-flight renewal refused"
	// LossRenewalLate: a renewal's answer came after the lease expired.
	LossRenewalLate LossReason = "renewal answered after the lease expired"
	// LossWriteRefused: the table refused a write of the bucket (a park)
	// because its lease item no longer names the relay with the margin
	// left; only that bucket is dropped.
	LossWriteRefused LossReason = "write refused for its lease"
)

// HookBatch receives the work on one bucket's batches.
type HookBatch interface {
	// OnFetch: fetched messages were read from bucket.
	OnFetch(relayID string, bucket, fetched int)
	// OnPublish: a publish from bucket finished with acked messages
	// acknowledged, each with its created-at → ack latency; err is the
	// first failure.
	OnPublish(relayID string, bucket, acked int, latencies []time.Duration, err error)
	// OnDelete: deleted messages left bucket.
	OnDelete(relayID string, bucket, deleted int)
	// OnBackoff: bucket waits wait after err before its next attempt.
	OnBackoff(relayID string, bucket int, wait time.Duration, err error)
	// OnHeadRowRetry: bucket's failing head row is retried alone.
	OnHeadRowRetry(relayID string, bucket int)
}

// HookPark receives the parking of undeliverable messages
// (PoisonQuarantine) and the replays of parked ones.
type HookPark interface {
	// OnPark: one message moved to its bucket's parked partition.
	OnPark(relayID string, p Parking)
	// OnReplay: replayed parked messages of bucket, marked by an
	// operator, were published (each also reported by OnPublish) and left
	// the parked partition.
	OnReplay(relayID string, bucket, replayed int)
	// OnParkedBacklog: a sample of the parked messages of every bucket,
	// taken with the backlog.
	OnParkedBacklog(relayID string, parked int64)
}

// HookRun receives what concerns a run as a whole.
type HookRun interface {
	// OnBacklog: a sample of the pending messages and the age of the
	// oldest (zero when none is pending).
	OnBacklog(relayID string, pending int64, oldest time.Duration)
	// OnRetry: a relay cycle failed with err; the run waits wait.
	OnRetry(relayID string, wait time.Duration, err error)
	// OnRunEnd: a run returned res.
	OnRunEnd(relayID string, res RunResult)
}

// HookStranded receives the samples of stranded messages.
type HookStranded interface {
	// OnStranded: a sample of the messages in buckets beyond the bucket
	// count (StrandedCounter), which no relay of the table publishes.
	OnStranded(relayID string, stranded int64)
}

// HookWakeUp receives the wake-ups sent: a relay's continuation, or a
// writer's through outboxwake.Notifier; err is the send's failure.
type HookWakeUp interface {
	OnWakeUp(w WakeUp, err error)
}

// hooks are a relay's hooks sorted by interface, with the relay's id.
type hooks struct {
	id     string
	lease  []HookLease
	batch  []HookBatch
	park   []HookPark
	run    []HookRun
	strand []HookStranded
	wake   []HookWakeUp
}

func newHooks(id string, hs []Hook) (hooks, error) {
	h := hooks{id: id}
	for i, x := range hs {
		n := 0
		if v, ok := x.(HookLease); ok {
			h.lease, n = append(h.lease, v), n+1
		}
		if v, ok := x.(HookBatch); ok {
			h.batch, n = append(h.batch, v), n+1
		}
		if v, ok := x.(HookPark); ok {
			h.park, n = append(h.park, v), n+1
		}
		if v, ok := x.(HookRun); ok {
			h.run, n = append(h.run, v), n+1
		}
		if v, ok := x.(HookStranded); ok {
			h.strand, n = append(h.strand, v), n+1
		}
		if v, ok := x.(HookWakeUp); ok {
			h.wake, n = append(h.wake, v), n+1
		}
		if n == 0 {
			return hooks{}, Misconfigured("new relay", "hook %d (%T) implements none of HookLease, HookBatch, HookPark, HookRun, HookStranded and HookWakeUp", i, x)
		}
	}
	return h, nil
}

func (h *hooks) round(took time.Duration, acq lease.Acquisition, err error) {
	for _, k := range h.lease {
		k.OnRound(h.id, took, acq, err)
	}
}

func (h *hooks) leases(owned, claimed, released int) {
	for _, k := range h.lease {
		k.OnLeases(h.id, owned, claimed, released)
	}
}

func (h *hooks) leaseLost(lost int, why LossReason) {
	for _, k := range h.lease {
		k.OnLeaseLost(h.id, lost, why)
	}
}

func (h *hooks) releaseSkipped(lapsing int) {
	for _, k := range h.lease {
		k.OnReleaseSkipped(h.id, lapsing)
	}
}

func (h *hooks) fetch(bucket, fetched int) {
	for _, k := range h.batch {
		k.OnFetch(h.id, bucket, fetched)
	}
}

func (h *hooks) publish(bucket, acked int, latencies []time.Duration, err error) {
	for _, k := range h.batch {
		k.OnPublish(h.id, bucket, acked, latencies, err)
	}
}

func (h *hooks) delete(bucket, deleted int) {
	for _, k := range h.batch {
		k.OnDelete(h.id, bucket, deleted)
	}
}

func (h *hooks) backoff(bucket int, wait time.Duration, err error) {
	for _, k := range h.batch {
		k.OnBackoff(h.id, bucket, wait, err)
	}
}

func (h *hooks) headRowRetry(bucket int) {
	for _, k := range h.batch {
		k.OnHeadRowRetry(h.id, bucket)
	}
}

func (h *hooks) parked(p Parking) {
	for _, k := range h.park {
		k.OnPark(h.id, p)
	}
}

func (h *hooks) replayed(bucket, n int) {
	for _, k := range h.park {
		k.OnReplay(h.id, bucket, n)
	}
}

func (h *hooks) parkedBacklog(parked int64) {
	for _, k := range h.park {
		k.OnParkedBacklog(h.id, parked)
	}
}

func (h *hooks) backlog(pending int64, oldest time.Duration) {
	for _, k := range h.run {
		k.OnBacklog(h.id, pending, oldest)
	}
}

func (h *hooks) stranded(n int64) {
	for _, k := range h.strand {
		k.OnStranded(h.id, n)
	}
}

func (h *hooks) retry(wait time.Duration, err error) {
	for _, k := range h.run {
		k.OnRetry(h.id, wait, err)
	}
}

func (h *hooks) runEnd(res RunResult) {
	for _, k := range h.run {
		k.OnRunEnd(h.id, res)
	}
}

func (h *hooks) wakeUp(w WakeUp, err error) {
	for _, k := range h.wake {
		k.OnWakeUp(w, err)
	}
}

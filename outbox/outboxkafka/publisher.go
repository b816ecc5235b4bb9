package outboxkafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox"
)

// Publisher publishes outbox messages with one franz-go client. It is safe
// for concurrent use; create it once per process and reuse it.
type Publisher struct {
	cl       *kgo.Client
	brokers  string
	idHeader string
	clock    outbox.Clock
	scram    *scramSource // nil unless SCRAM
	topics   *topicCheck
	maxBatch int64
	flusher  *flusher
	suspects suspects
}

var _ outbox.Publisher = (*Publisher)(nil)

// New validates cfg, applies its defaults and creates the client. It does
// not contact the brokers (Init does). A configuration that cannot work,
// including ExtraOpts that switch off a delivery guarantee, is an error
// matching outbox.ErrMisconfigured.
func New(cfg Config) (*Publisher, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	src := cfg.scramSource()
	opts, err := cfg.clientOpts(src)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, outbox.Misconfigured("new kafka publisher", "%v", err)
	}
	if err := checkGuarantees(cl); err != nil {
		cl.Close()
		return nil, err
	}
	maxBatch, _ := cl.OptValue(kgo.ProducerBatchMaxBytes).(int32)
	return &Publisher{
		cl:       cl,
		brokers:  strings.Join(cfg.Brokers, ","),
		idHeader: cfg.MessageIDHeaderName,
		clock:    cfg.Clock,
		scram:    src,
		topics:   &topicCheck{known: map[string]bool{}, wait: cfg.UnknownTopicWait},
		maxBatch: int64(maxBatch),
		flusher:  newFlusher(cl, cfg.Clock),
	}, nil
}

// Init checks, within ctx, that a broker answers and loads the idempotent
// producer id, so a relay that cannot publish finds out before it claims any
// bucket. It may be called again after a failure.
//
// A broker refusing SCRAM credentials that SCRAMAuth.Refresh can re-read
// (a rotated secret) makes Init re-read them and connect once more.
func (p *Publisher) Init(ctx context.Context) error {
	err := p.init(ctx)
	if isAuthFailure(err) {
		p.scram.refused()
	}
	if err != nil && p.scram.pending() {
		err = p.init(ctx)
		if rerr := p.scram.lastRefreshErr(); err != nil && rerr != nil {
			err = fmt.Errorf("%w (re-reading the SCRAM credentials failed too: %v)", err, rerr)
		}
	}
	return err
}

func (p *Publisher) init(ctx context.Context) error {
	if err := p.cl.Ping(ctx); err != nil {
		return fmt.Errorf("outboxkafka: init: reach brokers %s: %w", p.brokers, err)
	}
	if _, _, err := p.cl.ProducerID(ctx); err != nil {
		return fmt.Errorf("outboxkafka: init: load the idempotent producer id from %s: %w", p.brokers, err)
	}
	return nil
}

// Close closes the client. Publish never returns with records of its own
// still buffered, so there is nothing left to flush; a Publish running
// concurrently fails its unsent records with kgo.ErrClientClosed.
func (p *Publisher) Close() { p.cl.Close() }

// Result is the outcome of one batch.
type Result struct {
	// Acked is the length of the contiguous prefix of msgs that Kafka
	// acknowledged; the relay may delete exactly these rows. A later
	// record can have succeeded too: it is not counted.
	Acked int
	// AckedAt holds, for each acknowledged message of the prefix, when its
	// acknowledgement arrived (on Config.Clock).
	AckedAt []time.Time
	// Err is nil when every message was acknowledged. Otherwise it is the
	// first failure in batch order (a broker error, a row that could not be
	// built, such as one with a malformed header blob matching
	// outbox.ErrHeaderFormat), each naming the message; a failure retrying
	// cannot fix carries an *outbox.PoisonError with its reason. Or, when nothing
	// failed but ctx ended before every message was acknowledged, an error
	// matching ctx.Err() (context.Canceled or context.DeadlineExceeded):
	// the caller stopped the batch, Kafka did not refuse it.
	Err error
}

// Publish implements outbox.Publisher; see PublishDetailed.
func (p *Publisher) Publish(ctx context.Context, msgs []outbox.Message) (int, error) {
	res := p.PublishDetailed(ctx, msgs)
	return res.Acked, res.Err
}

// PublishDetailed publishes msgs in order and waits for every record it
// started, so the result is final: nothing of this batch is still in flight
// when it returns.
//
// Every record is checked before any is produced: a row that cannot be
// built, a topic the brokers' metadata does not list (asked again after
// Config.UnknownTopicWait), a record over the client's batch size limit.
// The first such row stops the batch there, with an *outbox.PoisonError:
// the rows before it are published and awaited, nothing after it is sent,
// so nothing of its key overtakes it. The records are then handed to the
// client together, while no flush runs, and sent by the next flush, which
// concurrent publishes share; once one has failed, no record after it is
// handed over, nor sent if the client still holds it unsent. A single
// message the broker refused with its partition batch while other records
// of that partition shared the Flush is not condemned (the refusal may be
// theirs); its next publish alone, the relay's head-row retry, goes out in
// a Flush of its own. Records the client's buffer has no room for follow
// once the records before them are acknowledged. An empty batch produces
// nothing. ctx bounds the batch: when it ends while the batch waits for a
// running flush, nothing is sent; records not yet sent fail with its error,
// while records already sent are awaited, because an idempotent producer
// cannot know whether the broker wrote them.
func (p *Publisher) PublishDetailed(ctx context.Context, msgs []outbox.Message) Result {
	if len(msgs) == 0 {
		return Result{}
	}
	if err := ctx.Err(); err != nil {
		return Result{Err: stopped(0, len(msgs), err)}
	}
	records, buildErr := p.records(ctx, msgs)
	outcomes := make([]outcome, len(records))
	single := len(msgs) == 1
	p.send(ctx, records, outcomes, single && p.suspects.has(msgs[0].ID))
	res := settle(ctx, msgs, outcomes, buildErr)
	if single && len(outcomes) == 1 {
		p.suspects.note(msgs[0].ID, outcomes[0].shared)
	}
	if isAuthFailure(res.Err) {
		// The next connection re-reads rotated credentials; the relay's
		// retry of this batch uses it.
		p.scram.refused()
	}
	return res
}

// records builds and checks the records of msgs in order and stops at the
// first that cannot be published as stored.
func (p *Publisher) records(ctx context.Context, msgs []outbox.Message) ([]*kgo.Record, error) {
	records := make([]*kgo.Record, 0, len(msgs))
	checked := map[string]bool{}
	for i := range msgs {
		m := &msgs[i]
		r, err := newRecord(ctx, m, p.idHeader)
		if err != nil {
			reason := outbox.ParkInvalidRecord
			if errors.Is(err, outbox.ErrHeaderFormat) {
				reason = outbox.ParkUndecodableItem
			}
			return records, &outbox.PoisonError{Reason: reason, Err: err}
		}
		if size := recordSize(r); p.maxBatch > 0 && size > p.maxBatch {
			return records, &outbox.PoisonError{Reason: outbox.ParkTooLarge, Err: fmt.Errorf(
				"outboxkafka: message %s (bucket %d, sequence %d) is a %d-byte record batch, over the client's %d-byte limit (ProducerBatchMaxBytes): %w",
				m.ID, m.Bucket(), m.Sequence(), size, p.maxBatch, kerr.MessageTooLarge)}
		}
		if checked[m.Topic] {
			records = append(records, r)
			continue
		}
		checked[m.Topic] = true
		if err := p.topics.check(ctx, p.cl, m.Topic); err != nil {
			if _, poison := outbox.PoisonReason(err); poison {
				err = fmt.Errorf("outboxkafka: message %s (bucket %d, sequence %d): %w", m.ID, m.Bucket(), m.Sequence(), err)
			}
			return records, err
		}
		records = append(records, r)
	}
	return records, nil
}

// send hands records to the client in order and fills outcomes, in a
// Flush of their own when alone. Records
// the client has no room for wait for the Flush that makes it, and are
// handed over once every record before them is acknowledged. After a
// failure (or a stop by ctx) nothing more is handed over: the rest share
// that outcome, which settle reports once, at the first. When ctx ends
// before a hand-over, the rest get ctx's error.
func (p *Publisher) send(ctx context.Context, records []*kgo.Record, outcomes []outcome, alone bool) {
	next := 0
	for next < len(records) {
		n, err := p.flusher.send(ctx, records[next:], outcomes[next:], alone)
		if err != nil {
			fill(outcomes[next:], err)
			return
		}
		for i := next; i < next+n; i++ {
			if outcomes[i].err != nil {
				fill(outcomes[next+n:], outcomes[i].err)
				return
			}
		}
		next += n
	}
}

func fill(outcomes []outcome, err error) {
	for i := range outcomes {
		outcomes[i].err = err
	}
}

// settle folds per-record outcomes into a Result: the contiguous prefix of
// successes and the first failure in batch order, where a record stopped by
// the caller's ctx is not a failure.
func settle(ctx context.Context, msgs []outbox.Message, outcomes []outcome, buildErr error) Result {
	res := Result{AckedAt: make([]time.Time, 0, len(outcomes))}
	prefix := true
	var stop error
	for i, o := range outcomes {
		switch {
		case o.err == nil:
			if prefix {
				res.Acked++
				res.AckedAt = append(res.AckedAt, o.at)
			}
			continue
		case isStop(ctx, o.err):
			if stop == nil {
				stop = o.err
			}
		case res.Err == nil:
			m := &msgs[i]
			res.Err = fmt.Errorf("outboxkafka: publish message %s (bucket %d, sequence %d) to %s: %w",
				m.ID, m.Bucket(), m.Sequence(), m.Topic, classify(o.err, len(outcomes) == 1 && !o.shared))
		}
		prefix = false
	}
	if res.Err == nil {
		res.Err = buildErr
	}
	if res.Err == nil && stop != nil {
		res.Err = stopped(res.Acked, len(msgs), stop)
	}
	return res
}

// isStop reports whether err is the caller's ctx ending rather than a
// refusal by Kafka or the client.
func isStop(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

func stopped(acked, n int, cause error) error {
	return fmt.Errorf("outboxkafka: publish stopped by the caller after %d of %d messages: %w", acked, n, cause)
}

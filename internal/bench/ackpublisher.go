package bench

import (
	"context"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
)

// ackPublisher is the relay's publisher with a recorder: it publishes
// through outboxkafka.Publisher.PublishDetailed and remembers when Kafka
// acknowledged each message, by message id.
type ackPublisher struct {
	*outboxkafka.Publisher

	mu      sync.Mutex
	acks    map[outbox.MessageID]time.Time
	changed chan struct{}
}

var _ outbox.Publisher = (*ackPublisher)(nil)

func newAckPublisher(p *outboxkafka.Publisher) *ackPublisher {
	return &ackPublisher{Publisher: p, acks: map[outbox.MessageID]time.Time{}, changed: make(chan struct{})}
}

// Publish implements outbox.Publisher.
func (p *ackPublisher) Publish(ctx context.Context, msgs []outbox.Message) (int, error) {
	res := p.PublishDetailed(ctx, msgs)
	p.mu.Lock()
	for i := range res.Acked {
		if _, dup := p.acks[msgs[i].ID]; !dup {
			p.acks[msgs[i].ID] = res.AckedAt[i]
		}
	}
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	return res.Acked, res.Err
}

// ackedAt returns when id was first acknowledged.
func (p *ackPublisher) ackedAt(id outbox.MessageID) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.acks[id]
	return t, ok
}

// wait blocks until every id is acknowledged or ctx ends.
func (p *ackPublisher) wait(ctx context.Context, ids ...outbox.MessageID) error {
	for {
		p.mu.Lock()
		missing := false
		for _, id := range ids {
			if _, ok := p.acks[id]; !ok {
				missing = true
				break
			}
		}
		changed := p.changed
		p.mu.Unlock()
		if !missing {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

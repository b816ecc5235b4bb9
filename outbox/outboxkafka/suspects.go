package outboxkafka

import (
	"sync"

	"github.com/spillway-dev/spillway/outbox"
)

// maxSuspects bounds the suspects a publisher remembers; past it the set
// starts again, which costs at most one more shared Flush per record.
const maxSuspects = 1024

// suspects are the messages a broker refused with their partition batch
// while another bucket's records of that partition shared their Flush: the
// refusal may be the neighbour's. The relay retries such a message alone
// (its failing head row); that retry goes out in a Flush of its own, so
// its verdict is the message's own, and a good message is never condemned
// for a neighbour, nor fails again beside it.
type suspects struct {
	mu  sync.Mutex
	ids map[outbox.MessageID]bool
}

func (s *suspects) has(id outbox.MessageID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[id]
}

// note records the outcome of a publish of one message: a shared refusal
// makes it a suspect, anything else clears it.
func (s *suspects) note(id outbox.MessageID, shared bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !shared:
		delete(s.ids, id)
	case len(s.ids) >= maxSuspects:
		s.ids = map[outbox.MessageID]bool{id: true}
	default:
		if s.ids == nil {
			s.ids = map[outbox.MessageID]bool{}
		}
		s.ids[id] = true
	}
}

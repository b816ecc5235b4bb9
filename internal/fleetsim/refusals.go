package fleetsim

import (
	"sync"

	"github.com/spillway-dev/spillway/outbox"
)

// refusals remembers every publish that returned an error, for the order
// check. The contract admits one reorder (README, "Order"): the client may
// send part of a batch before the relay has handed it the rest, so when
// the broker refuses that part, records handed over later are still
// written, and the relay's retry of the refused records lands after them.
// A key's first deliveries may then be out of order, but only among the
// messages of one publish that failed at or before the earlier message.
type refusals struct {
	mu sync.Mutex
	// unackedBefore[a][b]: a failed publish held a unacknowledged and b
	// after it.
	unackedBefore map[outbox.MessageID]map[outbox.MessageID]bool
}

// add records a publish of msgs that returned an error after acked
// messages were acknowledged.
func (r *refusals) add(msgs []outbox.Message, acked int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unackedBefore == nil {
		r.unackedBefore = map[outbox.MessageID]map[outbox.MessageID]bool{}
	}
	for i := max(acked, 0); i < len(msgs); i++ {
		later := r.unackedBefore[msgs[i].ID]
		if later == nil {
			later = map[outbox.MessageID]bool{}
			r.unackedBefore[msgs[i].ID] = later
		}
		for _, m := range msgs[i+1:] {
			later[m.ID] = true
		}
	}
}

// excuses reports whether earlier may be first delivered after later: a
// failed publish held earlier unacknowledged with later behind it. A nil
// refusals excuses nothing.
func (r *refusals) excuses(earlier, later outbox.MessageID) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unackedBefore[earlier][later]
}

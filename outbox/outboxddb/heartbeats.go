package outboxddb

import (
	"context"
	"slices"
	"strings"

	"github.com/spillway-dev/spillway/outbox/lease"
)

// Heartbeats reads only the heartbeat records of the coordination
// partition: the same strongly consistent Query as the full read, limited
// to sort keys starting with RELAY#. A settled relay's round reads this
// instead of every lease item (lease.Settled).
func (s *Store) Heartbeats(ctx context.Context) ([]lease.RelayState, error) {
	items, err := s.readCoordinationItems(ctx, relayPrefix)
	if err != nil {
		return nil, err
	}
	_, relays := s.keys.coordinationItems(items)
	out := make([]lease.RelayState, 0, len(relays))
	for _, r := range relays {
		out = append(out, r.state())
	}
	slices.SortFunc(out, func(a, b lease.RelayState) int { return strings.Compare(a.RelayID, b.RelayID) })
	return out, nil
}

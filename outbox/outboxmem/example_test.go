package outboxmem_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxmem"
)

// keyLog is a Publisher for the example: it notes each key's values in the
// order they were published.
type keyLog struct {
	mu    sync.Mutex
	byKey map[string][]string
}

func (p *keyLog) Init(context.Context) error { return nil }

func (p *keyLog) Publish(_ context.Context, msgs []outbox.Message) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range msgs {
		p.byKey[string(m.Key)] = append(p.byKey[string(m.Key)], string(m.Value))
	}
	return len(msgs), nil
}

// A test of code built on the relay runs it over the in-memory store, as
// over a table: the relay claims the buckets, publishes each key's messages
// in commit order and deletes them.
func Example() {
	ctx := context.Background()
	store, err := outboxmem.New(outboxmem.Options{BucketCount: 4})
	if err != nil {
		log.Fatal(err)
	}
	for i, key := range []string{"order-1", "order-2", "order-1", "order-1"} {
		msg, err := outbox.NewMessage("orders", []byte(key), fmt.Appendf(nil, "v%d", i), outbox.MessageOptions{})
		if err != nil {
			log.Fatal(err)
		}
		if _, err := store.Enqueue(ctx, msg); err != nil {
			log.Fatal(err)
		}
	}

	pub := &keyLog{byKey: map[string][]string{}}
	relay, err := outbox.NewRelay(outbox.RelayConfig{
		Options:   outbox.RelayOptions{RelayID: "relay-1", BucketCount: 4, Mode: outbox.ModeDrain},
		Store:     store,
		Publisher: pub,
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := relay.Run(ctx, outbox.RunInput{Trigger: outbox.TriggerDirect, Deadline: time.Now().Add(time.Minute)}); err != nil {
		log.Fatal(err)
	}
	backlog, err := store.Backlog(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, key := range slices.Sorted(maps.Keys(pub.byKey)) {
		fmt.Println(key, pub.byKey[key])
	}
	fmt.Println("pending:", backlog.Pending)
	// Output:
	// order-1 [v0 v2 v3]
	// order-2 [v1]
	// pending: 0
}

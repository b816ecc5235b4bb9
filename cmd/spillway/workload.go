package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
	"github.com/spillway-dev/spillway/outbox/outboxwake"
)

// demoOrdersTable is the order service's own table, which the Go writer
// commits order items to together with their messages.
const demoOrdersTable = "spillway-demo-orders"

// demoTopics are the topics the demo workload writes to.
var demoTopics = []string{"orders", "payments"}

// workload enqueues the demo messages: several producers, each owning a set
// of keys (so each key's writes are serialized, which is what gives
// "enqueue order" a meaning), mixing single messages and batches, some
// large values and headers on every message. Even producers call the
// enqueue function; odd ones are a Go service that commits an order item
// per message to its own table with Writer.Commit, when service is set.
type workload struct {
	messages, keys, producers int
	largeEvery                int
	seed                      uint64
	service                   *outboxddb.Writer
	ordersTable               string // the service's table (demo.ordersTable)

	enqueued atomic.Int64
	// committed counts the messages the Go service committed with their
	// order items (also counted in enqueued).
	committed atomic.Int64
	mu        sync.Mutex
	// order lists the message ids of each topic and key in enqueue order:
	// Kafka orders a key within one topic's partition, so that is where
	// the outbox's per-key order shows.
	order map[string][]string
}

type wireMessage struct {
	Topic         string            `json:"topic"`
	Key           string            `json:"key"`
	Value         json.RawMessage   `json:"value,omitempty"`
	ValueEncoding string            `json:"valueEncoding,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
}

// run enqueues every message, calling enqueue with each request.
func (w *workload) run(ctx context.Context, h *outboxlambda.EnqueueHandler) error {
	w.order = map[string][]string{}
	per := w.messages / w.producers
	errs := make(chan error, w.producers)
	var wg sync.WaitGroup
	for p := range w.producers {
		n := per
		if p == w.producers-1 {
			n = w.messages - per*(w.producers-1)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- w.produce(ctx, h, p, n)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *workload) produce(ctx context.Context, h *outboxlambda.EnqueueHandler, producer, n int) error {
	rng := rand.New(rand.NewPCG(w.seed, uint64(producer)))
	var myKeys []string
	for k := producer; k < w.keys; k += w.producers {
		myKeys = append(myKeys, fmt.Sprintf("customer-%03d", k))
	}
	for sent := 0; sent < n; {
		size := 1
		if rng.IntN(3) > 0 {
			size = min(1+rng.IntN(25), n-sent)
		}
		var batch []wireMessage
		for i := range size {
			key := myKeys[rng.IntN(len(myKeys))]
			seq := sent + i
			msg := wireMessage{
				Topic:   demoTopics[rng.IntN(len(demoTopics))],
				Key:     key,
				Headers: map[string]string{"producer": fmt.Sprint(producer), "content-type": "application/json"},
			}
			body := map[string]any{"customer": key, "n": seq, "amount": rng.IntN(100000)}
			if w.largeEvery > 0 && (producer*n+seq)%w.largeEvery == w.largeEvery-1 {
				blob := make([]byte, 64<<10)
				for j := range blob {
					blob[j] = byte(rng.Uint32())
				}
				body["attachment"] = base64.StdEncoding.EncodeToString(blob)
			}
			raw, err := json.Marshal(body)
			if err != nil {
				return err
			}
			msg.Value, msg.ValueEncoding = raw, "json"
			batch = append(batch, msg)
		}
		if w.service != nil && producer%2 == 1 {
			if err := w.commitOrders(ctx, producer, batch); err != nil {
				return err
			}
			sent += len(batch)
			continue
		}
		var payload []byte
		var err error
		if len(batch) == 1 {
			payload, err = json.Marshal(batch[0])
		} else {
			payload, err = json.Marshal(map[string]any{"messages": batch})
		}
		if err != nil {
			return err
		}
		resp, err := h.Handle(ctx, payload)
		if err != nil {
			return fmt.Errorf("enqueue: %w", err)
		}
		if resp.Error != "" {
			return fmt.Errorf("enqueue refused %s: %s", resp.Field, resp.Error)
		}
		w.mu.Lock()
		for i, m := range resp.Messages {
			k := orderKey(batch[i].Topic, batch[i].Key)
			w.order[k] = append(w.order[k], m.MessageID)
		}
		w.mu.Unlock()
		w.enqueued.Add(int64(len(batch)))
		sent += len(batch)
	}
	return nil
}

// commitOrders is the Go service's path: one Writer.Commit puts an order
// item per message in the service's table and enqueues the messages, all or
// nothing, then wakes the relay.
func (w *workload) commitOrders(ctx context.Context, producer int, batch []wireMessage) error {
	msgs := make([]outbox.Message, len(batch))
	for i, b := range batch {
		m, err := outbox.NewMessage(b.Topic, []byte(b.Key), b.Value, outbox.MessageOptions{Headers: []outbox.Header{
			{Key: "producer", Value: []byte(fmt.Sprint(producer))}, {Key: "content-type", Value: []byte("application/json")}}})
		if err != nil {
			return err
		}
		msgs[i] = m
	}
	_, err := w.service.Commit(ctx, func(_ context.Context, tx *outboxddb.Tx) error {
		for _, m := range msgs {
			tx.Put(types.Put{TableName: aws.String(w.ordersTable), Item: map[string]types.AttributeValue{
				outboxddb.DefaultPartitionKey: &types.AttributeValueMemberS{Value: "ORDER#" + m.ID.String()},
				outboxddb.DefaultSortKey:      &types.AttributeValueMemberS{Value: string(m.Key)},
				"Topic":                       &types.AttributeValueMemberS{Value: m.Topic},
			}})
		}
		return tx.Enqueue(msgs...)
	})
	if err != nil {
		return fmt.Errorf("commit %d orders: %w", len(msgs), err)
	}
	w.mu.Lock()
	for i, m := range msgs {
		k := orderKey(batch[i].Topic, batch[i].Key)
		w.order[k] = append(w.order[k], m.ID.String())
	}
	w.mu.Unlock()
	w.enqueued.Add(int64(len(msgs)))
	w.committed.Add(int64(len(msgs)))
	return nil
}

// newServiceWriter builds the Go service's writer: the functions' options
// and a notifier that wakes the simulated relay function after each commit,
// and the service's own orders table.
func (d *demo) newServiceWriter(ctx context.Context) (*outboxddb.Writer, error) {
	if err := outboxddb.CreateIfNotExists(ctx, d.ddb.Client, outboxddb.Options{TableName: d.ordersTable}); err != nil {
		return nil, err
	}
	wakeups, err := outboxwake.NewNotifier(outboxwake.NotifierConfig{Client: d.sim, FunctionName: demoRelayFunction, Logger: d.log})
	if err != nil {
		return nil, err
	}
	opts := d.cfg.WriterOptions()
	opts.Logger, opts.Notifier = d.log, wakeups
	return outboxddb.NewWriter(d.ddb.Client, opts)
}

// consumer reads the demo topics from the start and checks what arrived.
type consumer struct {
	client *kgo.Client
	header string

	mu     sync.Mutex
	seen   map[string]int      // message id → deliveries
	firsts map[string][]string // topic/key → message ids in first-delivery order
	total  int
	noID   int
}

func newConsumer(brokers []string, header string) (*consumer, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(demoTopics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	return &consumer{client: cl, header: header, seen: map[string]int{}, firsts: map[string][]string{}}, nil
}

// run polls until ctx ends.
func (c *consumer) run(ctx context.Context) {
	for ctx.Err() == nil {
		fetches := c.client.PollFetches(ctx)
		c.mu.Lock()
		fetches.EachRecord(func(r *kgo.Record) {
			id := ""
			for _, h := range r.Headers {
				switch h.Key {
				case c.header:
					id = string(h.Value)
				case injectedHeader:
					return // the inbox demo's own copies are not the relay's records
				}
			}
			c.total++
			if id == "" {
				c.noID++
				return
			}
			c.seen[id]++
			if c.seen[id] == 1 {
				k := orderKey(r.Topic, string(r.Key))
				c.firsts[k] = append(c.firsts[k], id)
			}
		})
		c.mu.Unlock()
	}
}

func (c *consumer) unique() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// verdict compares what was consumed with what was enqueued.
type verdict struct {
	Enqueued int `json:"enqueued"`
	// Committed are the messages the Go service committed with their
	// order items; the rest went through the enqueue function.
	Committed     int `json:"committedWithOrders"`
	Delivered     int `json:"deliveredUnique"`
	Records       int `json:"records"`
	Duplicates    int `json:"duplicates"`
	Missing       int `json:"missing"`
	MissingHeader int `json:"withoutMessageIdHeader"`
	// KeysChecked counts the message keys, Topics the topics they write
	// to, PairsChecked the topic/key pairs: Kafka orders a key within
	// one topic, so each pair is checked on its own.
	KeysChecked  int `json:"keysChecked"`
	Topics       int `json:"topics"`
	PairsChecked int `json:"topicKeyPairsChecked"`
	// OrderBroken counts the topic/key pairs delivered out of order.
	OrderBroken  int    `json:"pairsOutOfOrder"`
	FirstProblem string `json:"firstProblem,omitempty"`
}

func (c *consumer) check(order map[string][]string) verdict {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := verdict{Delivered: len(c.seen), Records: c.total, MissingHeader: c.noID, Duplicates: c.total - c.noID - len(c.seen)}
	keys, topics := map[string]bool{}, map[string]bool{}
	for key, ids := range order {
		topic, k, _ := strings.Cut(key, "/")
		keys[k], topics[topic] = true, true
		v.Enqueued += len(ids)
		v.PairsChecked++
		for _, id := range ids {
			if c.seen[id] == 0 {
				v.Missing++
			}
		}
		if got := c.firsts[key]; strings.Join(got, ",") != strings.Join(ids, ",") {
			v.OrderBroken++
			if v.FirstProblem == "" {
				v.FirstProblem = fmt.Sprintf("%s: enqueued %d messages, first deliveries differ in order or number (%d)", key, len(ids), len(got))
			}
		}
	}
	v.KeysChecked, v.Topics = len(keys), len(topics)
	return v
}

func orderKey(topic, key string) string { return topic + "/" + key }

// dedupHeader is the header the relay stamps with the message id.
const dedupHeader = outbox.DefaultMessageIDHeaderName

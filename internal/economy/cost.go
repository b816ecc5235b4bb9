package economy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/internal/bench"
	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/internal/relayproc"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// Cost paths: how a message is enqueued, and the relay's share.
const (
	// PathEnqueue is Writer.Enqueue of one message: a reservation and a
	// PutItem.
	PathEnqueue = "Enqueue, one message"
	// PathEnqueueList is Writer.EnqueueBatch of a list: one reservation per
	// distinct bucket and one TransactWriteItems.
	PathEnqueueList = "Enqueue, list"
	// PathTransaction is Writer.Prepare inside the caller's own
	// TransactWriteItems: what the outbox adds to a business transaction
	// (measured against the same transactions without it).
	PathTransaction = "caller transaction"
	// PathRelayDrain is the relay's work per message: probes, fetches,
	// publishes and deletes.
	PathRelayDrain = "relay: drain"
	// PathRelayJoin is a relay run's fixed start: heartbeat, coordination
	// read, claims.
	PathRelayJoin = "relay: join"
	// PathRelayStop is a relay run's fixed end in drain mode: the idle
	// linger's polls, the idle-exit probe and the stop protocol.
	PathRelayStop = "relay: linger + stop"
	// PathRelayBacklog is one backlog sample, which the holder of bucket 0
	// takes once per BacklogInterval (30 s): a head query per bucket and a
	// count of the pending messages, billed as a read of every one.
	PathRelayBacklog = "relay: backlog sample"
	// PathEndToEnd is a message enqueued in a caller transaction and then
	// relayed.
	PathEndToEnd = "caller transaction + relay drain"
)

// CostConfig parameterises the cost measurement. Zero fields take their
// defaults.
type CostConfig struct {
	// Messages is the number of messages per enqueue path. Default 200.
	Messages int
	// ValueSizes are the message value sizes measured. Default 512 bytes
	// (a message item under 1 KB, the seed's model) and 16 KB.
	ValueSizes []int
	// ListSize is the number of messages per list enqueue. Default 10.
	ListSize int
	// BucketCount is the table's bucket count. Default 8.
	BucketCount int
}

func (c CostConfig) withDefaults() CostConfig {
	c.Messages = cmp.Or(c.Messages, 200)
	c.ListSize = cmp.Or(c.ListSize, 10)
	c.BucketCount = cmp.Or(c.BucketCount, outbox.DefaultBucketCount)
	if len(c.ValueSizes) == 0 {
		c.ValueSizes = []int{512, 16 << 10}
	}
	return c
}

// CostResult is the DynamoDB cost of each path for each value size.
type CostResult struct {
	Config CostConfig
	Prices Prices
	Sizes  []SizeCost
}

// SizeCost is the cost of every path for one value size.
type SizeCost struct {
	ValueSize int
	// ItemSize is a message item's size as DynamoDB bills it (attribute
	// names and values).
	ItemSize int
	Paths    []PathCost
}

// PathCost is what one path cost.
type PathCost struct {
	Path string
	// Per is "message" or "run": what Count counts and Unit is per.
	Per   string
	Count int
	// Requests, ReadUnits and WriteUnits are the totals over Count.
	Requests              map[string]int
	ReadUnits, WriteUnits float64
	// Unit is the cost per message (or per run) with its on-demand price.
	Unit Rate
	// ModelWriteUnits is the write units per message of the seed's cost
	// model for this path, extended to the item size with DynamoDB's
	// sizing rules; nil when the model has no figure.
	ModelWriteUnits *float64
	// Model spells the model out.
	Model string
}

// RunCost enqueues cfg.Messages messages through each path, relays them all
// with one relay, and reports the counted requests and units. It runs only
// inside the lab's synctest bubble (env.Settle), on the in-memory backends,
// so the relay's timers move with the bubble's clock and its figures do not
// depend on the machine's speed.
func RunCost(ctx context.Context, env lab.Config, cfg CostConfig) (res CostResult, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return CostResult{}, err
	}
	if env.Settle == nil {
		return CostResult{}, lab.ErrNotInBubble
	}
	b, err := bench.StartBackends(ctx, env)
	if err != nil {
		return CostResult{}, err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	res = CostResult{Config: cfg, Prices: OnDemandPrices}
	for _, size := range cfg.ValueSizes {
		env.Progressf("cost: %d-byte values", size)
		sc, err := measureCost(ctx, env, b, cfg, size)
		if err != nil {
			return CostResult{}, fmt.Errorf("economy: cost of %d-byte values: %w", size, err)
		}
		res.Sizes = append(res.Sizes, sc)
	}
	return res, nil
}

func (c CostConfig) validate() error {
	if c.Messages < 1 || c.BucketCount < 1 || c.ListSize < 1 || c.ListSize > outboxddb.MaxTransactionItems {
		return fmt.Errorf("economy: cost config %+v: want messages and buckets >= 1 and a list size in [1, %d]", c, outboxddb.MaxTransactionItems)
	}
	for _, size := range c.ValueSizes {
		if size < 0 {
			return fmt.Errorf("economy: cost config: negative value size %d", size)
		}
	}
	return nil
}

// costRun is the measurement for one value size.
type costRun struct {
	env    lab.Config
	cfg    CostConfig
	b      *bench.Backends
	opts   outboxddb.Options
	writer *outboxddb.Writer
	work   *bench.Workload
	next   int     // next message index
	kb     float64 // a message item's size in started KB
}

func measureCost(ctx context.Context, env lab.Config, b *bench.Backends, cfg CostConfig, valueSize int) (SizeCost, error) {
	opts, err := b.NewTable(ctx, cfg.BucketCount, outbox.SystemClock{})
	if err != nil {
		return SizeCost{}, err
	}
	writer, err := outboxddb.NewWriter(b.DynamoDB.Client, outboxddb.WriterOptions{Options: opts})
	if err != nil {
		return SizeCost{}, err
	}
	// The writer's one read of the table's layout record, a cost per
	// writer, not per message (docs/protocol.md#the-layout-record).
	if err := writer.CheckLayout(ctx); err != nil {
		return SizeCost{}, err
	}
	c := &costRun{env: env, cfg: cfg, b: b, opts: opts, writer: writer, work: bench.NewWorkload(b.Topic, valueSize, cfg.BucketCount)}
	sc := SizeCost{ValueSize: valueSize}
	single, err := c.enqueueSingle(ctx)
	if err != nil {
		return SizeCost{}, err
	}
	if sc.ItemSize, err = c.itemSize(ctx); err != nil {
		return SizeCost{}, err
	}
	c.kb = math.Ceil(float64(sc.ItemSize) / 1024)
	single.ModelWriteUnits, single.Model = ptr(1+c.kb), "reserve 1 + put 1/KB"
	list, err := c.enqueueList(ctx)
	if err != nil {
		return SizeCost{}, err
	}
	txn, err := c.transaction(ctx)
	if err != nil {
		return SizeCost{}, err
	}
	join, backlog, drain, stop, err := c.relay(ctx)
	if err != nil {
		return SizeCost{}, err
	}
	end := PathCost{
		Path: PathEndToEnd, Per: "message", Count: txn.Count,
		Unit: Rate{
			Requests:   txn.Unit.Requests + drain.Unit.Requests,
			ReadUnits:  txn.Unit.ReadUnits + drain.Unit.ReadUnits,
			WriteUnits: txn.Unit.WriteUnits + drain.Unit.WriteUnits,
		},
		ModelWriteUnits: ptr(*txn.ModelWriteUnits + *drain.ModelWriteUnits),
		Model:           "1 + 2/KB + 1/KB",
	}
	end.Unit.USD = OnDemandPrices.USD(end.Unit.WriteUnits, end.Unit.ReadUnits)
	sc.Paths = []PathCost{single, list, txn, drain, end, join, backlog, stop}
	return sc, nil
}

// count runs fn and returns what the Counter counted meanwhile; pathCost
// turns it into a path's cost.
func (c *costRun) count(path string, fn func() error) (outboxlocal.Counts, error) {
	before := c.b.DynamoDB.Counter.Snapshot()
	if err := fn(); err != nil {
		return outboxlocal.Counts{}, fmt.Errorf("%s: %w", path, err)
	}
	return c.b.DynamoDB.Counter.Snapshot().Since(before), nil
}

func pathCost(path, per string, count int, d outboxlocal.Counts) PathCost {
	p := PathCost{
		Path: path, Per: per, Count: count,
		Requests: d.Requests, ReadUnits: d.ReadUnits, WriteUnits: d.WriteUnits,
	}
	n := float64(count)
	p.Unit = Rate{Requests: float64(d.TotalRequests()) / n, ReadUnits: d.ReadUnits / n, WriteUnits: d.WriteUnits / n}
	p.Unit.USD = OnDemandPrices.USD(p.Unit.WriteUnits, p.Unit.ReadUnits)
	return p
}

func (c *costRun) take(n int) ([]outbox.Message, error) {
	msgs, err := c.work.Messages(c.next, n)
	c.next += n
	return msgs, err
}

func (c *costRun) enqueueSingle(ctx context.Context) (PathCost, error) {
	msgs, err := c.take(c.cfg.Messages)
	if err != nil {
		return PathCost{}, err
	}
	d, err := c.count(PathEnqueue, func() error {
		for _, m := range msgs {
			if _, err := c.writer.Enqueue(ctx, m); err != nil {
				return err
			}
		}
		return nil
	})
	return pathCost(PathEnqueue, "message", len(msgs), d), err
}

func (c *costRun) enqueueList(ctx context.Context) (PathCost, error) {
	msgs, err := c.take(c.cfg.Messages)
	if err != nil {
		return PathCost{}, err
	}
	lists := slices.Collect(slices.Chunk(msgs, c.cfg.ListSize))
	path := fmt.Sprintf("%s of %d", PathEnqueueList, c.cfg.ListSize)
	d, err := c.count(path, func() error {
		for _, list := range lists {
			if _, err := c.writer.EnqueueBatch(ctx, list); err != nil {
				return err
			}
		}
		return nil
	})
	p := pathCost(path, "message", len(msgs), d)
	// The seed's model: one reservation per distinct bucket of a list.
	reservations := 0
	for _, list := range lists {
		buckets := map[int]bool{}
		for _, m := range list {
			b, err := outbox.ComputeBucket(m.Key, m.ID, c.cfg.BucketCount, m.Partition)
			if err != nil {
				return p, err
			}
			buckets[b] = true
		}
		reservations += len(buckets)
	}
	p.ModelWriteUnits = ptr(float64(reservations)/float64(len(msgs)) + 2*c.kb)
	p.Model = fmt.Sprintf("%d reservations/%d + 2/KB", reservations, len(msgs))
	return p, err
}

// transaction measures what the outbox adds to business transactions: the
// same number of one-item business transactions is measured without and
// with an outbox message, and the difference is the outbox's.
func (c *costRun) transaction(ctx context.Context) (PathCost, error) {
	n := c.cfg.Messages
	business := func(prefix string, i int) types.TransactWriteItem {
		return types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String(c.opts.TableName),
			Item: map[string]types.AttributeValue{
				c.opts.PartitionKey: &types.AttributeValueMemberS{Value: fmt.Sprintf("ORDER#%s-%06d", prefix, i)},
				c.opts.SortKey:      &types.AttributeValueMemberS{Value: "ORDER"},
				"Customer":          &types.AttributeValueMemberS{Value: string(bench.Key(i))},
				"Total":             &types.AttributeValueMemberN{Value: "4200"},
			},
		}}
	}
	without, err := c.count("business transactions", func() error {
		for i := range n {
			if _, err := c.b.DynamoDB.Client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
				TransactItems: []types.TransactWriteItem{business("plain", i)},
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return PathCost{}, err
	}
	msgs, err := c.take(n)
	if err != nil {
		return PathCost{}, err
	}
	with, err := c.count(PathTransaction, func() error {
		for i, m := range msgs {
			p, err := c.writer.Prepare(ctx, m)
			if err != nil {
				return err
			}
			items := append([]types.TransactWriteItem{business("outbox", i)}, p.Items()...)
			if _, err := c.b.DynamoDB.Client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}); err != nil {
				return p.Explain(err)
			}
			p.Committed(ctx)
		}
		return nil
	})
	if err != nil {
		return PathCost{}, err
	}
	p := pathCost(PathTransaction, "message", n, with.Since(without))
	p.ModelWriteUnits, p.Model = ptr(1+2*c.kb), "reserve 1 + transactional put 2/KB"
	return p, nil
}

// itemSize reads one message item back and sizes it as DynamoDB bills it.
// Its request is not part of any path.
func (c *costRun) itemSize(ctx context.Context) (int, error) {
	out, err := c.b.DynamoDB.Client.Query(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(c.opts.TableName),
		KeyConditionExpression: aws.String("#pk = :pk"),
		ExpressionAttributeNames: map[string]string{
			"#pk": c.opts.PartitionKey,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("%s#MESSAGES#%d", c.opts.KeyPrefix, c.work.BucketOf(0))},
		},
		Limit:          aws.Int32(1),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return 0, fmt.Errorf("read a message item back: %w", err)
	}
	if len(out.Items) == 0 {
		return 0, fmt.Errorf("read a message item back: bucket %d is empty", c.work.BucketOf(0))
	}
	return outboxddb.ItemSize(out.Items[0]), nil
}

// relay drains every message enqueued so far with one drain-mode relay and
// splits its requests into the run's start (up to the end of the first
// acquisition round), the backlog sample that follows it, the drain (until
// every message is deleted and the relay waits), and the linger and stop
// (the bubble's clock moves from timer to timer until the run returns).
func (c *costRun) relay(ctx context.Context) (join, backlog, drain, stop PathCost, err error) {
	total := c.next
	counter := c.b.DynamoDB.Counter
	obs := &costObserver{counter: counter, total: total, allDeleted: make(chan struct{})}
	kp, err := c.b.NewPublisher(ctx)
	if err != nil {
		return
	}
	defer kp.Close()
	sim, err := lab.NewSim(ctx, c.env)
	if err != nil {
		return
	}
	proc, err := c.b.NewRelay(sim.Context(), relayproc.Config{
		Store: outboxddb.StoreOptions{Options: c.opts}, Publisher: kp, Hooks: []outbox.Hook{obs},
		Relay: outbox.RelayOptions{RelayID: "cost", BucketCount: c.cfg.BucketCount, Mode: outbox.ModeDrain},
	})
	if err != nil {
		return join, backlog, drain, stop, errors.Join(err, sim.Stop())
	}
	start := counter.Snapshot()
	var out outbox.RunResult
	ran := make(chan struct{})
	sim.Go(func(ctx context.Context) error {
		defer close(ran)
		res, err := proc.Relay.Run(ctx, outbox.RunInput{Trigger: outbox.TriggerDirect})
		out = res
		return err
	})
	drained, err := drainThenStop(sim, obs, ran)
	err = errors.Join(err, sim.Stop())
	switch {
	case err != nil:
		return join, backlog, drain, stop, fmt.Errorf("relay run after deleting %d of %d messages: %w", obs.deleted.Load(), total, err)
	case out.Reason != outbox.StopDrained || out.Deleted != total || out.Published != total:
		return join, backlog, drain, stop, fmt.Errorf("relay run: %s, published %d, deleted %d of %d", out.Reason, out.Published, out.Deleted, total)
	}
	joined, sampled, ok := obs.snapshots()
	if !ok {
		return join, backlog, drain, stop, fmt.Errorf("relay run: no acquisition round or backlog sample observed")
	}
	join = pathCost(PathRelayJoin, "run", 1, joined.Since(start))
	backlog = pathCost(PathRelayBacklog, "sample", 1, sampled.Since(joined))
	drain = pathCost(PathRelayDrain, "message", total, drained.Since(sampled))
	drain.ModelWriteUnits, drain.Model = ptr(c.kb), "delete 1/KB"
	stop = pathCost(PathRelayStop, "run", 1, counter.Snapshot().Since(drained))
	return join, backlog, drain, stop, nil
}

// drainThenStop lets the simulation run until the relay deleted every
// message and every participant waits (the drain's end, whose counts it
// returns), then until the run returned.
func drainThenStop(sim *lab.Sim, obs *costObserver, ran <-chan struct{}) (outboxlocal.Counts, error) {
	select {
	case <-obs.allDeleted:
	case <-ran:
		return outboxlocal.Counts{}, errors.New("the relay stopped before deleting every message")
	case <-sim.Context().Done():
		return outboxlocal.Counts{}, sim.Settle()
	}
	if err := sim.Settle(); err != nil {
		return outboxlocal.Counts{}, err
	}
	drained := obs.counter.Snapshot()
	select {
	case <-ran:
	case <-sim.Context().Done():
	}
	return drained, sim.Settle()
}

// costObserver snapshots the Counter at the end of the first acquisition
// round and at the end of the first backlog sample (the relay's own
// goroutine emits both, one after the other, before it probes anything)
// and counts the messages deleted.
type costObserver struct {
	counter *outboxlocal.Counter
	total   int

	mu       sync.Mutex
	atJoin   *outboxlocal.Counts
	atSample *outboxlocal.Counts
	deleted  atomic.Int64
	// allDeleted is closed when the deletes reach total.
	allDeleted chan struct{}
}

// OnRound implements outbox.HookLease.
func (o *costObserver) OnRound(string, time.Duration, lease.Acquisition, error) { o.first(&o.atJoin) }

// OnBacklog implements outbox.HookRun.
func (o *costObserver) OnBacklog(string, int64, time.Duration) { o.first(&o.atSample) }

// OnDelete implements outbox.HookBatch.
func (o *costObserver) OnDelete(_ string, _, deleted int) {
	if o.deleted.Add(int64(deleted)) == int64(o.total) {
		close(o.allDeleted)
	}
}

func (o *costObserver) OnLeases(string, int, int, int)                     {}
func (o *costObserver) OnLeaseLost(string, int, outbox.LossReason)         {}
func (o *costObserver) OnReleaseSkipped(string, int)                       {}
func (o *costObserver) OnRetry(string, time.Duration, error)               {}
func (o *costObserver) OnRunEnd(string, outbox.RunResult)                  {}
func (o *costObserver) OnFetch(string, int, int)                           {}
func (o *costObserver) OnPublish(string, int, int, []time.Duration, error) {}
func (o *costObserver) OnBackoff(string, int, time.Duration, error)        {}
func (o *costObserver) OnHeadRowRetry(string, int)                         {}

var (
	_ outbox.HookLease = (*costObserver)(nil)
	_ outbox.HookBatch = (*costObserver)(nil)
	_ outbox.HookRun   = (*costObserver)(nil)
)

func (o *costObserver) first(at **outboxlocal.Counts) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if *at == nil {
		s := o.counter.Snapshot()
		*at = &s
	}
}

func (o *costObserver) snapshots() (joined, sampled outboxlocal.Counts, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.atJoin == nil || o.atSample == nil {
		return joined, sampled, false
	}
	return *o.atJoin, *o.atSample, true
}

// Tables renders one table per value size.
func (r CostResult) Tables() []lab.Table {
	var out []lab.Table
	for _, s := range r.Sizes {
		t := lab.Table{
			Title: fmt.Sprintf("DynamoDB cost, %d-byte values (message item %d bytes), %d messages per enqueue path, counted by the SDK middleware",
				s.ValueSize, s.ItemSize, r.Config.Messages),
			Header: []string{"path", "per", "requests", "WRU", "RRU", "seed model WRU", "model", "USD per million"},
		}
		for _, p := range s.Paths {
			model := "-"
			if p.ModelWriteUnits != nil {
				model = fmt.Sprintf("%.2f", *p.ModelWriteUnits)
			}
			t.Rows = append(t.Rows, []string{
				p.Path, p.Per, fmt.Sprintf("%.3f", p.Unit.Requests), fmt.Sprintf("%.3f", p.Unit.WriteUnits), fmt.Sprintf("%.3f", p.Unit.ReadUnits),
				model, orDash(p.Model), unitUSD(p.Unit.USD * 1e6),
			})
		}
		t.Notes = []string{
			"WRU/RRU: DynamoDB's sizing rules applied to what the requests carried (1 WRU per KB, x2 in a transaction; 1 RRU per 4 KB strongly",
			"consistent, half eventually consistent; Query sums its items). The seed's model: business transaction 1 + 2 WRU, delete 1, single",
			"enqueue 1 + 1, for an item of at most 1 KB; per KB of item otherwise.",
			"USD per million messages (or runs): " + r.Prices.Source + ".",
		}
		out = append(out, t)
	}
	return out
}

func ptr(v float64) *float64 { return &v }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

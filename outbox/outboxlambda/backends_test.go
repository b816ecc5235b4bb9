package outboxlambda

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// sampleTopics are the topics the sample events in events/ use.
var sampleTopics = []string{"orders", "payments"}

// bundle is one outbox on the embedded backends (or the external ones named
// by SPILLWAY_DYNAMODB_ENDPOINT and SPILLWAY_KAFKA_BROKERS, or in-memory
// ones in a synctest bubble) with a relay
// handler and an enqueue handler wired as the functions wire them, except
// that wake-ups go to a fake Lambda invoker the test reads.
type bundle struct {
	ddb     *outboxlocal.DynamoDB
	kafka   *outboxlocal.Kafka
	cfg     Config
	inv     *fakeInvoker
	relay   *RelayHandler
	enqueue *EnqueueHandler
	// relayStore is the relay's own store; peers get stores of their own.
	relayStore *outboxddb.Store
	// pub is the relay's publisher.
	pub outbox.Publisher
	// clock is every handler's, store's and publisher's clock.
	clock outbox.Clock
}

// bundleOptions adjust setup.
type bundleOptions struct {
	// vars override the environment (durations, mode ...).
	vars map[string]string
	// publisher replaces the Kafka publisher.
	publisher outbox.Publisher
	// inMemory serves both backends in memory, for a test in a synctest
	// bubble: the handlers, stores and publisher run on the bubble's
	// clock, which a socket would keep from moving.
	inMemory bool
}

func setup(t *testing.T, o bundleOptions) *bundle {
	t.Helper()
	var clock outbox.Clock = outbox.SystemClock{}
	var ddbOpts []outboxlocal.DynamoOption
	if o.inMemory {
		ddbOpts = append(ddbOpts, outboxlocal.InMemory())
	}
	b := &bundle{
		ddb:   outboxtest.NewDynamoDB(t, ddbOpts...),
		kafka: outboxtest.NewKafkaWith(t, outboxlocal.KafkaConfig{Topics: sampleTopics, InMemory: o.inMemory}),
		inv:   &fakeInvoker{}, clock: clock,
	}
	vars := map[string]string{
		outboxconf.EnvTable:         outboxtest.CreateTable(t, b.ddb),
		outboxconf.EnvKafkaBrokers:  strings.Join(b.kafka.Brokers, ","),
		outboxconf.EnvRelayFunction: "outbox-relay",
		// A short linger keeps the tests short; the 3-second deadline
		// test sets the default back.
		outboxconf.EnvIdleTimeout:  "200ms",
		outboxconf.EnvPollInterval: "50ms",
	}
	for k, v := range o.vars {
		vars[k] = v
	}
	cfg, err := LoadConfig(env(vars))
	if err != nil {
		t.Fatal(err)
	}
	b.cfg = cfg
	log := testLogger(t)

	pub := o.publisher
	if pub == nil {
		kcfg, err := cfg.KafkaConfig(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		// The cluster's options carry TestClientOpts and, in memory, the
		// dialer.
		kcfg.ExtraOpts, kcfg.Clock = b.kafka.ClientOpts(), clock
		p, err := outboxkafka.New(kcfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		pub = p
	}
	b.relayStore = b.newStore(t)
	notifier, err := NewNotifier(NotifierConfig{Client: b.inv, FunctionName: cfg.RelayFunction, Clock: clock, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	hc := RelayHandlerConfig{Config: cfg, FunctionName: "outbox-relay", Store: b.relayStore, Publisher: pub, Notifier: notifier, Clock: clock, Logger: log}
	if _, ok := cfg.Previous(); ok {
		hc.PreviousStore = b.newStore(t, cfg.PreviousStoreOptions().Options)
	}
	b.pub = pub
	b.relay, err = NewRelayHandler(hc)
	if err != nil {
		t.Fatal(err)
	}
	wopts := cfg.WriterOptions()
	wopts.Notifier, wopts.Logger, wopts.Clock = notifier, log, clock
	writer, err := outboxddb.NewWriter(b.ddb.Client, wopts)
	if err != nil {
		t.Fatal(err)
	}
	// The writer's one read of the layout record, as the function's init
	// does it (NewEnqueueFromEnv), before the tests count requests; a
	// failed read (a missing table) is the first request's, as there.
	_ = writer.CheckLayout(t.Context())
	b.enqueue, err = NewEnqueueHandler(EnqueueHandlerConfig{Config: cfg, Writer: writer, Clock: clock, Logger: log, Getenv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newStore returns another store of the bundle's outbox (a peer relay's),
// or of the outbox opts[0] describes.
func (b *bundle) newStore(t *testing.T, opts ...outboxddb.Options) *outboxddb.Store {
	t.Helper()
	o := b.cfg.StoreOptions()
	if len(opts) > 0 {
		o = outboxddb.StoreOptions{Options: opts[0]}
	}
	o.Logger, o.Clock = testLogger(t), b.clock
	s, err := outboxddb.NewStore(b.ddb.Client, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// topic returns the name a sample topic has on the bundle's cluster.
func (b *bundle) topic(name string) string { return b.kafka.Topic(name) }

// sample reads events/<name>, with sample topics renamed for external
// brokers, where topics get unique names.
func (b *bundle) sample(t *testing.T, name string) json.RawMessage {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "events", name))
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	for _, topic := range sampleTopics {
		s = strings.ReplaceAll(s, `"`+topic+`"`, `"`+b.topic(topic)+`"`)
	}
	return json.RawMessage(s)
}

// leaseItem is one lease as stored.
type leaseItem struct {
	owner   string // "" when free
	expires time.Time
}

// leases returns every lease item of the outbox by bucket, read
// consistently.
func (b *bundle) leases(t *testing.T) map[int]leaseItem {
	t.Helper()
	out, err := b.ddb.Client.Query(t.Context(), &dynamodb.QueryInput{
		TableName:                 aws.String(b.cfg.Table),
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :lease)"),
		ExpressionAttributeNames:  map[string]string{"#pk": b.cfg.PartitionKey, "#sk": b.cfg.SortKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(b.cfg.KeyPrefix + "#COORDINATION"), ":lease": str("LEASE#")},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	leases := map[int]leaseItem{}
	for _, item := range out.Items {
		sk := item[b.cfg.SortKey].(*types.AttributeValueMemberS).Value
		bucket, err := strconv.Atoi(strings.TrimPrefix(sk, "LEASE#"))
		if err != nil {
			t.Fatalf("lease sort key %q: %v", sk, err)
		}
		var l leaseItem
		if o, ok := item["Owner"].(*types.AttributeValueMemberS); ok {
			l.owner = o.Value
		}
		if e, ok := item["ExpiresAtUtc"].(*types.AttributeValueMemberN); ok {
			ticks, err := strconv.ParseInt(e.Value, 10, 64)
			if err != nil {
				t.Fatalf("lease %d expiry %q: %v", bucket, e.Value, err)
			}
			l.expires = lease.TimeFromTicks(ticks)
		}
		leases[bucket] = l
	}
	return leases
}

// appliesRemove reports whether the DynamoDB endpoint applies an
// UpdateItem's REMOVE action. The embedded server (minidyn v0.8.2)
// evaluates it but leaves the attribute in place, so a released lease keeps
// its Owner there while its expiry is set to the release time; outboxlocal
// does not compensate that yet.
func (b *bundle) appliesRemove(t *testing.T) bool {
	t.Helper()
	key := map[string]types.AttributeValue{b.cfg.PartitionKey: str("SPILLWAY-TEST#PROBE"), b.cfg.SortKey: str("REMOVE")}
	item := map[string]types.AttributeValue{b.cfg.PartitionKey: key[b.cfg.PartitionKey], b.cfg.SortKey: key[b.cfg.SortKey], "Probe": str("x")}
	if _, err := b.ddb.Client.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(b.cfg.Table), Item: item}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ddb.Client.UpdateItem(t.Context(), &dynamodb.UpdateItemInput{
		TableName: aws.String(b.cfg.Table), Key: key, UpdateExpression: aws.String("REMOVE Probe"),
	}); err != nil {
		t.Fatal(err)
	}
	got, err := b.ddb.Client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(b.cfg.Table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	_, kept := got.Item["Probe"]
	return !kept
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

package steady

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// Kinds of coordination writes.
const (
	KindHeartbeat    = "heartbeat"
	KindKeep         = "keep"
	KindClaim        = "claim"
	KindRelease      = "release"
	KindRenew        = "renew"
	KindStopped      = "stopped stamp"
	KindPrune        = "prune"
	KindLeaseOther   = "other lease write"
	KindTrustCheck   = "trust check"
	KindRoundRead    = "round read"
	KindStopRead     = "stop re-read"
	KindOtherRead    = "other read"
	KindOwnerView    = "writer owner view"
	kindMessageRead  = "message read"
	kindMessageWrite = "message write"
)

// storeMethod names the outbox.Store call a request belongs to; envStore
// puts it in the context so simClient can tell a keep from a renewal.
type storeMethod string

type storeMethodKey struct{}

const (
	methodAcquire storeMethod = "acquire"
	methodRenew   storeMethod = "renew"
	methodRelease storeMethod = "release"
	methodRead    storeMethod = "read"
	// methodOwnerView is a writer's notifier reading who holds the buckets.
	methodOwnerView storeMethod = "owner view"
)

func withMethod(ctx context.Context, m storeMethod) context.Context {
	return context.WithValue(ctx, storeMethodKey{}, m)
}

func methodOf(ctx context.Context) storeMethod {
	m, _ := ctx.Value(storeMethodKey{}).(storeMethod)
	return m
}

// request is one classified DynamoDB request.
type request struct {
	coordination bool
	write        bool
	kind         string
}

// simClient is the DynamoDB client of every simulated process: each request
// first sleeps its round trip on the bubble's clock, is then sent to the
// in-memory server (applied at the end of its round trip, in no simulated
// time), and is classified and counted in the ledger.
type simClient struct {
	inner outboxddb.Client
	s     *sim
	// pk is the partition key attribute, coordination the coordination
	// partition's key value.
	pk, coordination string
}

var _ outboxddb.Client = (*simClient)(nil)

func roundTrip[I, O any](c *simClient, ctx context.Context, in I, class request,
	send func(context.Context, I, ...func(*dynamodb.Options)) (O, error), optFns []func(*dynamodb.Options)) (O, error) {
	var zero O
	if !outbox.Sleep(c.s.cfg.Latency.DynamoDB, ctx.Done()) {
		return zero, context.Cause(ctx)
	}
	out, err := send(ctx, in, optFns...)
	c.s.ledger.request(class, c.s.clock.Now(), refused(err))
	return out, err
}

// refused reports a refused conditional write.
func refused(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return true
	}
	var tce *types.TransactionCanceledException
	if errors.As(err, &tce) {
		for _, r := range tce.CancellationReasons {
			if aws.ToString(r.Code) == "ConditionalCheckFailed" {
				return true
			}
		}
	}
	return false
}

func (c *simClient) partitionOf(key map[string]types.AttributeValue) string {
	if v, ok := key[c.pk].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// mentionsCoordination reports whether a query's expression values name
// the coordination partition.
func (c *simClient) mentionsCoordination(values map[string]types.AttributeValue) bool {
	for _, v := range values {
		if s, ok := v.(*types.AttributeValueMemberS); ok && s.Value == c.coordination {
			return true
		}
	}
	return false
}

// leaseWriteKind tells the lease writes apart: the store method says
// whether a round, a renewal or a stop sent it, and within a round the
// guard's values tell a keep (owner and seen expiry, new expiry), a release
// (owner and seen expiry, now) and a claim (now and new expiry).
func leaseWriteKind(m storeMethod, values map[string]types.AttributeValue) string {
	_, seen := values[":seen"]
	_, expiry := values[":expiry"]
	switch m {
	case methodRenew:
		return KindRenew
	case methodRelease:
		return KindRelease
	case methodAcquire:
		switch {
		case seen && expiry:
			return KindKeep
		case seen:
			return KindRelease
		default:
			return KindClaim
		}
	}
	return KindLeaseOther
}

func (c *simClient) readKind(ctx context.Context) string {
	switch methodOf(ctx) {
	case methodRead:
		return KindTrustCheck
	case methodAcquire:
		return KindRoundRead
	case methodRelease:
		return KindStopRead
	case methodOwnerView:
		return KindOwnerView
	}
	return KindOtherRead
}

func (c *simClient) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	class := request{kind: kindMessageRead}
	if c.mentionsCoordination(in.ExpressionAttributeValues) {
		class = request{coordination: true, kind: c.readKind(ctx)}
	}
	return roundTrip(c, ctx, in, class, c.inner.Query, optFns)
}

func (c *simClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	class := request{write: true, kind: kindMessageWrite}
	if c.partitionOf(in.Item) == c.coordination {
		// A heartbeat only moves forward (conditional); the stopped stamp
		// is written unconditionally.
		class = request{coordination: true, write: true, kind: KindHeartbeat}
		if in.ConditionExpression == nil {
			class.kind = KindStopped
		}
	}
	return roundTrip(c, ctx, in, class, c.inner.PutItem, optFns)
}

func (c *simClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	class := request{write: true, kind: kindMessageWrite}
	if c.partitionOf(in.Key) == c.coordination {
		class = request{coordination: true, write: true, kind: leaseWriteKind(methodOf(ctx), in.ExpressionAttributeValues)}
	}
	return roundTrip(c, ctx, in, class, c.inner.UpdateItem, optFns)
}

func (c *simClient) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	class := request{write: true, kind: kindMessageWrite}
	if c.partitionOf(in.Key) == c.coordination {
		class = request{coordination: true, write: true, kind: KindPrune}
	}
	return roundTrip(c, ctx, in, class, c.inner.DeleteItem, optFns)
}

func (c *simClient) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	class := request{write: true, kind: kindMessageWrite}
	for _, writes := range in.RequestItems {
		for _, w := range writes {
			if (w.DeleteRequest != nil && c.partitionOf(w.DeleteRequest.Key) == c.coordination) ||
				(w.PutRequest != nil && c.partitionOf(w.PutRequest.Item) == c.coordination) {
				class = request{coordination: true, write: true, kind: KindLeaseOther}
			}
		}
	}
	return roundTrip(c, ctx, in, class, c.inner.BatchWriteItem, optFns)
}

func (c *simClient) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return roundTrip(c, ctx, in, request{write: true, kind: kindMessageWrite}, c.inner.TransactWriteItems, optFns)
}

// CreateTable and DescribeTable are set-up calls: not timed, not counted.
func (c *simClient) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return c.inner.CreateTable(ctx, in, optFns...)
}

func (c *simClient) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return c.inner.DescribeTable(ctx, in, optFns...)
}

package steady

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/internal/lab"
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

// storeMethod names the outbox.Store call a request belongs to; the
// environment's observed store (newEnvStore) puts it in the context so the classifier can tell a keep from a renewal.
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

// classifier is the observer of every simulated process's DynamoDB client
// (a lab.Client, whose requests each take their round trip on the bubble's
// clock and are applied by the in-memory server at its end): it classifies
// each request and counts it in the ledger.
type classifier struct {
	ledger *ledger
	// pk is the partition key attribute, coordination the coordination
	// partition's key value.
	pk, coordination string
}

// observe is the lab.Client's Observe hook.
func (c classifier) observe(ctx context.Context, r lab.Request) {
	c.ledger.request(c.classify(ctx, r.In), r.At, refused(r.Err))
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

func (c classifier) partitionOf(key map[string]types.AttributeValue) string {
	if v, ok := key[c.pk].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// mentionsCoordination reports whether a query's expression values name
// the coordination partition.
func (c classifier) mentionsCoordination(values map[string]types.AttributeValue) bool {
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

func (c classifier) readKind(ctx context.Context) string {
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

// classify tells a request's partition and kind from its input and, for
// the coordination partition, the store call that sent it.
func (c classifier) classify(ctx context.Context, in any) request {
	switch in := in.(type) {
	case *dynamodb.QueryInput:
		if c.mentionsCoordination(in.ExpressionAttributeValues) {
			return request{coordination: true, kind: c.readKind(ctx)}
		}
		return request{kind: kindMessageRead}
	case *dynamodb.PutItemInput:
		if c.partitionOf(in.Item) == c.coordination {
			// A heartbeat only moves forward (conditional); the stopped
			// stamp is written unconditionally.
			if in.ConditionExpression == nil {
				return request{coordination: true, write: true, kind: KindStopped}
			}
			return request{coordination: true, write: true, kind: KindHeartbeat}
		}
	case *dynamodb.UpdateItemInput:
		if c.partitionOf(in.Key) == c.coordination {
			return request{coordination: true, write: true, kind: leaseWriteKind(methodOf(ctx), in.ExpressionAttributeValues)}
		}
	case *dynamodb.DeleteItemInput:
		if c.partitionOf(in.Key) == c.coordination {
			return request{coordination: true, write: true, kind: KindPrune}
		}
	case *dynamodb.BatchWriteItemInput:
		for _, writes := range in.RequestItems {
			for _, w := range writes {
				if (w.DeleteRequest != nil && c.partitionOf(w.DeleteRequest.Key) == c.coordination) ||
					(w.PutRequest != nil && c.partitionOf(w.PutRequest.Item) == c.coordination) {
					return request{coordination: true, write: true, kind: KindLeaseOther}
				}
			}
		}
	}
	// Any other write (a commit's TransactWriteItems) is message traffic.
	return request{write: true, kind: kindMessageWrite}
}

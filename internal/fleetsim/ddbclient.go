package fleetsim

import (
	"context"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// sdkMaxAttempts and sdkMaxBackoff are the retry policy of the processes'
// clients: outboxlocal's for the embedded server (DefaultMaxAttempts, a
// few milliseconds at most between attempts).
const (
	sdkMaxAttempts = outboxlocal.DefaultMaxAttempts
	sdkMaxBackoff  = 5 * time.Millisecond
)

// newClient returns the client of the process named name: the endpoint's
// Counter and Faults, a retryer whose backoff jitter is drawn from the
// seed and name, so that a seed's retries wait the same whatever the
// interleaving of the processes, and, as every client of the lab
// (lab.Client), a round trip of its own on the bubble's clock before each
// request reaches the endpoint; its answer pokes the driver. When gone
// closes (a crash), a request still in its round trip never arrives.
func (s *sim) newClient(name string, gone <-chan struct{}) outboxddb.Client {
	latency := roundTrip(s.cfg.Seed, name)
	sdk := s.ddb.NewClient(func(o *dynamodb.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = sdkMaxAttempts
			so.MaxBackoff = sdkMaxBackoff
			so.Backoff = seededBackoff(s.cfg.Seed, name)
			so.RateLimiter = ratelimit.None
		})
	})
	return &lab.Client{Inner: sdk, Latency: func(in any) time.Duration { return latency + requestStagger(in) },
		Observe: func(context.Context, lab.Request) { s.lab.Poke() }, Gone: gone}
}

// roundTrip is the simulated round trip of process name's requests,
// between 1 and 2 ms, drawn from the seed and the name. Processes that
// send at one instant (writers on the workload's 50 ms grid, relays on
// their rounds) reach the server at distinct instants, one after the
// other, instead of in whatever order the scheduler runs them.
func roundTrip(seed uint64, name string) time.Duration {
	return time.Millisecond + time.Duration(newRand(seed, "round-trip/"+name).Int64N(int64(time.Millisecond)))
}

// requestStagger adds to a request's round trip less than a millisecond
// drawn from the items it names (a hash of their keys and attributes): the
// requests one process sends at one instant (a writer's reservations in
// several buckets, a store's queries of several buckets) then reach the
// server one after the other in an order the seed fixes, not in the order
// the scheduler runs their goroutines; that order decides, for instance,
// which of them an injected fault on the next request of an operation
// hits.
func requestStagger(params any) time.Duration {
	h := fnv.New64a()
	item := func(m map[string]types.AttributeValue) {
		for _, name := range slices.Sorted(maps.Keys(m)) {
			_, _ = h.Write([]byte(name))
			switch v := m[name].(type) {
			case *types.AttributeValueMemberS:
				_, _ = h.Write([]byte(v.Value))
			case *types.AttributeValueMemberN:
				_, _ = h.Write([]byte(v.Value))
			case *types.AttributeValueMemberB:
				_, _ = h.Write(v.Value)
			}
		}
	}
	switch p := params.(type) {
	case *dynamodb.GetItemInput:
		item(p.Key)
	case *dynamodb.PutItemInput:
		item(p.Item)
	case *dynamodb.UpdateItemInput:
		item(p.Key)
	case *dynamodb.DeleteItemInput:
		item(p.Key)
	case *dynamodb.QueryInput:
		item(p.ExpressionAttributeValues)
		item(p.ExclusiveStartKey)
	case *dynamodb.BatchWriteItemInput:
		for _, table := range slices.Sorted(maps.Keys(p.RequestItems)) {
			for _, w := range p.RequestItems[table] {
				if w.PutRequest != nil {
					item(w.PutRequest.Item)
				}
				if w.DeleteRequest != nil {
					item(w.DeleteRequest.Key)
				}
			}
		}
	case *dynamodb.TransactWriteItemsInput:
		for _, w := range p.TransactItems {
			switch {
			case w.Put != nil:
				item(w.Put.Item)
			case w.Update != nil:
				item(w.Update.Key)
			case w.Delete != nil:
				item(w.Delete.Key)
			case w.ConditionCheck != nil:
				item(w.ConditionCheck.Key)
			}
		}
	}
	return time.Duration(h.Sum64() % uint64(time.Millisecond))
}

// seededBackoff is the SDK's exponential jitter backoff below
// sdkMaxBackoff, its jitter a function of the seed, the client name and the
// attempt instead of crypto/rand: a client's retries of one attempt
// number wait alike, whichever of its goroutines retries first.
func seededBackoff(seed uint64, name string) retry.BackoffDelayerFunc {
	return func(attempt int, _ error) (time.Duration, error) {
		r := newRand(seed, "sdk-backoff/"+name, uint64(attempt))
		return time.Duration(r.Int64N(int64(min(sdkMaxBackoff, time.Second<<min(attempt, 30))))), nil
	}
}

// clientOptions are the options of every client of the embedded server:
// no request signing (the server ignores signatures, and signing would
// only cost time).
func clientOptions(o *dynamodb.Options) { o.Credentials = aws.AnonymousCredentials{} }

// rawClient is a client of the endpoint without the Counter and Faults:
// the harness's own checks must not appear in the figures or be faulted.
func rawClient(d *outboxlocal.DynamoDB) *dynamodb.Client {
	return d.NewClient(func(o *dynamodb.Options) { o.APIOptions = nil })
}

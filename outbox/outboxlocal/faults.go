package outboxlocal

import (
	"bytes"
	"context"
	"hash/crc32"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/spillway-dev/spillway/outbox/internal/sleep"
)

// Throttling error types a fault can answer with.
const (
	// ThroughputExceeded is DynamoDB's ProvisionedThroughputExceededException.
	ThroughputExceeded = "ProvisionedThroughputExceededException"
	// Throttling is DynamoDB's ThrottlingException.
	Throttling = "ThrottlingException"
)

// AnyOperation makes Latency apply to every operation.
const AnyOperation = ""

// Faults injects failures into the requests of the clients it is attached
// to. It is SDK middleware, so every fault works against the embedded
// server and against an external endpoint alike; it is safe for concurrent
// use. A fault answers as DynamoDB would on the wire (an HTTP error with a
// JSON error body), so the SDK's own deserializers and retryer handle it.
type Faults struct {
	book    *schemaBook
	counter *Counter

	mu          sync.Mutex
	throttles   map[string][]string // op → error types of the next attempts
	unprocessed int
	hidden      []hiddenItem
	latency     map[string]time.Duration
	losses      map[string]int
	// afterLoss are the throttles armed once op's next loss happened.
	afterLoss map[string]int
	staleLag  time.Duration
	written   map[string]time.Time // table, item id → write time, while staleLag > 0
}

type hiddenItem struct{ pk, sk string }

func newFaults(book *schemaBook, counter *Counter) *Faults {
	return &Faults{
		book:      book,
		counter:   counter,
		throttles: map[string][]string{},
		latency:   map[string]time.Duration{},
		losses:    map[string]int{},
		afterLoss: map[string]int{},
		written:   map[string]time.Time{},
	}
}

// ThrottleNext makes the next n attempts of op (an operation name such as
// "BatchWriteItem") fail with ProvisionedThroughputExceededException without
// reaching the server. The SDK retries them when its retryer allows.
func (f *Faults) ThrottleNext(op string, n int) { f.ThrottleNextWith(op, n, ThroughputExceeded) }

// ThrottleNextWith is ThrottleNext with another error type, such as
// Throttling.
func (f *Faults) ThrottleNextWith(op string, n int, errorType string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.throttles[op] = append(f.throttles[op], errorType)
	}
}

// UnprocessedDeletes makes the next BatchWriteItem leave its last n delete
// requests unprocessed: only the other requests are sent, and the held ones
// come back in UnprocessedItems, as DynamoDB does when it cannot process
// them all.
func (f *Faults) UnprocessedDeletes(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unprocessed += n
}

// HideFromNextQuery removes the item with partition key pk and sort key sk
// from the next Query response that contains it, once, on any endpoint: a
// test's deterministic stand-in for a query that overlaps the item's
// transaction. Counts (Select=COUNT) are left alone; WithReadCommitted
// models the commit itself, counts included, on the embedded server.
func (f *Faults) HideFromNextQuery(pk, sk string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hidden = append(f.hidden, hiddenItem{pk, sk})
}

// Latency delays every attempt of op (AnyOperation: every operation) by d
// on the time package's clock (a bubble's, in a simulation) before it is
// sent, until set to zero. A context that ends first fails the attempt.
func (f *Faults) Latency(op string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d <= 0 {
		delete(f.latency, op)
		return
	}
	f.latency[op] = d
}

// LoseResponse makes the next attempt of op reach the server and be
// applied, then answers it with a 500 InternalServerError, as when the
// response is lost: the SDK retries a request that already took effect.
func (f *Faults) LoseResponse(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.losses[op]++
}

// LoseResponseThenThrottle is LoseResponse followed by n throttled
// attempts of op: the request took effect, and the SDK's retries of it are
// throttled until it gives up, so the caller gets an error for a write that
// happened.
func (f *Faults) LoseResponseThenThrottle(op string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.losses[op]++
	f.afterLoss[op] += n
}

// Clear removes every pending fault.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.throttles)
	clear(f.latency)
	clear(f.losses)
	clear(f.afterLoss)
	clear(f.written)
	f.unprocessed = 0
	f.hidden = nil
	f.staleLag = 0
}

func (f *Faults) takeThrottle(op string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.throttles[op]
	if len(q) == 0 {
		return "", false
	}
	f.throttles[op] = q[1:]
	return q[0], true
}

func (f *Faults) takeLoss(op string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.losses[op] == 0 {
		return false
	}
	f.losses[op]--
	for range f.afterLoss[op] {
		f.throttles[op] = append(f.throttles[op], ThroughputExceeded)
	}
	delete(f.afterLoss, op)
	return true
}

func (f *Faults) takeUnprocessed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.unprocessed
	f.unprocessed = 0
	return n
}

func (f *Faults) delay(op string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := f.latency[op]; ok {
		return d
	}
	return f.latency[AnyOperation]
}

// transport is the innermost deserialize middleware: it stands between the
// SDK and the HTTP round trip of every attempt.
func (f *Faults) transport() middleware.DeserializeMiddleware {
	return middleware.DeserializeMiddlewareFunc("spillway:Faults", func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
		op := middleware.GetOperationName(ctx)
		if d := f.delay(op); d > 0 && !sleep.For(d, ctx.Done()) {
			return middleware.DeserializeOutput{}, middleware.Metadata{}, ctx.Err()
		}
		scoped := f.scopedLossFor(ctx, op)
		if scoped.takeThrottle() {
			return fabricated(in, apiError(http.StatusBadRequest, typeThroughputExceed, "Injected by outboxlocal.Faults: the request rate is too high")), middleware.Metadata{}, nil
		}
		if errorType, ok := f.takeThrottle(op); ok {
			typ := typeThroughputExceed
			if errorType == Throttling {
				typ = typeThrottling
			} else if errorType != ThroughputExceeded {
				typ = errorType
			}
			return fabricated(in, apiError(http.StatusBadRequest, typ, "Injected by outboxlocal.Faults: the request rate is too high")), middleware.Metadata{}, nil
		}
		out, md, err := next.HandleDeserialize(ctx, in)
		if err != nil || !(scoped.takeLoss() || f.takeLoss(op)) {
			return out, md, err
		}
		if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && resp.Body != nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
		return fabricated(in, apiError(http.StatusInternalServerError, typeInternalServer, "Injected by outboxlocal.Faults: the response was lost after the request was applied")), md, nil
	})
}

// fabricated is an HTTP response made without a round trip, with the
// checksum header DynamoDB sends.
func fabricated(in middleware.DeserializeInput, resp wireResponse) middleware.DeserializeOutput {
	h := http.Header{}
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(resp.body)), 10))
	h.Set("X-Amzn-Requestid", newRequestID())
	r := &http.Response{
		Status:        strconv.Itoa(resp.status) + " " + http.StatusText(resp.status),
		StatusCode:    resp.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(resp.body)),
		ContentLength: int64(len(resp.body)),
	}
	if req, ok := in.Request.(*smithyhttp.Request); ok {
		r.Request = req.Request
	}
	return middleware.DeserializeOutput{RawResponse: &smithyhttp.Response{Response: r}}
}

// operations is the outermost initialize middleware: it rewrites a whole
// operation's input or output once, whatever the retries.
func (f *Faults) operations() middleware.InitializeMiddleware {
	return middleware.InitializeMiddlewareFunc("spillway:FaultsOperation", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		var (
			out middleware.InitializeOutput
			md  middleware.Metadata
			err error
		)
		if params, ok := in.Parameters.(*dynamodb.BatchWriteItemInput); ok {
			if n := f.takeUnprocessed(); n > 0 {
				out, md, err = f.holdDeletes(ctx, in, next, params, n)
			} else {
				out, md, err = next.HandleInitialize(ctx, in)
			}
		} else {
			out, md, err = next.HandleInitialize(ctx, in)
		}
		if err != nil {
			return out, md, err
		}
		if params, ok := in.Parameters.(*dynamodb.QueryInput); ok {
			if res, ok := out.Result.(*dynamodb.QueryOutput); ok {
				f.hide(aws.ToString(params.TableName), res)
			}
		}
		f.noteWrites(in.Parameters)
		f.staleRead(in.Parameters, out.Result)
		return out, md, err
	})
}

// holdDeletes sends a copy of the batch without its last n deletes and
// returns them as unprocessed. A batch left empty is not sent: the answer
// is made here and counted as a request.
func (f *Faults) holdDeletes(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler, params *dynamodb.BatchWriteItemInput, n int) (middleware.InitializeOutput, middleware.Metadata, error) {
	sent := *params
	sent.RequestItems = map[string][]types.WriteRequest{}
	held := map[string][]types.WriteRequest{}
	tables := sortedKeys(params.RequestItems)
	slices.Reverse(tables)
	for _, table := range tables {
		keep := slices.Clone(params.RequestItems[table])
		for i := len(keep) - 1; i >= 0 && n > 0; i-- {
			if keep[i].DeleteRequest != nil {
				held[table] = append([]types.WriteRequest{keep[i]}, held[table]...)
				keep = slices.Delete(keep, i, i+1)
				n--
			}
		}
		if len(keep) > 0 {
			sent.RequestItems[table] = keep
		}
	}
	if len(sent.RequestItems) == 0 {
		f.counter.recordUnsent("BatchWriteItem")
		return middleware.InitializeOutput{Result: &dynamodb.BatchWriteItemOutput{UnprocessedItems: held}}, middleware.Metadata{}, nil
	}
	in.Parameters = &sent
	out, md, err := next.HandleInitialize(ctx, in)
	if res, ok := out.Result.(*dynamodb.BatchWriteItemOutput); ok && err == nil {
		if res.UnprocessedItems == nil {
			res.UnprocessedItems = map[string][]types.WriteRequest{}
		}
		for table, writes := range held {
			res.UnprocessedItems[table] = append(res.UnprocessedItems[table], writes...)
		}
	}
	return out, md, err
}

// hide removes the first armed item found in a query page.
func (f *Faults) hide(table string, out *dynamodb.QueryOutput) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for h := 0; h < len(f.hidden); h++ {
		i := slices.IndexFunc(out.Items, func(item map[string]types.AttributeValue) bool {
			return f.book.matches(table, item, f.hidden[h].pk, f.hidden[h].sk)
		})
		if i < 0 {
			continue
		}
		out.Items = slices.Delete(out.Items, i, i+1)
		out.Count--
		if out.ScannedCount > 0 {
			out.ScannedCount--
		}
		f.hidden = slices.Delete(f.hidden, h, h+1)
		h--
	}
}

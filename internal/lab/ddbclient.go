package lab

import (
	"context"
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// Client is the DynamoDB client of a simulation's processes: every request
// first waits its round trip on the bubble's clock (Latency), is then sent
// to Inner, the in-memory backend, which applies it at the end of its round
// trip in no simulated time, and Observe is told of it. A request whose
// context ends during its round trip is never sent, nor observed. The
// set-up calls (CreateTable, DescribeTable, and requests in a context
// marked with SetUp) go straight to Inner: no round trip, not observed.
type Client struct {
	// Inner applies the requests (required).
	Inner outboxddb.Client
	// Latency returns the round trip of request in (the operation's input,
	// as *dynamodb.QueryInput). Default: none, the request is sent at once.
	Latency func(in any) time.Duration
	// Observe, when set, is told of every request sent, once Inner has
	// answered; it runs in the sender's goroutine, before the sender sees
	// the answer, so that time has not moved since the request was applied.
	Observe func(ctx context.Context, r Request)
	// Gone, when it closes, ends the process: a request still in its
	// round trip is never sent, whatever its context (a process killed
	// mid-request, as opposed to one that stops and lets its requests
	// finish). Optional.
	Gone <-chan struct{}
}

// errGone is what a request of a process that is gone returns.
var errGone = errors.New("lab: the process is gone")

// Request is one request a Client sent: its input and output (the
// operation's, as *dynamodb.QueryInput and *dynamodb.QueryOutput), Inner's
// error and the instant it was applied, on the bubble's clock.
type Request struct {
	In, Out any
	Err     error
	At      time.Time
}

var _ outboxddb.Client = (*Client)(nil)

// setUpKey marks a context whose requests are set-up calls.
type setUpKey struct{}

// SetUp marks ctx's requests as set-up calls, as CreateTable is: sent at
// once, not observed. A process's one-time reads before its traffic (a
// writer's read of the table's layout record) use it, so that a study
// measures the traffic it simulates.
func SetUp(ctx context.Context) context.Context { return context.WithValue(ctx, setUpKey{}, true) }

func roundTrip[I, O any](c *Client, ctx context.Context, in I,
	send func(context.Context, I, ...func(*dynamodb.Options)) (O, error), optFns []func(*dynamodb.Options)) (O, error) {
	if ctx.Value(setUpKey{}) != nil {
		return send(ctx, in, optFns...)
	}
	if d := c.latency(in); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		var zero O
		select {
		case <-t.C:
		case <-ctx.Done():
			return zero, context.Cause(ctx)
		case <-c.Gone:
			return zero, errGone
		}
	}
	out, err := send(ctx, in, optFns...)
	if c.Observe != nil {
		c.Observe(ctx, Request{In: in, Out: out, Err: err, At: time.Now()})
	}
	return out, err
}

func (c *Client) latency(in any) time.Duration {
	if c.Latency == nil {
		return 0
	}
	return c.Latency(in)
}

// Query implements outboxddb.Client.
func (c *Client) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return roundTrip(c, ctx, in, c.Inner.Query, optFns)
}

// PutItem implements outboxddb.Client.
func (c *Client) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return roundTrip(c, ctx, in, c.Inner.PutItem, optFns)
}

// UpdateItem implements outboxddb.Client.
func (c *Client) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return roundTrip(c, ctx, in, c.Inner.UpdateItem, optFns)
}

// DeleteItem implements outboxddb.Client.
func (c *Client) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return roundTrip(c, ctx, in, c.Inner.DeleteItem, optFns)
}

// BatchWriteItem implements outboxddb.Client.
func (c *Client) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return roundTrip(c, ctx, in, c.Inner.BatchWriteItem, optFns)
}

// TransactWriteItems implements outboxddb.Client.
func (c *Client) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return roundTrip(c, ctx, in, c.Inner.TransactWriteItems, optFns)
}

// TransactGetItems implements outboxddb.Client.
func (c *Client) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	return roundTrip(c, ctx, in, c.Inner.TransactGetItems, optFns)
}

// CreateTable is a set-up call: sent at once, not observed.
func (c *Client) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return c.Inner.CreateTable(ctx, in, optFns...)
}

// DescribeTable is a set-up call: sent at once, not observed.
func (c *Client) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return c.Inner.DescribeTable(ctx, in, optFns...)
}

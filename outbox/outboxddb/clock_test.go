package outboxddb

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/outbox"
)

// stepClock is a clock for unit tests: Now stays put until a test moves
// it. Waits are the time package's; a test that asserts them runs in a
// synctest bubble and reads them as elapsed bubble time.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

var _ outbox.Clock = (*stepClock)(nil)

func newStepClock(t time.Time) *stepClock { return &stepClock{now: t} }

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// batchWrites is a Client that notes the bubble time of every
// BatchWriteItem and runs before, if set, ahead of each: the waits between
// a retry loop's attempts are the gaps between the times, since the
// in-memory DynamoDB answers in no bubble time.
type batchWrites struct {
	Client
	before func()

	mu    sync.Mutex
	times []time.Time
}

func (c *batchWrites) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	c.mu.Lock()
	c.times = append(c.times, time.Now())
	c.mu.Unlock()
	if c.before != nil {
		c.before()
	}
	return c.Client.BatchWriteItem(ctx, in, optFns...)
}

// waits returns the gaps between consecutive BatchWriteItem calls.
func (c *batchWrites) waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for i := 1; i < len(c.times); i++ {
		out = append(out, c.times[i].Sub(c.times[i-1]))
	}
	return out
}

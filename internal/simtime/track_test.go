package simtime

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/spillway-dev/spillway/outbox"
)

type httpFunc func(*http.Request) (*http.Response, error)

func (f httpFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

func TestDynamoDBOptionCountsTheOperationInFlight(t *testing.T) {
	a := NewActivity()
	during := int64(-1)
	client := dynamodb.New(dynamodb.Options{
		Region: "us-east-1", BaseEndpoint: aws.String("http://127.0.0.1:1"), Credentials: aws.AnonymousCredentials{}, RetryMaxAttempts: 1,
		HTTPClient: httpFunc(func(*http.Request) (*http.Response, error) {
			during = a.InFlight()
			return nil, errors.New("no network in this test")
		}),
	}, a.DynamoDBOption())
	if _, err := client.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String("t")}); err == nil {
		t.Fatal("DescribeTable succeeded without a server")
	}
	if during != 1 || a.InFlight() != 0 {
		t.Fatalf("in flight %d during the request and %d after it, want 1 and 0", during, a.InFlight())
	}
}

// probePublisher records the calls in flight it sees from inside each call.
type probePublisher struct {
	a      *Activity
	during []int64
}

func (p *probePublisher) Init(context.Context) error {
	p.during = append(p.during, p.a.InFlight())
	return errors.New("init refused")
}

func (p *probePublisher) Publish(_ context.Context, msgs []outbox.Message) (int, error) {
	p.during = append(p.during, p.a.InFlight())
	return len(msgs) - 1, errors.New("last record refused")
}

func TestPublisherCountsEachCallInFlight(t *testing.T) {
	a := NewActivity()
	probe := &probePublisher{a: a}
	pub := Publisher(a, probe)
	if err := pub.Init(t.Context()); err == nil || err.Error() != "init refused" {
		t.Fatalf("Init: %v, want the publisher's own error", err)
	}
	n, err := pub.Publish(t.Context(), make([]outbox.Message, 3))
	if n != 2 || err == nil {
		t.Fatalf("Publish: %d, %v, want the publisher's 2 and its error", n, err)
	}
	if !slices.Equal(probe.during, []int64{1, 1}) || a.InFlight() != 0 {
		t.Fatalf("in flight %v during the calls and %d after them, want [1 1] and 0", probe.during, a.InFlight())
	}
}

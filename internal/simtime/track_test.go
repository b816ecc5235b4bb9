package simtime

import (
	"errors"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
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

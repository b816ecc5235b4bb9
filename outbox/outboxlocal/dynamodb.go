package outboxlocal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// Defaults of the DynamoDB clients the helpers build.
const (
	// DefaultRegion is the region of the clients (the embedded server
	// ignores it; an external endpoint uses AWS_REGION when set).
	DefaultRegion = "us-east-1"
	// DefaultMaxAttempts is the default number of attempts per operation:
	// one retry covers a lost response, a second a throttle.
	DefaultMaxAttempts = 3
	// embeddedMaxBackoff bounds the retry delay on loopback.
	embeddedMaxBackoff = 5 * time.Millisecond
	// externalMaxBackoff bounds the retry delay against a real endpoint.
	externalMaxBackoff = time.Second
	// cleanupTimeout bounds the deletion of tables at Close.
	cleanupTimeout = 30 * time.Second
)

// DynamoOption configures StartDynamoDB and NewDynamoDB.
type DynamoOption func(*dynamoConfig)

type dynamoConfig struct {
	endpoint       string
	ignoreEnv      bool
	maxAttempts    int
	noThrottleRetr bool
	reportCapacity bool
	inMemory       bool
	roundTrip      RoundTrip
	readCommitted  *ReadCommitted
	clientOptions  []func(*dynamodb.Options)
}

// WithEndpoint uses the DynamoDB endpoint at url (DynamoDB Local,
// LocalStack, a regional endpoint) instead of the embedded server. By
// default the endpoint comes from SPILLWAY_DYNAMODB_ENDPOINT when set.
func WithEndpoint(url string) DynamoOption {
	return func(c *dynamoConfig) { c.endpoint = url }
}

// InMemory serves the embedded server in the caller's goroutine instead of
// on a loopback socket (the endpoint is then only a name): the form a
// testing/synctest bubble needs. With an external endpoint
// (SPILLWAY_DYNAMODB_ENDPOINT or WithEndpoint) it connects there instead,
// keeping its connections outside any bubble (outsideTransport): an idle
// connection's reader waiting on the socket would keep the bubble from ever
// being idle, so its clock would not move until the server closed the
// connection (the bubble's clock stands still while a request is on the
// wire).
// Clients must be built with NewClient, which carries the transport.
func InMemory() DynamoOption {
	return func(c *dynamoConfig) { c.inMemory = true }
}

// inMemoryEndpoint is the endpoint the in-memory server's clients name.
const inMemoryEndpoint = "http://dynamodb.in-memory"

// WithRoundTrip makes the embedded server hold every request for rt's
// delay before answering it (by default none). StartDynamoDB refuses it with
// an external endpoint, whose requests take their own time.
func WithRoundTrip(rt RoundTrip) DynamoOption {
	return func(c *dynamoConfig) { c.roundTrip = rt }
}

// WithoutEnvironment ignores SPILLWAY_DYNAMODB_ENDPOINT: the embedded
// server is used unless WithEndpoint says otherwise.
func WithoutEnvironment() DynamoOption {
	return func(c *dynamoConfig) { c.ignoreEnv = true }
}

// WithMaxAttempts sets the attempts per operation of the clients (default
// DefaultMaxAttempts; 1 turns retries off).
func WithMaxAttempts(n int) DynamoOption {
	return func(c *dynamoConfig) { c.maxAttempts = n }
}

// WithoutThrottleRetries makes the clients return throttling errors at once
// instead of retrying them; lost responses and server errors are still
// retried.
func WithoutThrottleRetries() DynamoOption {
	return func(c *dynamoConfig) { c.noThrottleRetr = true }
}

// WithReportedCapacity makes every request ask for its consumed capacity
// (ReturnConsumedCapacity TOTAL, unless it asks already), so Counts'
// Reported units can be compared with the computed ones on a real endpoint.
func WithReportedCapacity() DynamoOption {
	return func(c *dynamoConfig) { c.reportCapacity = true }
}

// WithClientOptions adds options applied to every client the DynamoDB
// builds, after the helpers' own.
func WithClientOptions(fns ...func(*dynamodb.Options)) DynamoOption {
	return func(c *dynamoConfig) { c.clientOptions = append(c.clientOptions, fns...) }
}

// DynamoDB is a DynamoDB endpoint for tests and the local mode: the
// embedded minidyn server behind a compensating handler on 127.0.0.1, or an
// external endpoint. Its Client is the real aws-sdk-go-v2 client with the
// Counter and Faults attached.
type DynamoDB struct {
	// Client talks to Endpoint with static credentials, DefaultRegion, the
	// configured retryer and the Counter and Faults middleware.
	Client *dynamodb.Client
	// Counter counts every attempt of the clients built here.
	Counter *Counter
	// Faults injects failures into the clients built here.
	Faults *Faults
	// Endpoint is the base URL the clients use.
	Endpoint string
	// External reports an external endpoint: no compensations, and tables
	// created through CreateTable are deleted by Close.
	External bool

	cfg       dynamoConfig
	commits   *commits // the ReadCommitted model of the embedded server; nil without
	awsConfig aws.Config
	transport *http.Transport
	server    *http.Server

	created created // tables to delete at Close (external only)
}

// StartDynamoDB starts the embedded server, or connects to the external
// endpoint (WithEndpoint or SPILLWAY_DYNAMODB_ENDPOINT). Close releases it.
func StartDynamoDB(ctx context.Context, opts ...DynamoOption) (*DynamoDB, error) {
	cfg := dynamoConfig{maxAttempts: DefaultMaxAttempts}
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.endpoint == "" && !cfg.ignoreEnv {
		cfg.endpoint = os.Getenv(outboxconf.EnvDynamoDBEndpoint)
	}
	if err := cfg.roundTrip.validate("DynamoDB"); err != nil {
		return nil, err
	}
	if cfg.endpoint != "" && cfg.roundTrip.Mean > 0 {
		return nil, fmt.Errorf("outboxlocal: a round trip of %v applies to the embedded DynamoDB only, not to %s", cfg.roundTrip, cfg.endpoint)
	}
	if rc := cfg.readCommitted; rc != nil && (rc.MaxCommit < 0 || (cfg.endpoint != "" && (rc.MaxCommit > 0 || rc.Schedule != nil))) {
		return nil, fmt.Errorf("outboxlocal: read-committed commits (at most %v) apply to the embedded DynamoDB only, with a maximum >= 0, not to %q", rc.MaxCommit, cfg.endpoint)
	}
	book := newSchemaBook()
	d := &DynamoDB{cfg: cfg, Counter: newCounter(book), commits: newCommits(cfg.readCommitted)}
	d.Faults = newFaults(book, d.Counter)
	d.transport = http.DefaultTransport.(*http.Transport).Clone()
	// Concurrent tests would otherwise open and close a connection per
	// request beyond the default two idle ones.
	d.transport.MaxIdleConns = 256
	d.transport.MaxIdleConnsPerHost = 256
	awsCfg := aws.Config{
		Region:      DefaultRegion,
		Credentials: credentials.NewStaticCredentialsProvider("spillway", "spillway", ""),
	}
	backoff := embeddedMaxBackoff
	if cfg.endpoint != "" {
		d.External, d.Endpoint, backoff = true, cfg.endpoint, externalMaxBackoff
		ext, err := externalConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("outboxlocal: configure DynamoDB endpoint %s: %w", cfg.endpoint, err)
		}
		awsCfg = ext
		if cfg.inMemory {
			awsCfg.HTTPClient = &http.Client{Transport: outsideTransport{rt: d.transport}}
		}
	} else if cfg.inMemory {
		d.Endpoint = inMemoryEndpoint
		awsCfg.HTTPClient = &http.Client{Transport: inMemoryTransport{handler: cfg.embeddedHandler(d.commits)}}
	} else {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("outboxlocal: listen for embedded DynamoDB: %w", err)
		}
		d.server = &http.Server{Handler: cfg.embeddedHandler(d.commits), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = d.server.Serve(ln) }()
		d.Endpoint = "http://" + ln.Addr().String()
	}
	if awsCfg.HTTPClient == nil {
		awsCfg.HTTPClient = &http.Client{Transport: d.transport}
	}
	awsCfg.Retryer = func() aws.Retryer { return newRetryer(cfg.maxAttempts, backoff, !cfg.noThrottleRetr) }
	awsCfg.APIOptions = append(awsCfg.APIOptions, d.APIOptions()...)
	d.awsConfig = awsCfg
	d.Client = d.NewClient()
	return d, nil
}

// embeddedHandler is the embedded server, behind the configured round trip.
func (c dynamoConfig) embeddedHandler(commits *commits) http.Handler {
	var h http.Handler = newEmbeddedServer(commits)
	if d := c.roundTrip.draws(); d != nil {
		h = delayedHandler{inner: h, delays: d}
	}
	return h
}

// externalConfig uses the default credential chain when the environment
// names credentials (a real table), static credentials otherwise (DynamoDB
// Local and LocalStack accept any).
func externalConfig(ctx context.Context) (aws.Config, error) {
	region := DefaultRegion
	for _, name := range []string{"AWS_REGION", "AWS_DEFAULT_REGION"} {
		if v := os.Getenv(name); v != "" {
			region = v
			break
		}
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		return aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider("spillway", "spillway", "")}, nil
	}
	return config.LoadDefaultConfig(ctx, config.WithRegion(region))
}

// newRetryer retries quickly, without the retry quota (tests provoke many
// failures on purpose), and optionally never retries throttling.
func newRetryer(maxAttempts int, maxBackoff time.Duration, retryThrottles bool) aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = max(1, maxAttempts)
		o.MaxBackoff = maxBackoff
		o.Backoff = retry.NewExponentialJitterBackoff(maxBackoff)
		o.RateLimiter = ratelimit.None
		if !retryThrottles {
			noThrottles := retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
				if isThrottle(err) {
					return aws.FalseTernary
				}
				return aws.UnknownTernary
			})
			o.Retryables = append([]retry.IsErrorRetryable{noThrottles}, o.Retryables...)
		}
	})
}

// APIOptions returns the middleware that attaches the Counter and Faults to
// a client; NewClient uses it, and other clients of the same endpoint can
// add it to their aws.Config.APIOptions.
func (d *DynamoDB) APIOptions() []func(*middleware.Stack) error {
	return []func(*middleware.Stack) error{func(stack *middleware.Stack) error {
		return attachMiddleware(stack, d.Counter, d.Faults, d.cfg.reportCapacity)
	}}
}

// NewClient returns another client of the endpoint sharing the Counter and
// Faults, with optFns applied last (e.g. a different retryer).
func (d *DynamoDB) NewClient(optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	fns := []func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(d.Endpoint)
	}}
	fns = append(fns, d.cfg.clientOptions...)
	return dynamodb.NewFromConfig(d.awsConfig, append(fns, optFns...)...)
}

// NewTableName returns a table name no other test uses.
func (d *DynamoDB) NewTableName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "spillway-test-" + hex.EncodeToString(b[:])
}

// CreateTable creates table with a string partition key PK and string sort
// key SK, billed per request, and waits until it is ACTIVE. On an external
// endpoint, Close deletes it.
func (d *DynamoDB) CreateTable(ctx context.Context, table string) error {
	_, err := d.Client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(DefaultPartitionKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(DefaultSortKey), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(DefaultPartitionKey), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(DefaultSortKey), KeyType: types.KeyTypeRange},
		},
	})
	if err != nil {
		return fmt.Errorf("outboxlocal: create table %s: %w", table, err)
	}
	d.DeleteOnClose(table)
	waiter := dynamodb.NewTableExistsWaiter(d.Client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 100 * time.Millisecond
		o.MaxDelay = 2 * time.Second
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 5*time.Minute); err != nil {
		return fmt.Errorf("outboxlocal: wait for table %s: %w", table, err)
	}
	return nil
}

// DeleteOnClose makes Close delete table on an external endpoint, for
// tables created by the code under test rather than by CreateTable. It does
// nothing on the embedded server, which Close discards whole.
func (d *DynamoDB) DeleteOnClose(table string) {
	if !d.External {
		return
	}
	d.created.add(table)
}

// Close deletes the tables CreateTable made on an external endpoint, or
// stops the embedded server. It is safe to call more than once.
func (d *DynamoDB) Close() error {
	tables, first := d.created.close()
	if !first {
		return nil
	}

	var errs []error
	if len(tables) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		for _, table := range tables {
			_, err := d.Client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)})
			var missing *types.ResourceNotFoundException
			if err != nil && !errors.As(err, &missing) {
				errs = append(errs, fmt.Errorf("outboxlocal: delete table %s: %w", table, err))
			}
		}
	}
	d.transport.CloseIdleConnections()
	if d.server != nil {
		if err := d.server.Close(); err != nil {
			errs = append(errs, fmt.Errorf("outboxlocal: stop embedded DynamoDB: %w", err))
		}
	}
	return errors.Join(errs...)
}

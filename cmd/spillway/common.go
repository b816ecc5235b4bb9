package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// endpointFlags are the flags every command that talks to the table shares.
// Each overrides the environment variable the functions read, so the CLI and
// the functions agree on one configuration.
type endpointFlags struct {
	values map[string]*string
	count  *int
	fs     *flag.FlagSet
}

func addEndpointFlags(fs *flag.FlagSet) *endpointFlags {
	f := &endpointFlags{values: map[string]*string{}, fs: fs}
	for _, d := range []struct{ name, env, help string }{
		{"dynamodb-endpoint", outboxconf.EnvDynamoDBEndpoint, "DynamoDB endpoint URL (default: the regional endpoint)"},
		{"table", outboxconf.EnvTable, "outbox table name"},
		{"key-prefix", outboxconf.EnvKeyPrefix, "prefix of every outbox partition key (default OUTBOX)"},
		{"brokers", outboxconf.EnvKafkaBrokers, "Kafka seed brokers, host:port,host:port"},
	} {
		f.values[d.env] = fs.String(d.name, "", fmt.Sprintf("%s (env %s)", d.help, d.env))
	}
	f.count = bucketCountFlag(fs)
	return f
}

// getenv returns the environment with the flags that were set laid over it.
func (f *endpointFlags) getenv() func(string) string {
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	return func(key string) string {
		if key == outboxconf.EnvBucketCount && (set["bucket-count"] || set["count"]) {
			return strconv.Itoa(*f.count)
		}
		if p, ok := f.values[key]; ok && *p != "" {
			return *p
		}
		return os.Getenv(key)
	}
}

// config loads the functions' configuration with the flags applied.
func (f *endpointFlags) config() (outboxlambda.Config, error) {
	return outboxlambda.LoadConfig(f.getenv())
}

// dynamoClient returns a DynamoDB client for cfg. A loopback endpoint
// without AWS credentials in the environment (DynamoDB Local, the embedded
// server) gets static dummy credentials, which such endpoints accept.
func dynamoClient(ctx context.Context, cfg outboxlambda.Config) (*dynamodb.Client, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if isLoopback(cfg.DynamoDBEndpoint) && os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")))
		if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
			opts = append(opts, awsconfig.WithRegion("us-east-1"))
		}
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	return dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if cfg.DynamoDBEndpoint != "" {
			o.BaseEndpoint = aws.String(cfg.DynamoDBEndpoint)
		}
	}), nil
}

func isLoopback(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// allBuckets returns 0, 1, ..., count-1.
func allBuckets(count int) []int {
	all := make([]int, count)
	for b := range all {
		all[b] = b
	}
	return all
}

// bucketCountFlag registers --bucket-count (and its synonym --count) with
// the default from SPILLWAY_BUCKET_COUNT, else 8.
func bucketCountFlag(fs *flag.FlagSet) *int {
	def := outbox.DefaultBucketCount
	if v, err := strconv.Atoi(os.Getenv(outboxconf.EnvBucketCount)); err == nil && v > 0 {
		def = v
	}
	n := fs.Int("bucket-count", def, fmt.Sprintf("number of buckets (env %s)", outboxconf.EnvBucketCount))
	fs.Var(intAlias{n}, "count", "synonym of --bucket-count")
	return n
}

// intAlias lets a second flag name set the same int.
type intAlias struct{ p *int }

func (a intAlias) String() string {
	if a.p == nil {
		return ""
	}
	return strconv.Itoa(*a.p)
}

func (a intAlias) Set(s string) error {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return err
	}
	*a.p = v
	return nil
}

// lockedWriter serialises writes of concurrent goroutines (invocations
// writing one file, a drain's relays and its progress line) to one writer.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
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
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// endpointFlags are the flags of the commands that talk to the table, each
// overriding the environment variable the functions read, so the CLI and
// the functions agree on one configuration. A command registers only the
// flags it uses.
type endpointFlags struct {
	values map[string]*string // by environment variable
	names  map[string]string  // flag name by environment variable
	count  *int
	fs     *flagSet
}

// addTableFlags registers --dynamodb-endpoint and --table, and --region and
// --profile, which say where and as whom the command reaches AWS.
func addTableFlags(fs *flagSet) *endpointFlags {
	f := &endpointFlags{values: map[string]*string{}, names: map[string]string{}, fs: fs}
	f.add("dynamodb-endpoint", outboxconf.EnvDynamoDBEndpoint, "DynamoDB endpoint `URL` (default: the regional endpoint)")
	f.add("table", outboxconf.EnvTable, "the `NAME` of the outbox table")
	f.add("region", envRegion, "the `REGION` of the table, e.g. eu-west-1")
	f.add("profile", envProfile, "the AWS shared-config profile to sign with, by `NAME` (an SSO profile after aws sso login)")
	return f
}

// withOutbox adds --key-prefix and --bucket-count, which say where a
// message's bucket lies.
func (f *endpointFlags) withOutbox() *endpointFlags {
	f.add("key-prefix", outboxconf.EnvKeyPrefix, "the `PREFIX` of every outbox partition key (default OUTBOX)")
	f.count = bucketCountFlag(f.fs.FlagSet)
	f.names[outboxconf.EnvBucketCount] = "bucket-count"
	return f
}

// withBrokers adds --brokers.
func (f *endpointFlags) withBrokers() *endpointFlags {
	f.add("brokers", outboxconf.EnvKafkaBrokers, "Kafka seed brokers, `HOST:PORT,...`")
	return f
}

// add registers a string flag overriding env.
func (f *endpointFlags) add(name, env, help string) {
	f.values[env] = f.fs.String(name, "", fmt.Sprintf("%s (env %s)", help, env))
	f.names[env] = name
}

// getenv returns the environment with the flags that were set laid over it.
func (f *endpointFlags) getenv() func(string) string {
	set := f.set()
	return func(key string) string {
		if key == outboxconf.EnvBucketCount && f.count != nil && (set["bucket-count"] || set["count"]) {
			return strconv.Itoa(*f.count)
		}
		if p, ok := f.values[key]; ok && *p != "" {
			return *p
		}
		return os.Getenv(key)
	}
}

func (f *endpointFlags) set() map[string]bool {
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	return set
}

// config loads the functions' configuration with the flags applied. An
// unusable value is a usage error naming the flag that sets it. --region
// and --profile are set in the process environment, where every AWS client
// the command makes (DynamoDB, the Lambda wake-up, Secrets Manager, MSK
// IAM) reads them, as the SDK reads the variables.
func (f *endpointFlags) config() (outboxlambda.Config, error) {
	for _, env := range []string{envRegion, envProfile} {
		if p := f.values[env]; p != nil && *p != "" {
			if err := os.Setenv(env, *p); err != nil {
				return outboxlambda.Config{}, err
			}
		}
	}
	cfg, err := outboxlambda.LoadConfig(f.getenv())
	if err != nil {
		return cfg, usageError{f.explain(err)}
	}
	return cfg, nil
}

// explain turns a configuration error into a sentence for the operator:
// the flag first, the variable as the other way to set it.
func (f *endpointFlags) explain(err error) string {
	return explainConfig(err, f.names, f.set())
}

// explainConfig is explain for the flags names (by variable), of which set
// were given.
func explainConfig(err error, names map[string]string, set map[string]bool) string {
	var ce *outboxlambda.ConfigError
	if !errors.As(err, &ce) {
		return err.Error()
	}
	var pairs []string
	for env, name := range names {
		pairs = append(pairs, env, "--"+name)
	}
	problem := strings.NewReplacer(pairs...).Replace(ce.Problem)
	name, ok := names[ce.Variable]
	switch {
	case !ok:
		return fmt.Sprintf("%s=%q: %s", ce.Variable, ce.Value, problem)
	case ce.Value == "" && strings.HasPrefix(ce.Problem, "required"):
		if problem == "required, not set" {
			return fmt.Sprintf("--%s is required (or set %s)", name, ce.Variable)
		}
		return fmt.Sprintf("--%s is %s (or set %s)", name, problem, ce.Variable)
	case set[name] || (name == "bucket-count" && set["count"]):
		return fmt.Sprintf("--%s %s: %s", name, ce.Value, problem)
	default:
		return fmt.Sprintf("%s=%q, the default of --%s: %s", ce.Variable, ce.Value, name, problem)
	}
}

// dynamoClient returns a DynamoDB client for cfg. A loopback endpoint
// without AWS credentials in the environment (DynamoDB Local, the embedded
// server) gets static dummy credentials, which such endpoints accept. Its
// requests explain a missing table or missing credentials
// (outboxddb.ExplainErrors); runCLI says them for the operator.
func dynamoClient(ctx context.Context, cfg outboxlambda.Config) (*dynamodb.Client, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if outboxconf.LocalEndpoint(cfg.DynamoDBEndpoint) && os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv(envProfile) == "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")))
		if os.Getenv(envRegion) == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
			opts = append(opts, awsconfig.WithRegion("us-east-1"))
		}
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" && cfg.DynamoDBEndpoint == "" {
		return nil, usagef("no AWS region: give --region (or set %s, or use a profile that names one)", envRegion)
	}
	return dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if cfg.DynamoDBEndpoint != "" {
			o.BaseEndpoint = aws.String(cfg.DynamoDBEndpoint)
		}
	}, outboxddb.ExplainErrors), nil
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
	addAlias(fs, "count", "bucket-count", "")
	return n
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

package main

import (
	"errors"
	"fmt"
	"math"
	"net/mail"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/spillway-dev/spillway/infra/spillway"
	"github.com/spillway-dev/spillway/internal/suggest"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// contextKey documents one CDK context key (`cdk deploy -c key=value` or the
// "context" object of cdk.json). infra/README.md's "Context keys" lists
// them all; a test keeps the two in step.
type contextKey struct {
	name, doc string
}

// contextKeys are every key the app reads.
var contextKeys = []contextKey{
	{"stackName", "CloudFormation stack name (default Spillway)"},
	{"account", "target account; with region, pins the stack's environment (default: environment-agnostic)"},
	{"region", "target region (default: environment-agnostic)"},
	{"distDir", "directory holding relay.zip and enqueue.zip from `make build`, relative to where cdk runs, the repository root (default dist)"},
	{"tableName", "physical name of the table to create (default: generated)"},
	{"existingTableName", "use this existing table instead of creating one"},
	{"existingTableArn", "use the existing table with this ARN instead of creating one"},
	{"existingTableStreamArn", "stream ARN of the existing table (needed with streamsTrigger)"},
	{"partitionKey", "partition key attribute (default PK)"},
	{"sortKey", "sort key attribute (default SK)"},
	{"keyPrefix", "prefix of every partition-key value (default OUTBOX)"},
	{"bucketCount", "number of buckets, 1 to 1024; writers and relays must agree, and the table's layout record checks it (default 8)"},
	{"previousKeyPrefix", "key prefix of the generation the relay drains first while the bucket count changes (default none)"},
	{"previousBucketCount", "bucket count of that generation (with previousKeyPrefix)"},
	{"generationCheck", "enqueue function refuses writes once its generation is sealed (default false)"},
	{"deletionProtection", "deletion protection of the created table (default true)"},
	{"outboxName", "Outbox metric dimension (default: keyPrefix)"},
	{"metricsNamespace", "CloudWatch namespace of the EMF metrics (default Spillway)"},
	{"relayFunctionName", "physical name of the relay (default <stackName>-Outbox-relay)"},
	{"relayTimeout", "relay timeout, Go duration (default 15m)"},
	{"relayMemory", "relay memory in MB (default 128)"},
	{"enqueueTimeout", "enqueue timeout, Go duration (default 30s)"},
	{"enqueueMemory", "enqueue memory in MB (default 256)"},
	{"stopMargin", "time before the deadline when the relay stops starting batches, Go duration (default 5s)"},
	{"mode", "relay exit mode: drain or hold (default drain)"},
	{"maxHops", "bound on chains of continuation wake-ups (default 10)"},
	{"pollInterval", "how often the relay probes its buckets without a wake-up, Go duration (default: the relay's, 1s)"},
	{"targetLatency", "how soon a running relay looks for a message committed to a busy bucket it holds, Go duration; at or above pollInterval it only polls (default: the relay's, 225ms)"},
	{"idleTimeout", "how long a drain-mode relay lingers with nothing to do, Go duration below relayTimeout less stopMargin (default: the relay's, 2s)"},
	{"maxIdleTimeout", "longer linger of a drain-mode relay under steady traffic, Go duration, at least idleTimeout (default: 5 x idleTimeout, 10s)"},
	{"leaseDuration", "bucket lease length, Go duration (default: the relay's, 30s)"},
	{"leaseRenewInterval", "lease renewal cadence, Go duration shorter than leaseDuration (default: the relay's, 10s)"},
	{"batchSize", "messages fetched and published per bucket per round trip (default: the relay's, 500)"},
	{"poisonPolicy", "block or quarantine: what the relay does with a message Kafka will not take (default: the relay's, block)"},
	{"poisonMaxAttempts", "failed attempts after which a message is parked, with poisonPolicy quarantine only (default: the relay's, 10)"},
	{"reservedConcurrency", "relay reserved concurrency, 1..bucketCount (default bucketCount)"},
	{"scheduleRate", "EventBridge Scheduler expression of the sweep (default rate(1 minute))"},
	{"streamsTrigger", "wake the relay from the table's stream on message inserts (default false)"},
	{"logRetentionDays", "retention of the functions' log groups in days (default 30)"},
	{"mskClusterArn", "MSK cluster ARN; scopes MSK IAM and looks the brokers up when brokers is unset"},
	{"topics", "comma-separated topics the relay publishes to (required with msk-iam)"},
	{"brokers", "comma-separated bootstrap brokers host:port (default: looked up from mskClusterArn)"},
	{"doorbellTopic", "Kafka topic the enqueue function rings after every commit and the relay listens on, for a publish tens of milliseconds after the commit (default none; create the topic first)"},
	{"kafkaAuth", "msk-iam, scram-sha-512 or none (default: scram-sha-512 with scramSecretArn, msk-iam with mskClusterArn, else none)"},
	{"kafkaTls", "TLS to the brokers (default true for msk-iam and scram-sha-512)"},
	{"scramSecretArn", "Secrets Manager secret with the SCRAM credentials"},
	{"scramSecretKmsKeyArn", "KMS key encrypting the SCRAM secret (relay may decrypt through Secrets Manager only)"},
	{"brokerPort", "broker port the relay may reach (default 9098 msk-iam, 9096 SCRAM, 9094 TLS, 9092 plaintext)"},
	{"vpcId", "VPC of the brokers; puts the relay in the VPC (requires vpcCidr and subnetIds); required with mskClusterArn unless mskPublicAccess"},
	{"mskPublicAccess", "reach the MSK cluster through its public listener instead of from inside its VPC (the cluster must have public access on; give its public bootstrap brokers in brokers; default false)"},
	{"vpcCidr", "IPv4 CIDR of the VPC"},
	{"subnetIds", "comma-separated private subnet ids for the relay"},
	{"routeTableIds", "comma-separated route table ids of those subnets (for dynamoDbEndpoint)"},
	{"brokerSecurityGroupId", "brokers' security group: egress goes to it and it gets an ingress rule from the relay"},
	{"dynamoDbEndpoint", "create a DynamoDB gateway endpoint (default false)"},
	{"lambdaEndpoint", "create a Lambda interface endpoint for the relay's wake-ups (default false)"},
	{"dynamoDbPrefixListId", "DynamoDB prefix list id; narrows the relay's HTTPS egress to it and the VPC CIDR"},
	{"alarmTopicArn", "existing SNS topic for alarm notifications; this, alarmEmail or alarms=none is required"},
	{"alarmEmail", "e-mail address subscribed to a created, encrypted alarm topic; this, alarmTopicArn or alarms=none is required"},
	{"alarms", "notify (default: needs alarmEmail or alarmTopicArn) or none (deploy the alarms without notifications, an explicit opt-out)"},
	{"alarmOldestPendingAgeSeconds", "OldestPendingAge alarm threshold in seconds (default 300)"},
	{"alarmPublishFailures", "PublishFailures alarm threshold per minute, 5 minutes in a row (default 0)"},
	{"alarmDurationPercent", "relay p99 duration alarm, percent of the timeout (default: timeout minus half the stop margin)"},
	{"tracing", "xray, otel or off (default xray); X-Ray active tracing stays on except with off"},
	{"otelCollectorLayerArn", "collector layer attached to both functions with tracing otel, e.g. the ADOT collector layer for arm64"},
	{"otelEndpoint", "OTEL_EXPORTER_OTLP_ENDPOINT with tracing otel (default http://localhost:4318, the layer's receiver)"},
}

// appConfig is what the context says, before the code assets are loaded.
type appConfig struct {
	stackName, account, region, distDir string
	existingTableName                   string
	existingTableArn                    string
	existingTableStreamArn              string
	outbox                              spillway.OutboxProps
}

// contextReader reads typed values from CDK context. Values come as strings
// from `-c key=value` and as JSON values from cdk.json; both are accepted.
type contextReader struct {
	get  func(string) any
	errs []error
}

func (r *contextReader) fail(key string, v any, want string) {
	r.errs = append(r.errs, fmt.Errorf("context %q: %v is not %s", key, v, want))
}

func (r *contextReader) str(key, def string) string {
	switch v := r.get(key).(type) {
	case nil:
		return def
	case string:
		return strings.TrimSpace(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	default:
		r.fail(key, v, "a string")
		return def
	}
}

func (r *contextReader) boolean(key string, def bool) bool {
	switch v := r.get(key).(type) {
	case nil:
		return def
	case bool:
		return v
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			r.fail(key, v, "true or false")
			return def
		}
		return b
	default:
		r.fail(key, v, "true or false")
		return def
	}
}

func (r *contextReader) number(key string) float64 {
	switch v := r.get(key).(type) {
	case nil:
		return 0
	case float64:
		return v
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			r.fail(key, v, "a number")
			return 0
		}
		return f
	default:
		r.fail(key, v, "a number")
		return 0
	}
}

func (r *contextReader) integer(key string) int {
	f := r.number(key)
	if f != math.Trunc(f) || f < 0 || f > math.MaxInt32 {
		r.fail(key, f, "a non-negative integer")
		return 0
	}
	return int(f)
}

// bucketCount reads a bucket count: absent is 0 (the default), present
// must be from 1 to outboxconf.MaxBucketCount. An explicit 0 is refused
// rather than read as the default.
func (r *contextReader) bucketCount(key string) int {
	if r.get(key) == nil {
		return 0
	}
	before := len(r.errs)
	n := r.integer(key)
	if len(r.errs) == before && (n < 1 || n > outboxconf.MaxBucketCount) {
		r.fail(key, r.get(key), fmt.Sprintf("a bucket count from 1 to %d (the largest the scale study covers)", outboxconf.MaxBucketCount))
		return 0
	}
	return n
}

func (r *contextReader) duration(key string) time.Duration {
	s := r.str(key, "")
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		r.fail(key, s, "a Go duration such as 15m or 5s")
		return 0
	}
	return d
}

func (r *contextReader) list(key string) []string {
	var items []string
	switch v := r.get(key).(type) {
	case nil:
		return nil
	case string:
		items = strings.Split(v, ",")
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				r.fail(key, v, "a list of strings")
				return nil
			}
			items = append(items, s)
		}
	default:
		r.fail(key, v, "a comma-separated string or a list of strings")
		return nil
	}
	var out []string
	for _, s := range items {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// configFromContext reads every key in contextKeys. It reports all
// malformed values at once; validating their meaning is OutboxProps'.
func configFromContext(get func(string) any) (appConfig, error) {
	r := &contextReader{get: get}
	c := appConfig{
		stackName:              r.str("stackName", "Spillway"),
		account:                r.str("account", ""),
		region:                 r.str("region", ""),
		distDir:                r.str("distDir", "dist"),
		existingTableName:      r.str("existingTableName", ""),
		existingTableArn:       r.str("existingTableArn", ""),
		existingTableStreamArn: r.str("existingTableStreamArn", ""),
	}
	deletionProtection := r.boolean("deletionProtection", true)
	c.outbox = spillway.OutboxProps{
		TableName:           r.str("tableName", ""),
		PartitionKey:        r.str("partitionKey", ""),
		SortKey:             r.str("sortKey", ""),
		KeyPrefix:           r.str("keyPrefix", ""),
		BucketCount:         r.bucketCount("bucketCount"),
		PreviousKeyPrefix:   r.str("previousKeyPrefix", ""),
		PreviousBucketCount: r.bucketCount("previousBucketCount"),
		GenerationCheck:     r.boolean("generationCheck", false),
		DeletionProtection:  &deletionProtection,
		OutboxName:          r.str("outboxName", ""),
		MetricsNamespace:    r.str("metricsNamespace", ""),
		RelayFunctionName:   r.str("relayFunctionName", ""),
		RelayTimeout:        r.duration("relayTimeout"),
		RelayMemoryMB:       r.integer("relayMemory"),
		EnqueueTimeout:      r.duration("enqueueTimeout"),
		EnqueueMemoryMB:     r.integer("enqueueMemory"),
		StopMargin:          r.duration("stopMargin"),
		Mode:                r.str("mode", ""),
		MaxHops:             r.integer("maxHops"),
		PollInterval:        r.duration("pollInterval"),
		TargetLatency:       r.duration("targetLatency"),
		IdleTimeout:         r.duration("idleTimeout"),
		MaxIdleTimeout:      r.duration("maxIdleTimeout"),
		LeaseDuration:       r.duration("leaseDuration"),
		LeaseRenewInterval:  r.duration("leaseRenewInterval"),
		BatchSize:           r.integer("batchSize"),
		PoisonPolicy:        r.str("poisonPolicy", ""),
		PoisonMaxAttempts:   r.integer("poisonMaxAttempts"),
		ReservedConcurrency: r.integer("reservedConcurrency"),
		ScheduleRate:        r.str("scheduleRate", ""),
		StreamsTrigger:      r.boolean("streamsTrigger", false),
		Kafka: spillway.KafkaProps{
			ClusterArn:           r.str("mskClusterArn", ""),
			Brokers:              r.list("brokers"),
			Topics:               r.list("topics"),
			DoorbellTopic:        r.str("doorbellTopic", ""),
			Auth:                 r.str("kafkaAuth", ""),
			ScramSecretArn:       r.str("scramSecretArn", ""),
			ScramSecretKmsKeyArn: r.str("scramSecretKmsKeyArn", ""),
			Port:                 r.integer("brokerPort"),
		},
		Tracing: r.str("tracing", ""),
		OTel: spillway.OTelProps{
			CollectorLayerArn: r.str("otelCollectorLayerArn", ""),
			Endpoint:          r.str("otelEndpoint", ""),
		},
		Alarms: spillway.AlarmProps{
			TopicArn:         r.str("alarmTopicArn", ""),
			Email:            r.str("alarmEmail", ""),
			OldestPendingAge: time.Duration(r.integer("alarmOldestPendingAgeSeconds")) * time.Second,
			PublishFailures:  r.integer("alarmPublishFailures"),
			DurationPercent:  r.number("alarmDurationPercent"),
		},
	}
	if days := r.integer("logRetentionDays"); days != 0 {
		retention, ok := retentionDays[days]
		if !ok {
			r.fail("logRetentionDays", days, "a CloudWatch Logs retention (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, ...)")
		}
		c.outbox.LogRetention = retention
	}
	if r.get("kafkaTls") != nil {
		tls := r.boolean("kafkaTls", true)
		c.outbox.Kafka.TLS = &tls
	}
	// Most fundamental first: how the relay reaches the brokers, then the
	// values, the alarms and the table.
	valueErrs := r.errs
	r.errs = nil
	var errs []error
	if vpc := r.str("vpcId", ""); vpc != "" {
		c.outbox.Network = &spillway.NetworkProps{
			VpcID:                 vpc,
			VpcCidr:               r.str("vpcCidr", ""),
			SubnetIDs:             r.list("subnetIds"),
			RouteTableIDs:         r.list("routeTableIds"),
			BrokerSecurityGroupID: r.str("brokerSecurityGroupId", ""),
			DynamoDBEndpoint:      r.boolean("dynamoDbEndpoint", false),
			LambdaEndpoint:        r.boolean("lambdaEndpoint", false),
			DynamoDBPrefixListID:  r.str("dynamoDbPrefixListId", ""),
		}
	} else {
		for _, k := range []string{"vpcCidr", "subnetIds", "routeTableIds", "brokerSecurityGroupId", "dynamoDbEndpoint", "lambdaEndpoint", "dynamoDbPrefixListId"} {
			if r.get(k) != nil {
				errs = append(errs, fmt.Errorf("context %q needs vpcId", k))
			}
		}
	}
	errs = append(errs, mskNetworkCheck(r, c.outbox)...)
	errs = append(errs, valueErrs...)
	errs = append(errs, alarmTargetCheck(r, c.outbox.Alarms)...)
	if c.existingTableName != "" && c.existingTableArn != "" {
		errs = append(errs, errors.New("context: give existingTableName or existingTableArn, not both"))
	}
	if c.existingTableStreamArn != "" && c.existingTableName == "" && c.existingTableArn == "" {
		errs = append(errs, errors.New("context \"existingTableStreamArn\" needs existingTableName or existingTableArn"))
	}
	if (c.account == "") != (c.region == "") {
		errs = append(errs, errors.New("context: give both account and region, or neither"))
	}
	// Values the checks above read (mskPublicAccess, alarms) come last.
	return c, errors.Join(append(errs, r.errs...)...)
}

// kafkaContextCheck says in context keys what the relay lacks to reach
// Kafka, before OutboxProps.Validate says it in field names: where the
// brokers come from, and the topics MSK IAM must name.
func kafkaContextCheck(k spillway.KafkaProps) []error {
	auth := k.Auth
	if auth == "" {
		// OutboxProps' default, in context keys.
		switch {
		case k.ScramSecretArn != "":
			auth = outboxconf.KafkaAuthScram
		case k.ClusterArn != "":
			auth = outboxconf.KafkaAuthIAM
		default:
			auth = outboxconf.KafkaAuthNone
		}
	}
	var errs []error
	switch {
	case len(k.Brokers) == 0 && k.ClusterArn == "":
		errs = append(errs, errors.New("context: the relay has no Kafka to publish to: give -c mskClusterArn=arn:aws:kafka:<region>:<account>:cluster/<name>/<uuid> "+
			"(an MSK cluster, its brokers looked up; with -c topics=…) or -c brokers=host:port,host:port"))
	case len(k.Brokers) == 0 && auth == outboxconf.KafkaAuthNone:
		errs = append(errs, errors.New("context: looking the brokers up from mskClusterArn needs -c kafkaAuth=msk-iam or -c kafkaAuth=scram-sha-512 (with -c scramSecretArn=…); "+
			"with -c kafkaAuth=none give them in -c brokers=host:port,host:port"))
	}
	if auth == outboxconf.KafkaAuthIAM && len(k.Topics) == 0 {
		errs = append(errs, errors.New("context: with MSK IAM the relay may write only to the topics it names: give -c topics=orders,payments"))
	}
	return errs
}

// stackKey matches the keys of the stack's namespace: lowerCamelCase words.
// CDK's own context keys hold a colon, a slash or a hyphen
// (@aws-cdk/core:…, aws:cdk:…, cli-telemetry, acknowledged-issue-numbers).
var stackKey = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)

// unknownContextKeys refuses a key of the stack's namespace that is not in
// contextKeys, naming the nearest known key: a misspelled key would
// otherwise be ignored and its default deployed.
func unknownContextKeys(keys []string) error {
	var errs []error
	for _, key := range slices.Sorted(slices.Values(keys)) {
		if !stackKey.MatchString(key) || slices.ContainsFunc(contextKeys, func(k contextKey) bool { return k.name == key }) {
			continue
		}
		names := make([]string, len(contextKeys))
		for i, k := range contextKeys {
			names[i] = k.name
		}
		if nearest, ok := suggest.Nearest(key, names); ok {
			errs = append(errs, fmt.Errorf("context %q is not a key of the stack; did you mean %s? (infra/README.md lists the keys)", key, nearest))
		} else {
			errs = append(errs, fmt.Errorf("context %q is not a key of the stack (infra/README.md lists the keys)", key))
		}
	}
	return errors.Join(errs...)
}

// mskNetworkCheck refuses an MSK cluster the relay could not reach. MSK's
// bootstrap brokers are private listeners, reachable only from inside the
// cluster's VPC; a relay outside any VPC deploys fine and then never
// connects. So a cluster needs the network keys, unless the user opts into
// the cluster's public listener, whose brokers the lookup does not return
// and must be given (IAM listens on port 9198, SCRAM on 9196 there).
func mskNetworkCheck(r *contextReader, o spillway.OutboxProps) []error {
	public := r.boolean("mskPublicAccess", false)
	if o.Kafka.ClusterArn == "" {
		if public {
			return []error{errors.New("context \"mskPublicAccess\" needs mskClusterArn")}
		}
		return nil
	}
	switch {
	case public && o.Network != nil:
		return []error{errors.New("context: mskPublicAccess reaches the cluster from outside its VPC; drop it or drop vpcId")}
	case public && len(o.Kafka.Brokers) == 0:
		return []error{fmt.Errorf("context: with mskPublicAccess give the cluster's public bootstrap brokers in brokers " +
			"(aws kafka get-bootstrap-brokers --cluster-arn <mskClusterArn> --query BootstrapBrokerStringPublicSaslIam, or ...PublicSaslScram)")}
	case o.Network == nil && !public:
		return []error{errors.New("context: an MSK cluster (mskClusterArn) listens on private addresses inside its VPC, and a relay outside any VPC cannot reach it: " +
			"add -c vpcId=vpc-… -c vpcCidr=10.0.0.0/16 -c subnetIds=subnet-a,subnet-b (private subnets that reach the brokers; brokerSecurityGroupId to open the brokers' security group), " +
			"or -c mskPublicAccess=true -c brokers=<public bootstrap brokers> if the cluster has public access turned on")}
	}
	return nil
}

// errNoAlarmTarget says the alarms would notify nobody.
var errNoAlarmTarget = errors.New("context: the alarms would notify nobody: give -c alarmEmail=ops@example.com (a created, encrypted topic) " +
	"or -c alarmTopicArn=arn:aws:sns:<region>:<account>:<topic> (an existing topic), or -c alarms=none to deploy them without notifications")

// alarmTargetCheck refuses alarms without a target unless alarms=none says
// so: a stuck outbox that alarms to nobody looks like a healthy one.
func alarmTargetCheck(r *contextReader, a spillway.AlarmProps) []error {
	if a.Email != "" {
		if addr, err := mail.ParseAddress(a.Email); err != nil || addr.Address != a.Email || !strings.Contains(a.Email[strings.LastIndex(a.Email, "@"):], ".") {
			return []error{fmt.Errorf("context \"alarmEmail\": %q is not an e-mail address such as ops@example.com", a.Email)}
		}
	}
	switch opt := r.str("alarms", "notify"); {
	case opt != "notify" && opt != "none":
		return []error{fmt.Errorf("context \"alarms\": %q is not notify or none", opt)}
	case opt == "none" && (a.TopicArn != "" || a.Email != ""):
		return []error{errors.New("context: alarms=none contradicts alarmEmail/alarmTopicArn; drop one")}
	case opt == "notify" && a.TopicArn == "" && a.Email == "":
		return []error{errNoAlarmTarget}
	}
	return nil
}

// retentionDays maps CloudWatch Logs' allowed retentions to CDK's enum.
var retentionDays = map[int]awslogs.RetentionDays{
	1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS, 5: awslogs.RetentionDays_FIVE_DAYS,
	7: awslogs.RetentionDays_ONE_WEEK, 14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
	60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS, 120: awslogs.RetentionDays_FOUR_MONTHS,
	150: awslogs.RetentionDays_FIVE_MONTHS, 180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
	400: awslogs.RetentionDays_THIRTEEN_MONTHS, 545: awslogs.RetentionDays_EIGHTEEN_MONTHS, 731: awslogs.RetentionDays_TWO_YEARS,
	1096: awslogs.RetentionDays_THREE_YEARS, 1827: awslogs.RetentionDays_FIVE_YEARS, 2192: awslogs.RetentionDays_SIX_YEARS,
	2557: awslogs.RetentionDays_SEVEN_YEARS, 2922: awslogs.RetentionDays_EIGHT_YEARS, 3288: awslogs.RetentionDays_NINE_YEARS,
	3653: awslogs.RetentionDays_TEN_YEARS,
}

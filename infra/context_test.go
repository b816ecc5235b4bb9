package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
	"github.com/spillway-dev/spillway/infra/spillway"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// fromMap reads context from a map and records every key asked for.
func fromMap(m map[string]any, asked *[]string) func(string) any {
	return func(key string) any {
		if asked != nil {
			*asked = append(*asked, key)
		}
		return m[key]
	}
}

func TestContext(t *testing.T) {
	t.Run("DefaultsLeaveOutboxDefaultsInCharge", func(t *testing.T) {
		c, err := configFromContext(fromMap(map[string]any{"alarms": "none"}, nil))
		if err != nil {
			t.Fatal(err)
		}
		if c.stackName != "Spillway" || c.distDir != "dist" || c.account != "" || c.outbox.Network != nil {
			t.Errorf("unexpected defaults %+v", c)
		}
		p := c.outbox.WithDefaults()
		if p.BucketCount != spillway.DefaultBucketCount || p.ScheduleRate != spillway.DefaultScheduleRate || !*p.DeletionProtection || p.LogRetention != awslogs.RetentionDays_ONE_MONTH {
			t.Errorf("outbox defaults not applied: %+v", p)
		}
	})

	t.Run("EveryContextKeyIsReadAndParsed", func(t *testing.T) {
		ctx := map[string]any{
			// CLI style: strings.
			"stackName": "Orders", "account": "123456789012", "region": "eu-west-1", "distDir": "/tmp/d",
			"tableName": "orders-outbox", "existingTableName": "", "existingTableArn": "", "existingTableStreamArn": "",
			"partitionKey": "pk", "sortKey": "sk", "keyPrefix": "ORDERS", "bucketCount": "16", "deletionProtection": "false",
			"previousKeyPrefix": "OUTBOX", "previousBucketCount": "8", "generationCheck": "true",
			"outboxName": "orders", "metricsNamespace": "Acme", "relayFunctionName": "orders-relay",
			"relayTimeout": "10m", "relayMemory": "1024", "enqueueTimeout": "20s", "enqueueMemory": "512",
			"stopMargin": "8s", "mode": "hold", "maxHops": "6", "reservedConcurrency": "12",
			"pollInterval": "500ms", "targetLatency": "200ms", "idleTimeout": "3s", "maxIdleTimeout": "1m30s", "leaseDuration": "45s",
			"leaseRenewInterval": "15s", "batchSize": "250", "poisonPolicy": "quarantine", "poisonMaxAttempts": "4",
			"scheduleRate": "rate(2 minutes)", "streamsTrigger": "true", "logRetentionDays": "90",
			"mskClusterArn": "arn:aws:kafka:eu-west-1:123456789012:cluster/c/u", "topics": "a, b,,c",
			"brokers": "b-1:9096,b-2:9096", "kafkaAuth": "scram-sha-512", "kafkaTls": "true", "doorbellTopic": "orders-doorbell",
			"scramSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:AmazonMSK_x", "scramSecretKmsKeyArn": "arn:aws:kms:eu-west-1:123456789012:key/k",
			"brokerPort": "9096", "mskPublicAccess": "false",
			"vpcId": "vpc-1", "vpcCidr": "10.0.0.0/16", "subnetIds": "subnet-1,subnet-2", "routeTableIds": "rtb-1",
			"brokerSecurityGroupId": "sg-1", "dynamoDbEndpoint": "true", "lambdaEndpoint": "true", "dynamoDbPrefixListId": "pl-1",
			"alarmTopicArn": "arn:aws:sns:eu-west-1:123456789012:ops", "alarmEmail": "ops@example.com", "alarms": "notify",
			"alarmOldestPendingAgeSeconds": "120", "alarmPublishFailures": "2", "alarmDurationPercent": "95.5",
			"tracing": "otel", "otelCollectorLayerArn": "arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1",
			"otelEndpoint": "http://localhost:4318",
		}
		var asked []string
		c, err := configFromContext(fromMap(ctx, &asked))
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range contextKeys {
			if !slices.Contains(asked, k.name) {
				t.Errorf("context key %q is documented but never read", k.name)
			}
			if _, ok := ctx[k.name]; !ok {
				t.Errorf("context key %q is not covered by this test", k.name)
			}
		}
		for _, k := range asked {
			if !slices.ContainsFunc(contextKeys, func(c contextKey) bool { return c.name == k }) {
				t.Errorf("context key %q is read but not documented in contextKeys", k)
			}
		}
		p := c.outbox
		tls := true
		want := spillway.OutboxProps{
			TableName: "orders-outbox", PartitionKey: "pk", SortKey: "sk", KeyPrefix: "ORDERS", BucketCount: 16,
			PreviousKeyPrefix: "OUTBOX", PreviousBucketCount: 8, GenerationCheck: true,
			OutboxName: "orders", MetricsNamespace: "Acme", RelayFunctionName: "orders-relay",
			RelayTimeout: 10 * time.Minute, RelayMemoryMB: 1024, EnqueueTimeout: 20 * time.Second, EnqueueMemoryMB: 512,
			StopMargin: 8 * time.Second, Mode: "hold", MaxHops: 6, ReservedConcurrency: 12, ScheduleRate: "rate(2 minutes)",
			PollInterval: 500 * time.Millisecond, TargetLatency: 200 * time.Millisecond, IdleTimeout: 3 * time.Second, MaxIdleTimeout: 90 * time.Second,
			LeaseDuration: 45 * time.Second, LeaseRenewInterval: 15 * time.Second, BatchSize: 250,
			PoisonPolicy: spillway.PoisonQuarantine, PoisonMaxAttempts: 4,
			StreamsTrigger: true, LogRetention: awslogs.RetentionDays_THREE_MONTHS,
			Kafka: spillway.KafkaProps{
				ClusterArn: "arn:aws:kafka:eu-west-1:123456789012:cluster/c/u", Brokers: []string{"b-1:9096", "b-2:9096"},
				Topics: []string{"a", "b", "c"}, DoorbellTopic: "orders-doorbell", Auth: outboxconf.KafkaAuthScram, TLS: &tls,
				ScramSecretArn: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:AmazonMSK_x", ScramSecretKmsKeyArn: "arn:aws:kms:eu-west-1:123456789012:key/k",
				Port: 9096,
			},
			Network: &spillway.NetworkProps{
				VpcID: "vpc-1", VpcCidr: "10.0.0.0/16", SubnetIDs: []string{"subnet-1", "subnet-2"}, RouteTableIDs: []string{"rtb-1"},
				BrokerSecurityGroupID: "sg-1", DynamoDBEndpoint: true, LambdaEndpoint: true, DynamoDBPrefixListID: "pl-1",
			},
			Alarms: spillway.AlarmProps{
				TopicArn: "arn:aws:sns:eu-west-1:123456789012:ops", Email: "ops@example.com",
				OldestPendingAge: 120 * time.Second, PublishFailures: 2, DurationPercent: 95.5,
			},
			Tracing: "otel",
			OTel: spillway.OTelProps{
				CollectorLayerArn: "arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1",
				Endpoint:          "http://localhost:4318",
			},
		}
		if *p.DeletionProtection {
			t.Error("deletionProtection=false was not read")
		}
		p.DeletionProtection = nil
		if g, w := jsonOf(t, p), jsonOf(t, want); g != w {
			t.Errorf("props:\n got  %s\n want %s", g, w)
		}
		if c.stackName != "Orders" || c.account != "123456789012" || c.region != "eu-west-1" || c.distDir != "/tmp/d" {
			t.Errorf("app settings: %+v", c)
		}
	})

	t.Run("CdkJSONValuesAreAcceptedWithTheirJSONTypes", func(t *testing.T) {
		c, err := configFromContext(fromMap(map[string]any{
			"bucketCount": 4.0, "streamsTrigger": true, "topics": []any{"a", "b"}, "logRetentionDays": 7.0, "alarms": "none",
		}, nil))
		if err != nil {
			t.Fatal(err)
		}
		if c.outbox.BucketCount != 4 || !c.outbox.StreamsTrigger || strings.Join(c.outbox.Kafka.Topics, ",") != "a,b" || c.outbox.LogRetention != awslogs.RetentionDays_ONE_WEEK {
			t.Errorf("typed values misread: %+v", c.outbox)
		}
	})

	t.Run("MalformedContextIsReportedAllAtOnce", func(t *testing.T) {
		_, err := configFromContext(fromMap(map[string]any{
			"bucketCount":       "eight",
			"relayTimeout":      "15",
			"streamsTrigger":    "yes",
			"logRetentionDays":  "31",
			"maxHops":           "2.5",
			"leaseDuration":     "30",
			"batchSize":         "-1",
			"subnetIds":         "subnet-1",
			"account":           "123456789012",
			"existingTableName": "a", "existingTableArn": "arn:aws:dynamodb:eu-west-1:123456789012:table/a",
		}, nil))
		if err == nil {
			t.Fatal("malformed context accepted")
		}
		for _, want := range []string{
			`context "bucketCount": eight is not a number`,
			`context "relayTimeout": 15 is not a Go duration`,
			`context "streamsTrigger": yes is not true or false`,
			`context "logRetentionDays": 31 is not a CloudWatch Logs retention`,
			`context "maxHops": 2.5 is not a non-negative integer`,
			`context "leaseDuration": 30 is not a Go duration`,
			`context "batchSize": -1 is not a non-negative integer`,
			`context "subnetIds" needs vpcId`,
			"give both account and region",
			"existingTableName or existingTableArn, not both",
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q:\n%v", want, err)
			}
		}
	})

	// A bucket count outside what the project supports is refused, not
	// turned into the default: 0, negative, beyond the 1,024 buckets the
	// scale study covers.
	t.Run("BucketCountOutsideTheStudiedRange_IsRefused", func(t *testing.T) {
		for _, v := range []any{0.0, "0", -8.0, 1025.0, "100000"} {
			_, err := configFromContext(fromMap(map[string]any{"bucketCount": v, "previousBucketCount": v, "previousKeyPrefix": "OLD"}, nil))
			for _, key := range []string{"bucketCount", "previousBucketCount"} {
				if err == nil || !strings.Contains(err.Error(), `context "`+key+`": `) {
					t.Errorf("%s=%v: %v; want it refused", key, v, err)
				}
			}
		}
		c, err := configFromContext(fromMap(map[string]any{"bucketCount": 1024.0, "alarms": "none"}, nil))
		if err != nil || c.outbox.BucketCount != 1024 {
			t.Errorf("1024 buckets: %v, %d", err, c.outbox.BucketCount)
		}
	})

	t.Run("ReadmeDocumentsEveryContextKey", func(t *testing.T) {
		readme, err := os.ReadFile("README.md")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range contextKeys {
			if !strings.Contains(string(readme), "`"+k.name+"`") {
				t.Errorf("README.md does not document context key `%s`", k.name)
			}
		}
	})

	// A stack whose alarms notify nobody looks healthy while it is stuck:
	// synthesis wants a target or the explicit opt-out.
	t.Run("AlarmsNeedATargetOrAnExplicitOptOut", func(t *testing.T) {
		for name, tc := range map[string]struct {
			ctx  map[string]any
			want string
		}{
			"no target":             {map[string]any{}, "-c alarmEmail="},
			"opt-out with a target": {map[string]any{"alarms": "none", "alarmEmail": "ops@example.com"}, "alarms=none contradicts"},
			"unknown value":         {map[string]any{"alarms": "off"}, `"off" is not notify or none`},
		} {
			_, err := configFromContext(fromMap(tc.ctx, nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
			}
			if name == "no target" && (!strings.Contains(err.Error(), "alarmTopicArn") || !strings.Contains(err.Error(), "alarms=none")) {
				t.Errorf("%s: %v does not name alarmTopicArn and alarms=none", name, err)
			}
		}
		for _, ctx := range []map[string]any{{"alarms": "none"}, {"alarmEmail": "ops@example.com"}, {"alarmTopicArn": "arn:aws:sns:eu-west-1:123456789012:ops"}} {
			if _, err := configFromContext(fromMap(ctx, nil)); err != nil {
				t.Errorf("context %v: %v", ctx, err)
			}
		}
	})

	// A misspelled key of the stack is refused with the nearest known key; the
	// keys of CDK itself (colons, hyphens) are not the stack's to judge.
	t.Run("MisspelledContextKeySuggestsTheNearest", func(t *testing.T) {
		ctx := map[string]any{"alarms": "none", "brokers": "b-1:9092", "bucketCnt": "16", "@aws-cdk/core:someFlag": true, "acknowledged-issue-numbers": []any{1}}
		want := "context \"bucketCnt\" is not a key of the stack; did you mean bucketCount? (infra/README.md lists the keys)"
		if got := newAppError(t, ctx); got != want {
			t.Errorf("got %q\nwant %q", got, want)
		}
		if err := unknownContextKeys([]string{"zzzzzzzzzzzzzzzz", "alarmEmail", "aws:cdk:enable-path-metadata"}); err == nil || strings.Contains(err.Error(), "did you mean") {
			t.Errorf("a key near nothing: %v", err)
		}
	})

	t.Run("AlarmEmailMustBeAnAddress", func(t *testing.T) {
		for _, bad := range []string{"not-an-email", "ops@localhost", "Ops <ops@example.com>", "ops@example.com,dev@example.com"} {
			got := newAppError(t, map[string]any{"brokers": "b-1:9092", "alarmEmail": bad})
			if want := fmt.Sprintf("context \"alarmEmail\": %q is not an e-mail address such as ops@example.com", bad); got != want {
				t.Errorf("alarmEmail %q: got %q", bad, got)
			}
		}
	})

	// With no context of the stack at all, every missing key is reported at
	// once, where the relay publishes first and the build last; with only
	// alarms=none the Kafka message names the keys to set.
	t.Run("EmptyContextReportsEveryProblemAtOnceMostFundamentalFirst", func(t *testing.T) {
		got := newAppError(t, map[string]any{"distDir": t.TempDir()})
		order := []string{"-c mskClusterArn=", "-c alarmEmail=", "make build"}
		last := -1
		for _, want := range order {
			i := strings.Index(got, want)
			if i < 0 || i < last {
				t.Fatalf("want %q in this order in:\n%s", order, got)
			}
			last = i
		}
		got = newAppError(t, map[string]any{"alarms": "none", "mskClusterArn": testCluster, "kafkaAuth": "none", "mskPublicAccess": "true"})
		if !strings.HasPrefix(got, "context: looking the brokers up from mskClusterArn needs -c kafkaAuth=msk-iam") || !strings.Contains(got, "-c brokers=") {
			t.Errorf("cluster with auth none:\n%s", got)
		}
		got = newAppError(t, inVpc(map[string]any{"alarms": "none", "mskClusterArn": testCluster}))
		if got != "context: with MSK IAM the relay may write only to the topics it names: give -c topics=orders,payments" {
			t.Errorf("msk-iam without topics:\n%s", got)
		}
	})
}

// newAppError is newApp's error on cdk.json's context plus ctx, with the
// function packages built unless ctx names distDir.
func newAppError(t *testing.T, ctx map[string]any) string {
	t.Helper()
	full := cdkJSONContext(t)
	full["distDir"] = placeholderDist(t)
	for k, v := range ctx {
		full[k] = v
	}
	_, err := newApp(awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &full}))
	if err == nil {
		t.Fatalf("context %v synthesizes", ctx)
	}
	return err.Error()
}

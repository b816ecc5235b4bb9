package spillway

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

func TestFunctions(t *testing.T) {
	t.Run("RunBootstrapOnArmWithTracingAndJSONLogs", func(t *testing.T) {
		f := synth(t, nil)
		for _, c := range []struct {
			name    string
			fn      goFunction
			timeout float64
			memory  float64
		}{
			{"relay", f.outbox.relay, 900, 128},
			{"enqueue", f.outbox.enqueue, 30, 256},
		} {
			p := f.props(f.functionID(c.fn.fn))
			logs := f.logicalID(c.fn.logs.Node().DefaultChild().(awscdk.CfnElement))
			checks := map[string]any{
				"Runtime":       "provided.al2023",
				"Architectures": []any{"arm64"},
				"Handler":       "bootstrap",
				"TracingConfig": map[string]any{"Mode": "Active"},
				"LoggingConfig": map[string]any{
					"LogFormat":           "JSON",
					"ApplicationLogLevel": "INFO",
					"SystemLogLevel":      "WARN",
					"LogGroup":            map[string]any{"Ref": logs},
				},
				"Timeout":    c.timeout,
				"MemorySize": c.memory,
				"Role":       map[string]any{"Fn::GetAtt": []any{f.logicalID(c.fn.role.Node().DefaultChild().(awscdk.CfnElement)), "Arn"}},
			}
			for key, want := range checks {
				assertJSON(t, c.name+" "+key, p[key], want)
			}
			assertJSON(t, c.name+" log retention", f.props(logs)["RetentionInDays"], 30)
		}
		// Each function ships its own package.
		relayCode := f.props(f.functionID(f.outbox.relay.fn))["Code"]
		enqueueCode := f.props(f.functionID(f.outbox.enqueue.fn))["Code"]
		if canonical(relayCode) == canonical(enqueueCode) {
			t.Errorf("relay and enqueue share a code asset: %v", relayCode)
		}
	})

	t.Run("RelayConcurrencyRecursionAndAsyncInvokeConfig", func(t *testing.T) {
		f := synth(t, nil)
		relay := f.props(f.functionID(f.outbox.relay.fn))
		assertJSON(t, "reserved concurrency", relay["ReservedConcurrentExecutions"], 8)
		// The default hop limit (10) keeps chains below Lambda's loop detection
		// (about 16 invocations), which stays on.
		assertJSON(t, "recursive loop", relay["RecursiveLoop"], "Terminate")
		if name, ok := relay["FunctionName"]; ok {
			t.Errorf("relay has the fixed name %v; CloudFormation names it", name)
		}
		enqueue := f.props(f.functionID(f.outbox.enqueue.fn))
		for _, key := range []string{"ReservedConcurrentExecutions", "RecursiveLoop", "FunctionName", "VpcConfig"} {
			if v, ok := enqueue[key]; ok {
				t.Errorf("enqueue sets %s = %v; it keeps Lambda's defaults", key, v)
			}
		}
		assertJSON(t, "event invoke config", f.only("AWS::Lambda::EventInvokeConfig"), map[string]any{
			"FunctionName":             map[string]any{"Ref": f.functionID(f.outbox.relay.fn)},
			"Qualifier":                "$LATEST",
			"MaximumRetryAttempts":     0,
			"MaximumEventAgeInSeconds": 60,
		})

		g := synth(t, func(p *OutboxProps) {
			p.BucketCount = 16
			p.ReservedConcurrency = 4
			p.RelayFunctionName = "orders-relay"
		})
		relay = g.props(g.functionID(g.outbox.relay.fn))
		assertJSON(t, "reserved concurrency below the bucket count", relay["ReservedConcurrentExecutions"], 4)
		assertJSON(t, "explicit relay name", relay["FunctionName"], "orders-relay")

		// A hop limit whose chains reach the detection's limit needs Allow.
		for hops, want := range map[int]string{13: "Terminate", 14: "Allow", 30: "Allow"} {
			h := synth(t, func(p *OutboxProps) { p.MaxHops = hops })
			assertJSON(t, fmt.Sprintf("recursive loop with %d hops", hops), h.props(h.functionID(h.outbox.relay.fn))["RecursiveLoop"], want)
		}
	})

	t.Run("FunctionEnvironmentUsesTheSharedNames", func(t *testing.T) {
		f := synth(t, func(p *OutboxProps) {
			p.StopMargin = 7 * time.Second
			p.Mode = ModeHold
			p.MaxHops = 4
			p.OutboxName = "orders"
			p.MetricsNamespace = "Acme/Outbox"
			p.KeyPrefix, p.BucketCount, p.ReservedConcurrency = "OUTBOX2", 16, 8
			p.PreviousKeyPrefix, p.PreviousBucketCount, p.GenerationCheck = "OUTBOX", 8, true
		})
		table := map[string]any{"Ref": f.ofType("AWS::DynamoDB::Table")[0]}
		common := map[string]any{
			outboxconf.EnvTable:            table,
			outboxconf.EnvKeyPrefix:        "OUTBOX2",
			outboxconf.EnvPartitionKey:     "PK",
			outboxconf.EnvSortKey:          "SK",
			outboxconf.EnvBucketCount:      "16",
			outboxconf.EnvGenerationCheck:  "true",
			outboxconf.EnvOutboxName:       "orders",
			outboxconf.EnvMetricsNamespace: "Acme/Outbox",
			outboxconf.EnvTopics:           "orders,payments",
			outboxconf.EnvTracing:          "xray",
			// The relay drains the previous generation first; the enqueue
			// function writes it until the seal.
			outboxconf.EnvPreviousKeyPrefix:   "OUTBOX",
			outboxconf.EnvPreviousBucketCount: "8",
		}
		// No SPILLWAY_RELAY_FUNCTION: the relay wakes itself under
		// AWS_LAMBDA_FUNCTION_NAME.
		relayEnv := map[string]any{
			outboxconf.EnvKafkaBrokers: map[string]any{"Fn::GetAtt": []any{f.brokerLookups()[0], "BootstrapBrokerStringSaslIam"}},
			outboxconf.EnvKafkaAuth:    outboxconf.KafkaAuthIAM,
			outboxconf.EnvKafkaTLS:     "true",
			outboxconf.EnvMode:         "hold",
			outboxconf.EnvStopMargin:   "7s",
			outboxconf.EnvMaxHops:      "4",
		}
		for k, v := range common {
			relayEnv[k] = v
		}
		enqueueEnv := map[string]any{
			outboxconf.EnvRelayFunction: map[string]any{"Ref": f.functionID(f.outbox.relay.fn)},
		}
		for k, v := range common {
			enqueueEnv[k] = v
		}
		assertJSON(t, "relay environment", f.props(f.functionID(f.outbox.relay.fn))["Environment"], map[string]any{"Variables": relayEnv})
		assertJSON(t, "enqueue environment", f.props(f.functionID(f.outbox.enqueue.fn))["Environment"], map[string]any{"Variables": enqueueEnv})
	})

	t.Run("GivenBrokersNeedNoLookup", func(t *testing.T) {
		f := synth(t, func(p *OutboxProps) {
			p.Kafka = KafkaProps{
				Brokers:        []string{"b-1.example:9096", "b-2.example:9096"},
				ScramSecretArn: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:AmazonMSK_spillway-AbCdEf",
			}
		})
		if ids := f.brokerLookups(); len(ids) != 0 {
			t.Errorf("looked the brokers up although they were given: %v", ids)
		}
		env := f.props(f.functionID(f.outbox.relay.fn))["Environment"].(map[string]any)["Variables"].(map[string]any)
		for key, want := range map[string]string{
			outboxconf.EnvKafkaBrokers:     "b-1.example:9096,b-2.example:9096",
			outboxconf.EnvKafkaAuth:        outboxconf.KafkaAuthScram,
			outboxconf.EnvKafkaTLS:         "true",
			outboxconf.EnvKafkaScramSecret: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:AmazonMSK_spillway-AbCdEf",
		} {
			if env[key] != want {
				t.Errorf("%s = %v, want %s", key, env[key], want)
			}
		}
		if _, ok := env[outboxconf.EnvTopics]; ok {
			t.Errorf("%s set without topics", outboxconf.EnvTopics)
		}
	})

	t.Run("BrokerLookupReadsTheBootstrapStringOfTheAuthMode", func(t *testing.T) {
		for _, c := range []struct {
			kafka KafkaProps
			field string
		}{
			{KafkaProps{ClusterArn: testCluster, Topics: []string{"orders"}}, "BootstrapBrokerStringSaslIam"},
			{KafkaProps{ClusterArn: testCluster, ScramSecretArn: "arn:aws:secretsmanager:eu-west-1:123456789012:secret:AmazonMSK_x-AbCdEf"}, "BootstrapBrokerStringSaslScram"},
		} {
			f := synth(t, func(p *OutboxProps) { p.Kafka = c.kafka })
			lookups := f.brokerLookups()
			if len(lookups) != 1 {
				t.Fatalf("broker lookups %v, want one", lookups)
			}
			lookup := f.props(lookups[0])
			for _, phase := range []string{"Create", "Update"} {
				mustContain(t, lookup[phase].(string),
					`"action":"getBootstrapBrokers"`, `"service":"Kafka"`,
					`"outputPaths":["`+c.field+`"]`, `"ClusterArn":"`+testCluster+`"`)
			}
			env := f.props(f.functionID(f.outbox.relay.fn))["Environment"].(map[string]any)["Variables"].(map[string]any)
			assertJSON(t, "brokers", env[outboxconf.EnvKafkaBrokers], map[string]any{"Fn::GetAtt": []any{lookups[0], c.field}})
		}
	})

	t.Run("ScheduleSweepsEveryMinuteWithItsOwnRole", func(t *testing.T) {
		f := synth(t, nil)
		relay := f.functionID(f.outbox.relay.fn)
		role := f.outbox.Node().FindChild(jsii.String("Schedule")).Node().FindChild(jsii.String("Role"))
		roleID := f.logicalID(role.Node().DefaultChild().(awscdk.CfnElement))
		assertJSON(t, "schedule", f.only("AWS::Scheduler::Schedule"), map[string]any{
			"Description":        "Spillway relay sweep: drains buckets no live relay holds",
			"ScheduleExpression": "rate(1 minute)",
			"State":              "ENABLED",
			"FlexibleTimeWindow": map[string]any{"Mode": "OFF"},
			"Target": map[string]any{
				"Arn":         map[string]any{"Fn::GetAtt": []any{relay, "Arn"}},
				"RoleArn":     map[string]any{"Fn::GetAtt": []any{roleID, "Arn"}},
				"Input":       `{"trigger":"schedule"}`,
				"RetryPolicy": map[string]any{"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60},
			},
		})
		assertJSON(t, "scheduler trust", f.props(roleID)["AssumeRolePolicyDocument"], map[string]any{
			"Statement": []any{map[string]any{
				"Action":    "sts:AssumeRole",
				"Effect":    "Allow",
				"Principal": map[string]any{"Service": "scheduler.amazonaws.com"},
				"Condition": map[string]any{
					"StringEquals": map[string]any{"aws:SourceAccount": map[string]any{"Ref": "AWS::AccountId"}},
					"ArnEquals": map[string]any{"aws:SourceArn": map[string]any{"Fn::Join": []any{"", []any{
						"arn:", map[string]any{"Ref": "AWS::Partition"}, ":scheduler:", map[string]any{"Ref": "AWS::Region"}, ":",
						map[string]any{"Ref": "AWS::AccountId"}, ":schedule-group/default",
					}}}},
				},
			}},
			"Version": "2012-10-17",
		})

		g := synth(t, func(p *OutboxProps) { p.ScheduleRate = "rate(5 minutes)" })
		assertJSON(t, "custom rate", g.only("AWS::Scheduler::Schedule")["ScheduleExpression"], "rate(5 minutes)")
	})
}

package outboxlambda

import (
	"errors"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// env returns a getenv over vars.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// withVars returns the minimal valid environment plus vars.
func withVars(vars map[string]string) map[string]string {
	out := map[string]string{outboxconf.EnvTable: "outbox-table"}
	for k, v := range vars {
		out[k] = v
	}
	return out
}

// defaultConfig is what LoadConfig makes of the minimal environment.
func defaultConfig() Config {
	return Config{
		Table:              "outbox-table",
		PartitionKey:       "PK",
		SortKey:            "SK",
		KeyPrefix:          "OUTBOX",
		BucketCount:        8,
		KafkaAuth:          "none",
		Mode:               outbox.ModeDrain,
		PollInterval:       time.Second,
		TargetLatency:      outbox.DefaultTargetLatency,
		IdleTimeout:        2 * time.Second,
		StopMargin:         5 * time.Second,
		LeaseDuration:      30 * time.Second,
		LeaseRenewInterval: 10 * time.Second,
		MaxIdleTimeout:     10 * time.Second,
		BatchSize:          500,
		MaxHops:            10,
		OutboxName:         "outbox",
		MetricsNamespace:   "Spillway",
		Tracing:            "xray",
		PoisonPolicy:       outbox.PoisonBlock,
		PoisonMaxAttempts:  10,
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	t.Run("LoadConfigDefaults", func(t *testing.T) {
		t.Parallel()
		got, err := LoadConfig(env(withVars(nil)))
		if err != nil {
			t.Fatal(err)
		}
		if want := defaultConfig(); !reflect.DeepEqual(got, want) {
			t.Fatalf("defaults:\n got %+v\nwant %+v", got, want)
		}
		// The longer linger's default follows the linger.
		short, err := LoadConfig(env(withVars(map[string]string{outboxconf.EnvIdleTimeout: "300ms"})))
		if err != nil || short.MaxIdleTimeout != 1500*time.Millisecond {
			t.Fatalf("SPILLWAY_IDLE_TIMEOUT=300ms: MaxIdleTimeout %v, err %v; want 1.5s", short.MaxIdleTimeout, err)
		}
	})

	t.Run("LoadConfigReadsEveryVariable", func(t *testing.T) {
		t.Parallel()
		// Each variable beside the field it sets, to a value other than the
		// default: the whole environment must give the defaults with exactly
		// these fields changed.
		vars := []struct {
			name, value string
			set         func(*Config)
		}{
			{outboxconf.EnvTable, "orders", func(c *Config) { c.Table = "orders" }},
			{outboxconf.EnvPartitionKey, "pk", func(c *Config) { c.PartitionKey = "pk" }},
			{outboxconf.EnvSortKey, "sk", func(c *Config) { c.SortKey = "sk" }},
			{outboxconf.EnvKeyPrefix, "SHOP", func(c *Config) { c.KeyPrefix = "SHOP" }},
			{outboxconf.EnvBucketCount, "16", func(c *Config) { c.BucketCount = 16 }},
			{outboxconf.EnvDynamoDBEndpoint, "http://127.0.0.1:8000", func(c *Config) { c.DynamoDBEndpoint = "http://127.0.0.1:8000" }},
			{outboxconf.EnvKafkaBrokers, "b-1.example:9096, b-2.example:9096", func(c *Config) { c.KafkaBrokers = []string{"b-1.example:9096", "b-2.example:9096"} }},
			{outboxconf.EnvKafkaAuth, "scram-sha-512", func(c *Config) { c.KafkaAuth = "scram-sha-512" }},
			// SCRAM turns TLS on by default: "false" is a change.
			{outboxconf.EnvKafkaTLS, "false", func(c *Config) { c.KafkaTLS = false }},
			{outboxconf.EnvKafkaScramSecret, "arn:aws:secretsmanager:eu-west-1:123456789012:secret:AmazonMSK_relay-AbCdEf", func(c *Config) {
				c.KafkaScramSecretARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:AmazonMSK_relay-AbCdEf"
			}},
			{outboxconf.EnvTopics, "orders,payments.v1", func(c *Config) { c.Topics = []string{"orders", "payments.v1"} }},
			{outboxconf.EnvDoorbellTopic, "shop-doorbell", func(c *Config) { c.DoorbellTopic = "shop-doorbell" }},
			{outboxconf.EnvRelayFunction, "shop-outbox-relay", func(c *Config) { c.RelayFunction = "shop-outbox-relay" }},
			{outboxconf.EnvMode, "hold", func(c *Config) { c.Mode = outbox.ModeHold }},
			{outboxconf.EnvPollInterval, "250ms", func(c *Config) { c.PollInterval = 250 * time.Millisecond }},
			{outboxconf.EnvTargetLatency, "100ms", func(c *Config) { c.TargetLatency = 100 * time.Millisecond }},
			{outboxconf.EnvIdleTimeout, "3s", func(c *Config) { c.IdleTimeout = 3 * time.Second }},
			{outboxconf.EnvMaxIdleTimeout, "30s", func(c *Config) { c.MaxIdleTimeout = 30 * time.Second }},
			{outboxconf.EnvStopMargin, "4s", func(c *Config) { c.StopMargin = 4 * time.Second }},
			{outboxconf.EnvLeaseDuration, "20s", func(c *Config) { c.LeaseDuration = 20 * time.Second }},
			{outboxconf.EnvLeaseRenewInterval, "5s", func(c *Config) { c.LeaseRenewInterval = 5 * time.Second }},
			{outboxconf.EnvBatchSize, "100", func(c *Config) { c.BatchSize = 100 }},
			{outboxconf.EnvMaxHops, "0", func(c *Config) { c.MaxHops = 0 }},
			{outboxconf.EnvOutboxName, "shop", func(c *Config) { c.OutboxName = "shop" }},
			{outboxconf.EnvMetricsNamespace, "Shop/Outbox", func(c *Config) { c.MetricsNamespace = "Shop/Outbox" }},
			{outboxconf.EnvTracing, "otel", func(c *Config) { c.Tracing = "otel" }},
			// Checked (the exporter speaks only http/protobuf), not kept.
			{outboxconf.EnvOTelProtocol, "http/protobuf", func(*Config) {}},
			{outboxconf.EnvPoisonPolicy, "quarantine", func(c *Config) { c.PoisonPolicy = outbox.PoisonQuarantine }},
			{outboxconf.EnvPoisonMaxAttempts, "3", func(c *Config) { c.PoisonMaxAttempts = 3 }},
		}
		environment := map[string]string{}
		want := defaultConfig()
		for _, v := range vars {
			environment[v.name] = v.value
			v.set(&want)
		}
		got, err := LoadConfig(env(environment))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("\n got %+v\nwant %+v", got, want)
		}
		opts := got.RelayOptions("relay-1")
		if opts.PollInterval != 250*time.Millisecond || opts.TargetLatency != 100*time.Millisecond || opts.Mode != outbox.ModeHold || opts.BatchSize != 100 ||
			opts.LeaseDuration != 20*time.Second || opts.LeaseRenewInterval != 5*time.Second || opts.StopMargin != 4*time.Second ||
			opts.IdleTimeout != 3*time.Second || opts.MaxIdleTimeout != 30*time.Second || opts.BucketCount != 16 || opts.RelayID != "relay-1" ||
			opts.PoisonPolicy != outbox.PoisonQuarantine || opts.PoisonMaxAttempts != 3 {
			t.Fatalf("relay options do not carry the configuration: %+v", opts)
		}
		if err := opts.Validate(); err != nil {
			t.Fatalf("relay options of a valid configuration: %v", err)
		}
	})

	// With a doorbell the rings bring every commit of a held bucket, so
	// busy buckets are probed at the poll unless a target is set.
	t.Run("LoadConfigTargetLatencyFollowsTheDoorbell", func(t *testing.T) {
		t.Parallel()
		bell := map[string]string{outboxconf.EnvDoorbellTopic: "spillway-doorbell", outboxconf.EnvKafkaBrokers: "b-1.example:9098", outboxconf.EnvPollInterval: "2s"}
		for _, tc := range []struct {
			vars map[string]string
			want time.Duration
		}{
			{nil, outbox.DefaultTargetLatency},
			{bell, 2 * time.Second},
			{map[string]string{outboxconf.EnvTargetLatency: "300ms"}, 300 * time.Millisecond},
		} {
			vars := withVars(tc.vars)
			if tc.want == 300*time.Millisecond {
				for k, v := range bell {
					vars[k] = v
				}
			}
			got, err := LoadConfig(env(vars))
			if err != nil || got.TargetLatency != tc.want {
				t.Errorf("%v: TargetLatency %v, err %v; want %v", vars, got.TargetLatency, err, tc.want)
			}
		}
	})

	t.Run("LoadConfigTLSDefaultFollowsAuth", func(t *testing.T) {
		t.Parallel()
		for auth, want := range map[string]bool{"none": false, "msk-iam": true, "scram-sha-512": true} {
			vars := withVars(map[string]string{outboxconf.EnvKafkaAuth: auth})
			if auth == "scram-sha-512" {
				vars[outboxconf.EnvKafkaScramSecret] = "arn:aws:secretsmanager:us-east-1:123456789012:secret:AmazonMSK_x"
			}
			got, err := LoadConfig(env(vars))
			if err != nil {
				t.Fatalf("%s: %v", auth, err)
			}
			if got.KafkaTLS != want {
				t.Errorf("auth %s: TLS %v, want %v", auth, got.KafkaTLS, want)
			}
		}
	})

	t.Run("LoadConfigRejectsBadValues", func(t *testing.T) {
		t.Parallel()
		type badValue struct {
			variable, value string
			// extra variables that make the case reach the check
			extra map[string]string
			// wantVariable is the variable the error names (default variable)
			wantVariable string
			problem      string
		}
		cases := []badValue{
			{variable: outboxconf.EnvTable, value: "", problem: "required"},
			{variable: outboxconf.EnvTable, value: " orders", problem: "spaces"},
			{variable: outboxconf.EnvPartitionKey, value: "  ", problem: "blank"},
			{variable: outboxconf.EnvSortKey, value: "SK ", problem: "spaces"},
			{variable: outboxconf.EnvSortKey, value: "PK", problem: "must differ"},
			{variable: outboxconf.EnvPartitionKey, value: "Topic", wantVariable: outboxconf.EnvPartitionKey + "/" + outboxconf.EnvSortKey, problem: "attribute name the outbox writes"},
			{variable: outboxconf.EnvKeyPrefix, value: "\t", problem: "blank"},
			{variable: outboxconf.EnvBucketCount, value: "-3", problem: "between 1 and"},
			{variable: outboxconf.EnvBucketCount, value: "2147483648", problem: "between 1 and"},
			{variable: outboxconf.EnvDynamoDBEndpoint, value: "127.0.0.1:8000", problem: "http:// or https://"},
			{variable: outboxconf.EnvDynamoDBEndpoint, value: "ftp://host", problem: "http:// or https://"},
			{variable: outboxconf.EnvDynamoDBEndpoint, value: "http://", problem: "http:// or https://"},
			{variable: outboxconf.EnvKafkaBrokers, value: "broker", problem: `broker "broker" is not host:port`},
			{variable: outboxconf.EnvKafkaBrokers, value: "a:9092,,b:9092", problem: "empty element"},
			{variable: outboxconf.EnvKafkaBrokers, value: "a:port", problem: "not host:port"},
			{variable: outboxconf.EnvKafkaBrokers, value: ":9092", problem: "not host:port"},
			{variable: outboxconf.EnvKafkaBrokers, value: "a:70000", problem: "not host:port"},
			{variable: outboxconf.EnvKafkaAuth, value: "plain", problem: "one of none, scram-sha-512, msk-iam"},
			{variable: outboxconf.EnvKafkaAuth, value: "MSK-IAM", problem: "one of"},
			{variable: outboxconf.EnvKafkaTLS, value: "yes", problem: "not a boolean"},
			{variable: outboxconf.EnvKafkaScramSecret, value: "AmazonMSK_relay", problem: "not an ARN of secretsmanager"},
			{variable: outboxconf.EnvKafkaScramSecret, value: "arn:aws:ssm:us-east-1:1:parameter/x", problem: "not an ARN of secretsmanager"},
			{variable: outboxconf.EnvKafkaAuth, value: "scram-sha-512", wantVariable: outboxconf.EnvKafkaScramSecret, problem: "required when SPILLWAY_KAFKA_AUTH=scram-sha-512"},
			{variable: outboxconf.EnvTopics, value: "orders,bad topic", problem: `topic "bad topic"`},
			{variable: outboxconf.EnvDoorbellTopic, value: "bell,bell", problem: `topic "bell,bell"`},
			{variable: outboxconf.EnvDoorbellTopic, value: "spillway-doorbell", wantVariable: outboxconf.EnvKafkaBrokers, problem: "required with SPILLWAY_DOORBELL_TOPIC"},
			{variable: outboxconf.EnvTopics, value: "orders,", problem: "empty element"},
			{variable: outboxconf.EnvTopics, value: "..", problem: "not a legal Kafka topic name"},
			{variable: outboxconf.EnvTopics, value: strings.Repeat("t", 250), problem: "at most 249"},
			{variable: outboxconf.EnvRelayFunction, value: "my relay", problem: "not a Lambda function name"},
			{variable: outboxconf.EnvRelayFunction, value: strings.Repeat("f", 171), problem: "longer than 170"},
			{variable: outboxconf.EnvMode, value: "drain-all", problem: "one of drain, hold"},
			{variable: outboxconf.EnvPoisonPolicy, value: "skip", problem: "one of block, quarantine"},
			{variable: outboxconf.EnvPreviousKeyPrefix, value: "OLD", problem: "required with SPILLWAY_PREVIOUS_KEY_PREFIX", wantVariable: outboxconf.EnvPreviousBucketCount},
			{variable: outboxconf.EnvPreviousBucketCount, value: "4", problem: "required with SPILLWAY_PREVIOUS_BUCKET_COUNT", wantVariable: outboxconf.EnvPreviousKeyPrefix},
			{variable: outboxconf.EnvPreviousKeyPrefix, value: "OUTBOX", extra: map[string]string{outboxconf.EnvPreviousBucketCount: "4"}, problem: "equals SPILLWAY_KEY_PREFIX"},
			{variable: outboxconf.EnvGenerationCheck, value: "sometimes", problem: "not a boolean"},
			{variable: outboxconf.EnvIdleTimeout, value: "-1s", problem: "positive"},
			{variable: outboxconf.EnvMaxIdleTimeout, value: "1s", problem: "must be at least SPILLWAY_IDLE_TIMEOUT (2s)"},
			{variable: outboxconf.EnvLeaseDuration, value: "5s", wantVariable: outboxconf.EnvLeaseRenewInterval, problem: "must be shorter than SPILLWAY_LEASE_DURATION"},
			{variable: outboxconf.EnvLeaseRenewInterval, value: "30s", problem: "must be shorter than SPILLWAY_LEASE_DURATION (30s)"},
			{variable: outboxconf.EnvMaxHops, value: "-1", problem: "between 0 and"},
			{variable: outboxconf.EnvOutboxName, value: " ", problem: "blank"},
			{variable: outboxconf.EnvMetricsNamespace, value: "Spillway ", problem: "spaces"},
			{variable: outboxconf.EnvTracing, value: "jaeger", problem: "one of xray, otel, off"},
			{variable: outboxconf.EnvTracing, value: "OTEL", problem: "one of xray, otel, off"},
			{variable: outboxconf.EnvOTelProtocol, value: "grpc", extra: map[string]string{outboxconf.EnvTracing: "otel"}, problem: "only http/protobuf is supported"},
			{variable: outboxconf.EnvOTelTracesProtocol, value: "http/json", extra: map[string]string{outboxconf.EnvTracing: "otel"}, problem: "only http/protobuf is supported"},
		}
		// Every duration refuses a number without a unit and a duration that is
		// not positive; every count refuses what is not a decimal integer, and
		// those that count from 1 refuse 0.
		for _, v := range []string{outboxconf.EnvPollInterval, outboxconf.EnvTargetLatency, outboxconf.EnvIdleTimeout, outboxconf.EnvMaxIdleTimeout,
			outboxconf.EnvStopMargin, outboxconf.EnvLeaseDuration, outboxconf.EnvLeaseRenewInterval} {
			cases = append(cases, badValue{variable: v, value: "30", problem: "not a Go duration"},
				badValue{variable: v, value: "0s", problem: "positive"})
		}
		for _, v := range []string{outboxconf.EnvBucketCount, outboxconf.EnvBatchSize, outboxconf.EnvPoisonMaxAttempts,
			outboxconf.EnvPreviousBucketCount, outboxconf.EnvMaxHops} {
			cases = append(cases, badValue{variable: v, value: "1e3", problem: "not a decimal integer"})
			if v != outboxconf.EnvMaxHops {
				cases = append(cases, badValue{variable: v, value: "0", problem: "between 1 and"})
			}
		}
		for _, c := range cases {
			t.Run(c.variable+"="+c.value, func(t *testing.T) {
				t.Parallel()
				vars := withVars(c.extra)
				vars[c.variable] = c.value
				if c.value == "" {
					delete(vars, c.variable)
				}
				_, err := LoadConfig(env(vars))
				var ce *ConfigError
				if !errors.As(err, &ce) {
					t.Fatalf("error %v is not a *ConfigError", err)
				}
				if !errors.Is(err, outbox.ErrMisconfigured) {
					t.Errorf("error does not match outbox.ErrMisconfigured")
				}
				wantVar := c.wantVariable
				if wantVar == "" {
					wantVar = c.variable
				}
				if ce.Variable != wantVar {
					t.Errorf("error names %s, want %s (%v)", ce.Variable, wantVar, err)
				}
				msg := err.Error()
				if !strings.Contains(msg, wantVar) || !strings.Contains(msg, c.problem) {
					t.Errorf("error %q should name %s and say %q", msg, wantVar, c.problem)
				}
				if wantVar == c.variable && !strings.Contains(msg, strconv.Quote(c.value)) {
					t.Errorf("error %q does not show the bad value %q", msg, c.value)
				}
			})
		}
	})

	t.Run("KafkaConfigNeedsBrokers", func(t *testing.T) {
		t.Parallel()
		cfg, err := LoadConfig(env(withVars(nil)))
		if err != nil {
			t.Fatal(err)
		}
		_, err = cfg.KafkaConfig(t.Context(), nil)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Variable != outboxconf.EnvKafkaBrokers {
			t.Fatalf("error %v, want a *ConfigError naming %s", err, outboxconf.EnvKafkaBrokers)
		}
	})

	// The relay bounds the messages it holds, and its Kafka client's buffer,
	// from the memory it has: Lambda's memory size, or SPILLWAY_MEMORY_MB,
	// which wins (and serves outside Lambda).
	t.Run("BoundsHeldMessagesFromTheMemory", func(t *testing.T) {
		t.Parallel()
		for name, c := range map[string]struct {
			vars map[string]string
			want int64
		}{
			"outside Lambda":         {nil, 0},
			"Lambda's memory":        {map[string]string{outboxconf.EnvLambdaMemory: "512"}, 205_101_465},
			"the variable wins":      {map[string]string{outboxconf.EnvLambdaMemory: "512", outboxconf.EnvMemoryMB: "2048"}, 889_611_878},
			"the variable elsewhere": {map[string]string{outboxconf.EnvMemoryMB: "256"}, 91_016_396},
		} {
			cfg, err := LoadConfig(env(withVars(c.vars)))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got := cfg.RelayOptions("r").MaxHeldBytes; got != c.want {
				t.Errorf("%s: MaxHeldBytes %d, want %d", name, got, c.want)
			}
			// The Kafka client buffers a quarter of it for one Flush.
			cfg.KafkaBrokers = []string{"127.0.0.1:9092"}
			kcfg, err := cfg.KafkaConfig(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if kcfg.MaxBufferedBytes != c.want/4 {
				t.Errorf("%s: Kafka MaxBufferedBytes %d, want %d", name, kcfg.MaxBufferedBytes, c.want/4)
			}
		}
		if _, err := LoadConfig(env(withVars(map[string]string{outboxconf.EnvMemoryMB: "lots"}))); err == nil {
			t.Error("a memory size that is not a number was accepted")
		}
	})

	t.Run("SetMemoryLimitFollowsTheFunctionsMemory", func(t *testing.T) {
		before := debug.SetMemoryLimit(-1)
		t.Cleanup(func() { debug.SetMemoryLimit(before) })
		if got := SetMemoryLimit(env(map[string]string{outboxconf.EnvLambdaMemory: "512", "GOMEMLIMIT": "100MiB"})); got != 0 {
			t.Errorf("GOMEMLIMIT set: limit %d, want none", got)
		}
		if got := SetMemoryLimit(env(nil)); got != 0 {
			t.Errorf("outside Lambda: limit %d, want none", got)
		}
		// 85% of 512 MB less the binary's 32 MB; SPILLWAY_MEMORY_MB wins.
		got := SetMemoryLimit(env(map[string]string{outboxconf.EnvLambdaMemory: "512"}))
		if want := int64(422_785_843); got != want || debug.SetMemoryLimit(-1) != want {
			t.Errorf("limit %d (runtime %d), want %d", got, debug.SetMemoryLimit(-1), want)
		}
		if got, want := SetMemoryLimit(env(map[string]string{outboxconf.EnvLambdaMemory: "512", outboxconf.EnvMemoryMB: "128"})), int64(80_530_636); got != want {
			t.Errorf("SPILLWAY_MEMORY_MB 128: limit %d, want %d", got, want)
		}
	})
}

package spillway

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

func TestProps(t *testing.T) {
	t.Run("Defaults", func(t *testing.T) {
		p := baseProps().WithDefaults()
		checks := map[string][2]any{
			"PartitionKey":        {p.PartitionKey, "PK"},
			"SortKey":             {p.SortKey, "SK"},
			"KeyPrefix":           {p.KeyPrefix, "OUTBOX"},
			"BucketCount":         {p.BucketCount, 8},
			"ReservedConcurrency": {p.ReservedConcurrency, 8},
			"DeletionProtection":  {*p.DeletionProtection, true},
			"OutboxName":          {p.OutboxName, "OUTBOX"},
			"MetricsNamespace":    {p.MetricsNamespace, "Spillway"},
			"RelayTimeout":        {p.RelayTimeout, 15 * time.Minute},
			"StopMargin":          {p.StopMargin, 5 * time.Second},
			"Mode":                {p.Mode, "drain"},
			"MaxHops":             {p.MaxHops, outboxconf.DefaultMaxHops},
			"ScheduleRate":        {p.ScheduleRate, "rate(1 minute)"},
			"Auth":                {p.Kafka.Auth, outboxconf.KafkaAuthIAM},
			"TLS":                 {*p.Kafka.TLS, true},
			"Port":                {p.Kafka.Port, 9098},
			"OldestPendingAge":    {p.Alarms.OldestPendingAge, 300 * time.Second},
			"DurationPercent":     {p.Alarms.DurationPercent, 100 * (900 - 2.5) / 900},
			// Unset relay tuning stays unset: the relay applies its defaults.
			"PollInterval":      {p.PollInterval, time.Duration(0)},
			"TargetLatency":     {p.TargetLatency, time.Duration(0)},
			"MaxIdleTimeout":    {p.MaxIdleTimeout, time.Duration(0)},
			"BatchSize":         {p.BatchSize, 0},
			"PoisonPolicy":      {p.PoisonPolicy, ""},
			"PoisonMaxAttempts": {p.PoisonMaxAttempts, 0},
		}
		for name, c := range checks {
			if c[0] != c[1] {
				t.Errorf("%s = %v, want %v", name, c[0], c[1])
			}
		}
		if err := p.Validate(); err != nil {
			t.Errorf("defaults do not validate: %v", err)
		}
		ports := map[string]int{outboxconf.KafkaAuthScram: 9096}
		for auth, port := range ports {
			k := KafkaProps{Auth: auth}.withDefaults()
			if k.Port != port || !*k.TLS {
				t.Errorf("%s: port %d TLS %v", auth, k.Port, *k.TLS)
			}
		}
		if k := (KafkaProps{Brokers: []string{"k:9092"}}).withDefaults(); k.Auth != outboxconf.KafkaAuthNone || *k.TLS || k.Port != 9092 {
			t.Errorf("plaintext defaults: %+v TLS %v", k, *k.TLS)
		}
		tls := true
		if k := (KafkaProps{Brokers: []string{"k:9094"}, TLS: &tls}).withDefaults(); k.Port != 9094 {
			t.Errorf("TLS without auth: port %d, want 9094", k.Port)
		}
	})

	t.Run("ValidateRejectsEachMistakeWithItsReason", func(t *testing.T) {
		cases := map[string]struct {
			mutate func(*OutboxProps)
			want   string
		}{
			"no code":                        {func(p *OutboxProps) { p.RelayCode = nil }, "make build"},
			"same keys":                      {func(p *OutboxProps) { p.PartitionKey, p.SortKey = "K", "K" }, "must be non-blank and differ"},
			"blank prefix":                   {func(p *OutboxProps) { p.KeyPrefix = " " }, "key prefix is blank"},
			"concurrency above bucket count": {func(p *OutboxProps) { p.ReservedConcurrency = 9 }, "reserved concurrency must be in [1, bucket count 8], got 9"},
			"bad mode":                       {func(p *OutboxProps) { p.Mode = "forever" }, `mode must be "drain" or "hold"`},
			// Beyond the 1,024 buckets the scale study covers.
			"bucket count beyond the study":   {func(p *OutboxProps) { p.BucketCount = 100000 }, "bucket count must be from 1 to 1024"},
			"negative bucket count":           {func(p *OutboxProps) { p.BucketCount = -8 }, "bucket count must be from 1 to 1024"},
			"previous count beyond the study": {func(p *OutboxProps) { p.PreviousKeyPrefix, p.PreviousBucketCount = "OLD", 2048 }, "previous bucket count must be at most 1024"},
			"timeout too long":                {func(p *OutboxProps) { p.RelayTimeout = 16 * time.Minute }, "relay timeout"},
			"fractional timeout":              {func(p *OutboxProps) { p.RelayTimeout = 1500 * time.Millisecond }, "relay timeout"},
			"margin beyond timeout":           {func(p *OutboxProps) { p.RelayTimeout = 10 * time.Second; p.StopMargin = 10 * time.Second }, "stop margin"},
			"memory":                          {func(p *OutboxProps) { p.RelayMemoryMB = 64 }, "memory sizes"},
			"previous prefix alone":           {func(p *OutboxProps) { p.PreviousKeyPrefix = "OLD" }, "go together (both or neither)"},
			"previous count alone":            {func(p *OutboxProps) { p.PreviousBucketCount = 4 }, "go together (both or neither)"},
			"previous prefix is the prefix":   {func(p *OutboxProps) { p.PreviousKeyPrefix, p.PreviousBucketCount = "OUTBOX", 4 }, `other than key prefix "OUTBOX"`},
			"schedule":                        {func(p *OutboxProps) { p.ScheduleRate = "every minute" }, "schedule rate"},
			"long name":                       {func(p *OutboxProps) { p.RelayFunctionName = strings.Repeat("r", 65) }, "at most 64"},
			"duration percent":                {func(p *OutboxProps) { p.Alarms.DurationPercent = 120 }, "duration alarm percent"},
			"iam without topics":              {func(p *OutboxProps) { p.Kafka.Topics = nil }, "msk-iam needs the topics"},
			"iam without cluster": {func(p *OutboxProps) {
				p.Kafka = KafkaProps{Auth: outboxconf.KafkaAuthIAM, Brokers: []string{"b:9098"}, Topics: []string{"t"}}
			}, "msk-iam needs the cluster ARN"},
			"scram without secret": {func(p *OutboxProps) { p.Kafka.Auth = outboxconf.KafkaAuthScram }, "needs the SCRAM secret ARN"},
			"unknown auth":         {func(p *OutboxProps) { p.Kafka.Auth = "kerberos" }, `got "kerberos"`},
			"no brokers":           {func(p *OutboxProps) { p.Kafka = KafkaProps{} }, "give the brokers or an MSK cluster ARN"},
			"bad broker":           {func(p *OutboxProps) { p.Kafka.Brokers = []string{"nohost"} }, `broker "nohost" is not host:port`},
			"bad topic":            {func(p *OutboxProps) { p.Kafka.Topics = []string{"a/b"} }, `topic "a/b"`},
			"bad cluster arn": {func(p *OutboxProps) {
				p.Kafka.ClusterArn = "arn:aws:kafka:eu-west-1:123456789012:topic/orders/uuid/t"
			}, "is not cluster/<name>/<uuid>"},
			"network without cidr": {func(p *OutboxProps) {
				p.Network = &NetworkProps{VpcID: "vpc-1", SubnetIDs: []string{"subnet-1"}}
			}, "vpc cidr is required"},
			"gateway without route tables": {func(p *OutboxProps) {
				p.Network = &NetworkProps{VpcID: "vpc-1", VpcCidr: "10.0.0.0/16", SubnetIDs: []string{"subnet-1"}, DynamoDBEndpoint: true}
			}, "route table ids"},
		}
		for name, c := range cases {
			t.Run(name, func(t *testing.T) {
				p := baseProps()
				c.mutate(&p)
				err := p.WithDefaults().Validate()
				if !errors.Is(err, ErrInvalidProps) {
					t.Fatalf("want ErrInvalidProps, got %v", err)
				}
				mustContain(t, err.Error(), c.want)
			})
		}
	})

	t.Run("NewOutboxPanicsOnInvalidProps", func(t *testing.T) {
		defer func() {
			err, ok := recover().(error)
			if !ok || !errors.Is(err, ErrInvalidProps) {
				t.Fatalf("want a panic with ErrInvalidProps, got %v", err)
			}
		}()
		synth(t, func(p *OutboxProps) { p.BucketCount = 4; p.ReservedConcurrency = 5 })
	})
}

package spillway

import (
	"errors"
	"slices"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

func TestDoorbell(t *testing.T) {
	envOf := func(f *fixture, fn string) map[string]any {
		id := f.functionID(f.outbox.relay.fn)
		if fn == "enqueue" {
			id = f.functionID(f.outbox.enqueue.fn)
		}
		return f.props(id)["Environment"].(map[string]any)["Variables"].(map[string]any)
	}

	// With a doorbell the enqueue function reaches the brokers as the relay
	// does (the relay's VPC and security group, its Kafka settings) and may
	// only describe and write the doorbell topic; the relay may describe
	// and read it.
	t.Run("TheEnqueueFunctionReachesTheBrokersAsTheRelay", func(t *testing.T) {
		f := synth(t, func(p *OutboxProps) {
			n := testNetwork
			p.Network = &n
			p.Kafka.DoorbellTopic = "spillway-doorbell"
		})
		relay, enqueue := envOf(f, "relay"), envOf(f, "enqueue")
		for _, name := range []string{outboxconf.EnvDoorbellTopic, outboxconf.EnvKafkaBrokers, outboxconf.EnvKafkaAuth, outboxconf.EnvKafkaTLS} {
			assertJSON(t, "enqueue "+name, enqueue[name], relay[name])
		}
		if relay[outboxconf.EnvDoorbellTopic] != "spillway-doorbell" {
			t.Errorf("relay %s = %v", outboxconf.EnvDoorbellTopic, relay[outboxconf.EnvDoorbellTopic])
		}
		assertJSON(t, "enqueue VPC config", f.props(f.functionID(f.outbox.enqueue.fn))["VpcConfig"],
			f.props(f.functionID(f.outbox.relay.fn))["VpcConfig"])
		doorbell := "arn:aws:kafka:eu-west-1:123456789012:topic/orders/1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d-3/spillway-doorbell"
		grants := f.grants()
		for role, want := range map[string][]stmt{
			f.roleID(f.outbox.relay.role): {newStmt([]string{"kafka-cluster:DescribeTopic", "kafka-cluster:ReadData"}, []any{doorbell}, nil)},
			f.roleID(f.outbox.enqueue.role): {
				newStmt([]string{"kafka-cluster:Connect"}, []any{testCluster}, nil),
				newStmt([]string{"kafka-cluster:DescribeTopic", "kafka-cluster:WriteData"}, []any{doorbell}, nil),
				newStmt(eniActions, []any{"*"}, nil),
			},
		} {
			for _, s := range want {
				if !slices.Contains(grants[role], s.String()) {
					t.Errorf("%s lacks %s; has %v", role, s, grants[role])
				}
			}
		}
		// Writers' services ring with credentials of their own: the
		// managed policy does not change.
		writers := grants["managed:"+f.logicalID(f.outbox.writers.Node().DefaultChild().(awscdk.CfnElement))]
		if len(writers) != 3 {
			t.Errorf("writers' policy has %d statements, want the 3 without a doorbell", len(writers))
		}
	})

	t.Run("WithoutItTheEnqueueFunctionNeedsNoKafka", func(t *testing.T) {
		f := synth(t, func(p *OutboxProps) { n := testNetwork; p.Network = &n })
		for _, fn := range []string{"relay", "enqueue"} {
			if v, ok := envOf(f, fn)[outboxconf.EnvDoorbellTopic]; ok {
				t.Errorf("%s has %s=%v", fn, outboxconf.EnvDoorbellTopic, v)
			}
		}
		if _, ok := envOf(f, "enqueue")[outboxconf.EnvKafkaBrokers]; ok {
			t.Error("the enqueue function has the brokers without a doorbell")
		}
		if _, ok := f.props(f.functionID(f.outbox.enqueue.fn))["VpcConfig"]; ok {
			t.Error("the enqueue function is in the VPC without a doorbell")
		}
	})

	t.Run("RefusesABadTopicName", func(t *testing.T) {
		p := baseProps()
		p.Kafka.DoorbellTopic = "door bell"
		if err := p.WithDefaults().Validate(); !errors.Is(err, ErrInvalidProps) {
			t.Fatalf("Validate = %v, want ErrInvalidProps", err)
		}
	})
}

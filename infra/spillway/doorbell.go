package spillway

import (
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// The doorbell (KafkaProps.DoorbellTopic, SPILLWAY_DOORBELL_TOPIC on both
// functions): the enqueue function produces one small record per bucket
// after every commit, and the relay fetches the records of the buckets it
// holds and publishes their messages at once instead of at its next probe
// (docs/benchmarks.md, "The doorbell"). The enqueue function then reaches
// the brokers as the relay does: it gets the Kafka settings, and the
// relay's subnets and security group when the relay is in a VPC. The topic
// is the operator's to create (docs/operations.md).

// doorbell reports whether the outbox rings a doorbell.
func (p OutboxProps) doorbell() bool { return p.Kafka.DoorbellTopic != "" }

// kafkaEnv is how a function reaches the brokers.
func kafkaEnv(p OutboxProps, brokers *string) map[string]*string {
	env := map[string]*string{
		outboxconf.EnvKafkaBrokers: brokers,
		outboxconf.EnvKafkaAuth:    jsii.String(p.Kafka.Auth),
		outboxconf.EnvKafkaTLS:     jsii.String(strconv.FormatBool(*p.Kafka.TLS)),
	}
	if p.Kafka.Auth == outboxconf.KafkaAuthScram {
		env[outboxconf.EnvKafkaScramSecret] = jsii.String(p.Kafka.ScramSecretArn)
	}
	return env
}

// enqueueEnv is the enqueue function's environment: commonEnv and, with a
// doorbell, the topic and the way to the brokers.
func enqueueEnv(p OutboxProps, table, relayName, brokers *string) map[string]*string {
	env := commonEnv(p, table, relayName)
	if p.doorbell() {
		for k, v := range kafkaEnv(p, brokers) {
			env[k] = v
		}
		env[outboxconf.EnvDoorbellTopic] = jsii.String(p.Kafka.DoorbellTopic)
	}
	return env
}

// configureEnqueue places the ringing enqueue function beside the relay.
func configureEnqueue(p OutboxProps, network *relayNetwork) func(*awslambda.FunctionProps) {
	return func(fp *awslambda.FunctionProps) {
		if p.doorbell() && network != nil {
			network.configure(fp)
		}
	}
}

// doorbellStatements are the MSK IAM permissions on the doorbell topic:
// the relay describes and reads it (a fetch of chosen partitions, no
// consumer group), a writer connects, describes and writes it (without
// idempotence: a ring is worth nothing a second later).
func doorbellStatements(k KafkaProps, write bool) []awsiam.PolicyStatement {
	topic := topicArn(k.ClusterArn, k.DoorbellTopic)
	if !write {
		return []awsiam.PolicyStatement{statement([]string{"kafka-cluster:DescribeTopic", "kafka-cluster:ReadData"}, topic)}
	}
	return []awsiam.PolicyStatement{
		statement([]string{"kafka-cluster:Connect"}, jsii.String(k.ClusterArn)),
		statement([]string{"kafka-cluster:DescribeTopic", "kafka-cluster:WriteData"}, topic),
	}
}

// grantDoorbell gives the relay the read and the enqueue function the
// write of the doorbell, and the enqueue function what the relay has to
// reach the brokers (the SCRAM secret, the network interfaces).
func (o *outbox) grantDoorbell() {
	p := o.props
	if !p.doorbell() {
		return
	}
	switch p.Kafka.Auth {
	case outboxconf.KafkaAuthIAM:
		for _, s := range doorbellStatements(p.Kafka, false) {
			o.relay.role.AddToPrincipalPolicy(s)
		}
		for _, s := range doorbellStatements(p.Kafka, true) {
			o.enqueue.role.AddToPrincipalPolicy(s)
		}
	case outboxconf.KafkaAuthScram:
		for _, s := range scramStatements(p.Kafka) {
			o.enqueue.role.AddToPrincipalPolicy(s)
		}
	}
	if p.Network != nil {
		o.enqueue.role.AddToPrincipalPolicy(statement(eniActions, jsii.String("*")))
	}
}

// scramStatements read the SCRAM secret, and decrypt it through Secrets
// Manager only.
func scramStatements(k KafkaProps) []awsiam.PolicyStatement {
	out := []awsiam.PolicyStatement{statement([]string{"secretsmanager:GetSecretValue"}, jsii.String(k.ScramSecretArn))}
	if k.ScramSecretKmsKeyArn != "" {
		s := statement([]string{"kms:Decrypt"}, jsii.String(k.ScramSecretKmsKeyArn))
		s.AddCondition(jsii.String("StringEquals"), map[string]interface{}{
			"kms:ViaService": awscdk.Fn_Sub(jsii.String("secretsmanager.${AWS::Region}.amazonaws.com"), nil),
		})
		out = append(out, s)
	}
	return out
}

// validDoorbell checks the doorbell topic's name as the topics'.
func (k KafkaProps) validDoorbell() bool {
	return k.DoorbellTopic == "" || !strings.ContainsAny(k.DoorbellTopic, "/,* ")
}

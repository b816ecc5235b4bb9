package spillway

import (
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/customresources"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// clusterArn is a parsed MSK cluster ARN:
// arn:<partition>:kafka:<region>:<account>:cluster/<name>/<uuid>.
type clusterArn struct {
	partition, region, account, name, uuid string
}

func parseClusterArn(arn string) (clusterArn, error) {
	fields := strings.SplitN(arn, ":", 6)
	if len(fields) != 6 || fields[0] != "arn" || fields[2] != "kafka" || fields[1] == "" || fields[3] == "" || fields[4] == "" {
		return clusterArn{}, fmt.Errorf("cluster ARN %q is not arn:<partition>:kafka:<region>:<account>:cluster/<name>/<uuid>", arn)
	}
	res := strings.Split(fields[5], "/")
	if len(res) != 3 || res[0] != "cluster" || res[1] == "" || res[2] == "" {
		return clusterArn{}, fmt.Errorf("cluster ARN %q: resource %q is not cluster/<name>/<uuid>", arn, fields[5])
	}
	return clusterArn{partition: fields[1], region: fields[3], account: fields[4], name: res[1], uuid: res[2]}, nil
}

// topicArn derives a topic's ARN from its cluster's ARN: MSK names topics
// arn:<partition>:kafka:<region>:<account>:topic/<cluster name>/<cluster uuid>/<topic>.
// A literal cluster ARN gives a literal topic ARN; a token (a cluster
// defined in the same app) is split and joined by CloudFormation.
func topicArn(cluster, topic string) *string {
	if !isToken(cluster) {
		if c, err := parseClusterArn(cluster); err == nil {
			return jsii.String(fmt.Sprintf("arn:%s:kafka:%s:%s:topic/%s/%s/%s", c.partition, c.region, c.account, c.name, c.uuid, topic))
		}
	}
	parts := *awscdk.Fn_Split(jsii.String(":cluster/"), jsii.String(cluster), jsii.Number(2))
	return awscdk.Fn_Join(jsii.String(""), &[]*string{parts[0], jsii.String(":topic/"), parts[1], jsii.String("/" + topic)})
}

// mskStatements are the relay's MSK IAM permissions for an idempotent
// producer: connect and write idempotently on the cluster, describe and
// write on the named topics only.
func mskStatements(k KafkaProps) []awsiam.PolicyStatement {
	topics := make([]*string, 0, len(k.Topics))
	for _, t := range k.Topics {
		topics = append(topics, topicArn(k.ClusterArn, t))
	}
	return []awsiam.PolicyStatement{
		statement([]string{"kafka-cluster:Connect", "kafka-cluster:WriteDataIdempotently"}, jsii.String(k.ClusterArn)),
		statement([]string{"kafka-cluster:DescribeTopic", "kafka-cluster:WriteData"}, topics...),
	}
}

// bootstrapBrokers returns the comma-separated broker list for
// SPILLWAY_KAFKA_BROKERS: the given brokers, or the cluster's bootstrap
// string for the auth mode, read at deploy time with
// kafka:GetBootstrapBrokers (the only way to learn it without credentials
// at synth).
func bootstrapBrokers(scope constructs.Construct, k KafkaProps, calls sdkCalls) *string {
	if len(k.Brokers) > 0 {
		return jsii.String(strings.Join(k.Brokers, ","))
	}
	field := "BootstrapBrokerStringSaslIam"
	if k.Auth == outboxconf.KafkaAuthScram {
		field = "BootstrapBrokerStringSaslScram"
	}
	call := &customresources.AwsSdkCall{
		Service:            jsii.String("Kafka"),
		Action:             jsii.String("getBootstrapBrokers"),
		Parameters:         map[string]*string{"ClusterArn": jsii.String(k.ClusterArn)},
		PhysicalResourceId: customresources.PhysicalResourceId_Of(jsii.String(k.ClusterArn)),
		OutputPaths:        &[]*string{jsii.String(field)},
	}
	lookup := constructs.NewConstruct(scope, jsii.String("BootstrapBrokers"))
	cr := customresources.NewAwsCustomResource(lookup, jsii.String("Lookup"), &customresources.AwsCustomResourceProps{
		OnCreate:            call,
		OnUpdate:            call,
		Role:                calls.role,
		LogGroup:            calls.logs,
		InstallLatestAwsSdk: jsii.Bool(false),
		Policy: customresources.AwsCustomResourcePolicy_FromStatements(&[]awsiam.PolicyStatement{
			statement([]string{"kafka:GetBootstrapBrokers"}, jsii.String(k.ClusterArn)),
		}),
	})
	suppressProviderRuntime(scope)
	return cr.GetResponseField(jsii.String(field))
}

func statement(actions []string, resources ...*string) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Effect:    awsiam.Effect_ALLOW,
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	})
}

func isToken(s string) bool {
	return *awscdk.Token_IsUnresolved(jsii.String(s))
}

package spillway

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// suppression is one cdk-nag suppression found in the template.
type suppression struct {
	Resource, Rule, AppliesTo, Reason string
}

// suppressions reads every cdk-nag suppression recorded in resource
// metadata, by logical id.
func (f *fixture) suppressions() []suppression {
	var out []suppression
	for id, r := range f.res {
		meta, _ := r["Metadata"].(map[string]any)
		nag, _ := meta["cdk_nag"].(map[string]any)
		rules, _ := nag["rules_to_suppress"].([]any)
		for _, raw := range rules {
			rule := raw.(map[string]any)
			s := suppression{Resource: id, Rule: rule["id"].(string), Reason: rule["reason"].(string)}
			if applies, ok := rule["applies_to"].([]any); ok {
				var parts []string
				for _, a := range applies {
					parts = append(parts, a.(string))
				}
				s.AppliesTo = strings.Join(parts, ",")
			}
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b suppression) int { return strings.Compare(a.Resource+a.Rule, b.Resource+b.Rule) })
	return out
}

func TestNag(t *testing.T) {
	// The construct is checked against the AwsSolutions and Serverless packs.
	t.Run("AwsSolutionsChecksPassWithOnlyTheWrittenSuppressions", func(t *testing.T) {
		configs := map[string]func(*OutboxProps){
			"msk-iam lookup": nil,
			"scram in a VPC with streams, endpoints and e-mail alarms": func(p *OutboxProps) {
				n := testNetwork
				n.DynamoDBEndpoint, n.LambdaEndpoint = true, true
				p.Network = &n
				p.StreamsTrigger = true
				p.Kafka = KafkaProps{
					ClusterArn:           testCluster,
					ScramSecretArn:       "arn:aws:secretsmanager:eu-west-1:123456789012:secret:AmazonMSK_spillway-AbCdEf",
					ScramSecretKmsKeyArn: "arn:aws:kms:eu-west-1:123456789012:key/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0",
				}
				p.Alarms.Email = "ops@example.com"
			},
			"plaintext brokers, existing topic": func(p *OutboxProps) {
				p.Kafka = KafkaProps{Brokers: []string{"kafka.internal:9092"}}
				p.Alarms.TopicArn = "arn:aws:sns:eu-west-1:123456789012:ops"
			},
		}
		for name, mutate := range configs {
			t.Run(name, func(t *testing.T) {
				f := synth(t, mutate)
				if ann := f.annotations(); len(ann) > 0 {
					t.Errorf("unsuppressed findings or warnings:\n%s", strings.Join(ann, "\n"))
				}
				relayPolicy := f.logicalID(f.outbox.relay.role.Node().FindChild(jsii.String("DefaultPolicy")).Node().DefaultChild().(awscdk.CfnElement))
				enqueuePolicy := f.logicalID(f.outbox.enqueue.role.Node().FindChild(jsii.String("DefaultPolicy")).Node().DefaultChild().(awscdk.CfnElement))
				relayReason := reasonXRay
				if f.outbox.props.Network != nil {
					relayReason += " " + reasonENI
				}
				o := f.outbox
				cfn := func(c constructs.IConstruct) string { return f.logicalID(c.Node().DefaultChild().(awscdk.CfnElement)) }
				want := []suppression{
					{enqueuePolicy, "AwsSolutions-IAM5", "Resource::*", reasonXRay},
					{relayPolicy, "AwsSolutions-IAM5", "Resource::*", relayReason},
					{f.functionID(o.relay.fn), "Serverless-LambdaDLQ", "", reasonWakeUpsAreHints},
					{cfn(o.relay.fn.Node().FindChild(jsii.String("EventInvokeConfig"))), "Serverless-LambdaAsyncFailureDestination", "", reasonWakeUpsAreHints},
					{f.functionID(o.enqueue.fn), "Serverless-LambdaDLQ", "", reasonSynchronous},
				}
				if o.streamsTrigger != nil {
					want = append(want, suppression{cfn(o.streamsTrigger), "Serverless-LambdaEventSourceMappingDestination", "", reasonStreamHints})
				}
				if o.props.Alarms.Email != "" {
					sub := o.Node().FindChild(jsii.String("AlarmTopic")).Node().FindChild(jsii.String(o.props.Alarms.Email))
					want = append(want, suppression{cfn(sub), "Serverless-SNSRedrivePolicy", "", reasonEmailAlarms})
				}
				providers := 0
				if provider := f.stack.Node().TryFindChild(jsii.String(awsCustomResourceProvider)); provider != nil {
					providers++
					id := f.logicalID(provider.Node().FindChild(jsii.String("Resource")).(awscdk.CfnElement))
					want = append(want, suppression{id, "AwsSolutions-L1", "", reasonProviderRuntime})
					for _, rule := range []string{"Serverless-LambdaDefaultMemorySize", "Serverless-LambdaDLQ", "Serverless-LambdaLatestVersion", "Serverless-LambdaTracing"} {
						want = append(want, suppression{id, rule, "", reasonProvider})
					}
				}
				slices.SortFunc(want, func(a, b suppression) int { return strings.Compare(a.Resource+a.Rule, b.Resource+b.Rule) })
				assertJSON(t, "suppressions", f.suppressions(), want)
				// The layout record and the broker lookups share one provider.
				if got := len(f.ofType("Custom::AWS")); providers != 1 || got != 1+len(f.brokerLookups()) {
					t.Errorf("%d deploy-time calls (%d broker lookups), %d providers; want the layout record and the lookups on one", got, len(f.brokerLookups()), providers)
				}
				// Every suppression says why.
				for _, s := range f.suppressions() {
					if len(s.Reason) < 40 {
						t.Errorf("suppression %s on %s has no real reason: %q", s.Rule, s.Resource, s.Reason)
					}
				}
			})
		}
	})

	// A table without point-in-time recovery next to the outbox must be
	// reported: proof that the checks run in these tests at all.
	t.Run("AwsSolutionsChecksReportAViolation", func(t *testing.T) {
		f := synthWith(t, func(b *fixtureBuilder) {
			awsdynamodb.NewTable(b.stack, jsii.String("Careless"), &awsdynamodb.TableProps{
				PartitionKey: &awsdynamodb.Attribute{Name: jsii.String("id"), Type: awsdynamodb.AttributeType_STRING},
				BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
			})
		})
		ann := strings.Join(f.annotations(), "\n")
		mustContain(t, ann, "AwsSolutions-DDB3", "/Test/Careless/Resource")
		// And the Serverless pack runs too.
		g := synthWith(t, func(b *fixtureBuilder) {
			awslambda.NewFunction(b.stack, jsii.String("Plain"), &awslambda.FunctionProps{
				Runtime: awslambda.Runtime_PROVIDED_AL2023(), Handler: jsii.String("bootstrap"),
				Code: b.props.RelayCode,
			})
		})
		mustContain(t, strings.Join(g.annotations(), "\n"), "Serverless-LambdaDLQ", "/Test/Plain/Resource")
		if strings.Contains(ann, "/Test/Outbox/") {
			t.Errorf("the outbox itself has findings:\n%s", ann)
		}
	})
}

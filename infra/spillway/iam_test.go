package spillway

import (
	"slices"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

// stmt is one policy statement in a comparable form: actions sorted,
// resources and condition as canonical JSON.
type stmt struct {
	Effect    string
	Actions   []string
	Resources []string
	Condition string
}

func (s stmt) String() string { return canonical(s) }

func newStmt(actions []string, resources []any, condition any) stmt {
	s := stmt{Effect: "Allow", Actions: slices.Sorted(slices.Values(actions))}
	for _, r := range resources {
		s.Resources = append(s.Resources, canonical(r))
	}
	slices.Sort(s.Resources)
	if condition != nil {
		s.Condition = canonical(condition)
	}
	return s
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

func statementsOf(t *testing.T, doc any) []stmt {
	t.Helper()
	var out []stmt
	for _, raw := range doc.(map[string]any)["Statement"].([]any) {
		m := raw.(map[string]any)
		for key := range m {
			if !slices.Contains([]string{"Effect", "Action", "Resource", "Condition"}, key) {
				t.Errorf("statement has unexpected key %s: %v", key, m)
			}
		}
		var actions []string
		for _, a := range asList(m["Action"]) {
			actions = append(actions, a.(string))
		}
		s := newStmt(actions, asList(m["Resource"]), m["Condition"])
		s.Effect = m["Effect"].(string)
		out = append(out, s)
	}
	return out
}

// grants are every identity-based statement in the template, by the role
// they are attached to, or by "managed:<id>" for a managed policy. Roles
// must carry no inline or AWS managed policies of their own.
func (f *fixture) grants() map[string][]string {
	f.t.Helper()
	out := map[string][]string{}
	add := func(key string, ss []stmt) {
		for _, s := range ss {
			out[key] = append(out[key], s.String())
		}
	}
	for _, id := range f.ofType("AWS::IAM::Policy") {
		p := f.props(id)
		roles := asList(p["Roles"])
		if len(roles) != 1 || p["Users"] != nil || p["Groups"] != nil {
			f.t.Errorf("policy %s must attach to exactly one role, got %v", id, p)
			continue
		}
		add(roles[0].(map[string]any)["Ref"].(string), statementsOf(f.t, p["PolicyDocument"]))
	}
	for _, id := range f.ofType("AWS::IAM::ManagedPolicy") {
		add("managed:"+id, statementsOf(f.t, f.props(id)["PolicyDocument"]))
	}
	for _, id := range f.ofType("AWS::IAM::Role") {
		p := f.props(id)
		if p["Policies"] != nil || p["ManagedPolicyArns"] != nil {
			f.t.Errorf("role %s has inline or managed policies: %v", id, p)
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

func (f *fixture) roleID(r awsiam.Role) string {
	return f.logicalID(r.Node().DefaultChild().(awscdk.CfnElement))
}

// expectGrants compares every statement of the template with want, which
// maps the same keys as grants to statements.
func (f *fixture) expectGrants(want map[string][]stmt) {
	f.t.Helper()
	got := f.grants()
	for key, ss := range want {
		var w []string
		for _, s := range ss {
			w = append(w, s.String())
		}
		slices.Sort(w)
		assertJSON(f.t, "statements of "+key, got[key], w)
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			f.t.Errorf("unexpected statements on %s: %v", key, got[key])
		}
	}
}

var xray = []string{"xray:PutTraceSegments", "xray:PutTelemetryRecords"}

func (f *fixture) logWrites(fn goFunction) stmt {
	return newStmt([]string{"logs:CreateLogStream", "logs:PutLogEvents"}, []any{f.resolved(fn.logs.LogGroupArn())}, nil)
}

// writerGrants are the writers' statements: writes on the table, queries
// of the named partitions only, wake-ups of the relay.
func writerGrants(table, relayArn any, partitions ...string) []stmt {
	keys := make([]any, len(partitions))
	for i, p := range partitions {
		keys[i] = p
	}
	return []stmt{
		newStmt([]string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"}, []any{table}, nil),
		newStmt([]string{"dynamodb:Query"}, []any{table}, map[string]any{"ForAllValues:StringEquals": map[string]any{"dynamodb:LeadingKeys": keys}}),
		newStmt([]string{"lambda:InvokeFunction"}, []any{relayArn}, nil),
	}
}

func TestIAM(t *testing.T) {
	t.Run("IsExactlyWhatEachPrincipalCalls", func(t *testing.T) {
		f := synth(t, nil)
		o := f.outbox
		table := f.resolved(o.table.TableArn())
		relayArn := f.resolved(o.relay.fn.FunctionArn())
		topic := func(name string) any {
			return "arn:aws:kafka:eu-west-1:123456789012:topic/orders/1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d-3/" + name
		}
		calls := o.Node().FindChild(jsii.String("SdkCalls"))
		callsRole := calls.Node().FindChild(jsii.String("Role")).(awsiam.Role)
		callsLogs := calls.Node().FindChild(jsii.String("Logs"))
		scheduleRole := o.Node().FindChild(jsii.String("Schedule")).Node().FindChild(jsii.String("Role")).(awsiam.Role)
		writers := writerGrants(table, relayArn, "OUTBOX#COORDINATION", "OUTBOX#GENERATION")
		f.expectGrants(map[string][]stmt{
			f.roleID(o.relay.role): {
				f.logWrites(o.relay),
				newStmt(xray, []any{"*"}, nil),
				newStmt([]string{"dynamodb:Query", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:ConditionCheckItem"}, []any{table}, nil),
				newStmt([]string{"lambda:InvokeFunction"}, []any{relayArn}, nil),
				newStmt([]string{"kafka-cluster:Connect", "kafka-cluster:WriteDataIdempotently"}, []any{testCluster}, nil),
				newStmt([]string{"kafka-cluster:DescribeTopic", "kafka-cluster:WriteData"}, []any{topic("orders"), topic("payments")}, nil),
			},
			f.roleID(o.enqueue.role): append([]stmt{f.logWrites(o.enqueue), newStmt(xray, []any{"*"}, nil)}, writers...),
			"managed:" + f.logicalID(o.writers.Node().DefaultChild().(awscdk.CfnElement)): writers,
			f.roleID(scheduleRole): {newStmt([]string{"lambda:InvokeFunction"}, []any{relayArn}, nil)},
			// The deploy-time calls: the layout record of the key prefix
			// only, and the broker lookup.
			f.roleID(callsRole): {
				newStmt([]string{"logs:CreateLogStream", "logs:PutLogEvents"}, []any{map[string]any{"Fn::GetAtt": []any{f.logicalID(callsLogs.Node().DefaultChild().(awscdk.CfnElement)), "Arn"}}}, nil),
				newStmt([]string{"dynamodb:UpdateItem"}, []any{table}, map[string]any{"ForAllValues:StringEquals": map[string]any{"dynamodb:LeadingKeys": []any{"OUTBOX#COORDINATION"}}}),
				newStmt([]string{"kafka:GetBootstrapBrokers"}, []any{testCluster}, nil),
			},
		})
		// The self-invoke statement is a policy of its own, which depends on
		// the function, not the function on it (no cycle).
		self := o.Node().FindChild(jsii.String("RelaySelfInvoke")).Node().DefaultChild().(awscdk.CfnElement)
		if deps := f.dependsOn(f.functionID(o.relay.fn)); slices.Contains(deps, f.logicalID(self)) {
			t.Errorf("the relay depends on its self-invoke policy: %v", deps)
		}
	})

	t.Run("ForSCRAMInAVPCWithTheStreamsTrigger", func(t *testing.T) {
		const secret = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:AmazonMSK_spillway-AbCdEf"
		const key = "arn:aws:kms:eu-west-1:123456789012:key/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"
		f := synth(t, func(p *OutboxProps) {
			p.Kafka = KafkaProps{Brokers: []string{"b-1.example:9096"}, ScramSecretArn: secret, ScramSecretKmsKeyArn: key}
			p.Network = &NetworkProps{VpcID: "vpc-0123456789abcdef0", VpcCidr: "10.0.0.0/16", SubnetIDs: []string{"subnet-0123456789abcdef0", "subnet-0123456789abcdef1"}}
			p.StreamsTrigger = true
		})
		o := f.outbox
		table := f.resolved(o.table.TableArn())
		relayArn := f.resolved(o.relay.fn.FunctionArn())
		scheduleRole := o.Node().FindChild(jsii.String("Schedule")).Node().FindChild(jsii.String("Role")).(awsiam.Role)
		calls := o.Node().FindChild(jsii.String("SdkCalls"))
		writers := writerGrants(table, relayArn, "OUTBOX#COORDINATION", "OUTBOX#GENERATION")
		f.expectGrants(map[string][]stmt{
			// Given brokers: the deploy-time calls are the layout record's.
			f.roleID(calls.Node().FindChild(jsii.String("Role")).(awsiam.Role)): {
				newStmt([]string{"logs:CreateLogStream", "logs:PutLogEvents"}, []any{map[string]any{"Fn::GetAtt": []any{f.logicalID(calls.Node().FindChild(jsii.String("Logs")).Node().DefaultChild().(awscdk.CfnElement)), "Arn"}}}, nil),
				newStmt([]string{"dynamodb:UpdateItem"}, []any{table}, map[string]any{"ForAllValues:StringEquals": map[string]any{"dynamodb:LeadingKeys": []any{"OUTBOX#COORDINATION"}}}),
			},
			f.roleID(o.relay.role): {
				f.logWrites(o.relay),
				newStmt(xray, []any{"*"}, nil),
				newStmt([]string{"dynamodb:Query", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:ConditionCheckItem"}, []any{table}, nil),
				newStmt([]string{"lambda:InvokeFunction"}, []any{relayArn}, nil),
				newStmt([]string{"secretsmanager:GetSecretValue"}, []any{secret}, nil),
				newStmt([]string{"kms:Decrypt"}, []any{key}, map[string]any{"StringEquals": map[string]any{
					"kms:ViaService": map[string]any{"Fn::Sub": "secretsmanager.${AWS::Region}.amazonaws.com"},
				}}),
				newStmt([]string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"},
					[]any{map[string]any{"Fn::GetAtt": []any{f.ofType("AWS::DynamoDB::Table")[0], "StreamArn"}}}, nil),
				newStmt([]string{"ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets", "ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"}, []any{"*"}, nil),
			},
			f.roleID(o.enqueue.role): append([]stmt{f.logWrites(o.enqueue), newStmt(xray, []any{"*"}, nil)}, writers...),
			"managed:" + f.logicalID(o.writers.Node().DefaultChild().(awscdk.CfnElement)): writers,
			f.roleID(scheduleRole): {newStmt([]string{"lambda:InvokeFunction"}, []any{relayArn}, nil)},
		})
	})

	t.Run("MSKTopicARNsFollowATokenClusterARN", func(t *testing.T) {
		var param awscdk.CfnParameter
		f := synthWith(t, func(b *fixtureBuilder) {
			param = awscdk.NewCfnParameter(b.stack, jsii.String("ClusterArn"), &awscdk.CfnParameterProps{Type: jsii.String("String")})
			b.props.Kafka = KafkaProps{ClusterArn: *param.ValueAsString(), Brokers: []string{"b-1.example:9098"}, Topics: []string{"orders"}}
		})
		ref := map[string]any{"Ref": "ClusterArn"}
		split := map[string]any{"Fn::Split": []any{":cluster/", ref}}
		want := []string{
			newStmt([]string{"kafka-cluster:Connect", "kafka-cluster:WriteDataIdempotently"}, []any{ref}, nil).String(),
			newStmt([]string{"kafka-cluster:DescribeTopic", "kafka-cluster:WriteData"}, []any{map[string]any{"Fn::Join": []any{"", []any{
				map[string]any{"Fn::Select": []any{0, split}}, ":topic/", map[string]any{"Fn::Select": []any{1, split}}, "/orders",
			}}}}, nil).String(),
		}
		got := f.grants()[f.roleID(f.outbox.relay.role)]
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("relay lacks %s\nhas %v", w, got)
			}
		}
	})

	t.Run("TopicARNFromLiteralClusterARN", func(t *testing.T) {
		got := *topicArn("arn:aws-cn:kafka:cn-north-1:123456789012:cluster/c1/uuid-1", "t.1")
		if want := "arn:aws-cn:kafka:cn-north-1:123456789012:topic/c1/uuid-1/t.1"; got != want {
			t.Errorf("topicArn = %s, want %s", got, want)
		}
	})

	// While the bucket count changes, writers may also query the previous
	// generation's coordination partition and marker, and nothing else.
	t.Run("WritersQueryOnlyCoordinationAndMarkers", func(t *testing.T) {
		f := synth(t, func(p *OutboxProps) {
			p.KeyPrefix, p.BucketCount = "OUTBOX2", 32
			p.PreviousKeyPrefix, p.PreviousBucketCount = "OUTBOX", 8
		})
		o := f.outbox
		want := writerGrants(f.resolved(o.table.TableArn()), f.resolved(o.relay.fn.FunctionArn()),
			"OUTBOX2#COORDINATION", "OUTBOX2#GENERATION", "OUTBOX#COORDINATION", "OUTBOX#GENERATION")
		var w []string
		for _, s := range want {
			w = append(w, s.String())
		}
		slices.Sort(w)
		assertJSON(t, "writers policy", f.grants()["managed:"+f.logicalID(o.writers.Node().DefaultChild().(awscdk.CfnElement))], w)
	})
}

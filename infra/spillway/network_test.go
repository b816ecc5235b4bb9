package spillway

import (
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
)

var testNetwork = NetworkProps{
	VpcID:         "vpc-0123456789abcdef0",
	VpcCidr:       "10.20.0.0/16",
	SubnetIDs:     []string{"subnet-0123456789abcdef0", "subnet-0123456789abcdef1"},
	RouteTableIDs: []string{"rtb-0123456789abcdef0", "rtb-0123456789abcdef1"},
}

func TestNetwork(t *testing.T) {
	t.Run("RelayInPrivateSubnetsWithBrokerAndHTTPSEgressOnly", func(t *testing.T) {
		f := synth(t, func(p *OutboxProps) { n := testNetwork; p.Network = &n })
		sgID := f.logicalID(f.outbox.securityGroup.Node().DefaultChild().(awscdk.CfnElement))
		assertJSON(t, "relay VPC config", f.props(f.functionID(f.outbox.relay.fn))["VpcConfig"], map[string]any{
			"SubnetIds":        []any{"subnet-0123456789abcdef0", "subnet-0123456789abcdef1"},
			"SecurityGroupIds": []any{map[string]any{"Fn::GetAtt": []any{sgID, "GroupId"}}},
		})
		assertJSON(t, "relay security group", f.props(sgID), map[string]any{
			"GroupDescription": "Spillway relay: Kafka brokers and HTTPS egress only",
			"VpcId":            "vpc-0123456789abcdef0",
			"SecurityGroupEgress": []any{
				map[string]any{"CidrIp": "10.20.0.0/16", "Description": "Kafka brokers inside the VPC", "FromPort": 9098, "ToPort": 9098, "IpProtocol": "tcp"},
				map[string]any{"CidrIp": "0.0.0.0/0", "Description": "AWS APIs over HTTPS (DynamoDB, Lambda, Secrets Manager)", "FromPort": 443, "ToPort": 443, "IpProtocol": "tcp"},
			},
		})
		for _, typ := range []string{"AWS::EC2::SecurityGroupIngress", "AWS::EC2::VPCEndpoint"} {
			if ids := f.ofType(typ); len(ids) != 0 {
				t.Errorf("%s without being asked: %v", typ, ids)
			}
		}
		if _, ok := f.props(f.functionID(f.outbox.enqueue.fn))["VpcConfig"]; ok {
			t.Error("enqueue is in the VPC; it only talks to DynamoDB and Lambda")
		}
	})

	t.Run("EndpointsPrefixListAndBrokerSecurityGroup", func(t *testing.T) {
		f := synth(t, func(p *OutboxProps) {
			n := testNetwork
			n.DynamoDBEndpoint = true
			n.LambdaEndpoint = true
			n.DynamoDBPrefixListID = "pl-0123456789abcdef0"
			n.BrokerSecurityGroupID = "sg-0123456789abcdef0"
			p.Network = &n
			p.Kafka.Port = 9198
		})
		sgID := f.logicalID(f.outbox.securityGroup.Node().DefaultChild().(awscdk.CfnElement))
		relaySG := map[string]any{"Fn::GetAtt": []any{sgID, "GroupId"}}
		// Egress to a prefix list or another group is a separate resource;
		// collect both kinds.
		egress := f.props(sgID)["SecurityGroupEgress"].([]any)
		for _, id := range f.ofType("AWS::EC2::SecurityGroupEgress") {
			rule := f.props(id)
			assertJSON(t, id+" group", rule["GroupId"], relaySG)
			delete(rule, "GroupId")
			egress = append(egress, rule)
		}
		slices.SortFunc(egress, func(a, b any) int { return strings.Compare(canonical(a), canonical(b)) })
		assertJSON(t, "relay egress", egress, []any{
			map[string]any{"CidrIp": "10.20.0.0/16", "Description": "Interface endpoints (Lambda, Secrets Manager) inside the VPC", "FromPort": 443, "ToPort": 443, "IpProtocol": "tcp"},
			map[string]any{"Description": "DynamoDB through its gateway endpoint", "DestinationPrefixListId": "pl-0123456789abcdef0", "FromPort": 443, "ToPort": 443, "IpProtocol": "tcp"},
			map[string]any{"Description": "Spillway relay to Kafka brokers", "DestinationSecurityGroupId": "sg-0123456789abcdef0", "FromPort": 9198, "ToPort": 9198, "IpProtocol": "tcp"},
		})
		var ingress []any
		for _, id := range f.ofType("AWS::EC2::SecurityGroupIngress") {
			ingress = append(ingress, f.props(id))
		}
		endpointSG := ""
		for _, id := range f.ofType("AWS::EC2::SecurityGroup") {
			if id != sgID {
				endpointSG = id
			}
		}
		assertJSON(t, "ingress rules", ingress, []any{
			map[string]any{
				"GroupId": map[string]any{"Fn::GetAtt": []any{endpointSG, "GroupId"}}, "SourceSecurityGroupId": relaySG,
				"Description": "Spillway relay wake-ups", "FromPort": 443, "ToPort": 443, "IpProtocol": "tcp",
			},
			map[string]any{
				"GroupId": "sg-0123456789abcdef0", "SourceSecurityGroupId": relaySG,
				"Description": "Spillway relay to Kafka brokers", "FromPort": 9198, "ToPort": 9198, "IpProtocol": "tcp",
			},
		})
		var endpoints []any
		for _, id := range f.ofType("AWS::EC2::VPCEndpoint") {
			endpoints = append(endpoints, f.props(id))
		}
		region := map[string]any{"Ref": "AWS::Region"}
		assertJSON(t, "endpoints", endpoints, []any{
			map[string]any{
				"VpcId": "vpc-0123456789abcdef0", "VpcEndpointType": "Gateway",
				"ServiceName":   map[string]any{"Fn::Join": []any{"", []any{"com.amazonaws.", region, ".dynamodb"}}},
				"RouteTableIds": []any{"rtb-0123456789abcdef0", "rtb-0123456789abcdef1"},
			},
			map[string]any{
				"VpcId": "vpc-0123456789abcdef0", "VpcEndpointType": "Interface", "PrivateDnsEnabled": true,
				"ServiceName":      map[string]any{"Fn::Join": []any{"", []any{"com.amazonaws.", region, ".lambda"}}},
				"SubnetIds":        []any{"subnet-0123456789abcdef0", "subnet-0123456789abcdef1"},
				"SecurityGroupIds": []any{map[string]any{"Fn::GetAtt": []any{endpointSG, "GroupId"}}},
				"PolicyDocument": map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
					"Effect": "Allow", "Principal": map[string]any{"AWS": "*"}, "Action": "lambda:InvokeFunction",
					"Resource": map[string]any{"Fn::GetAtt": []any{f.functionID(f.outbox.relay.fn), "Arn"}},
				}}},
			},
		})
	})
}

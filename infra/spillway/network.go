package spillway

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// httpsPort carries DynamoDB, Lambda (wake-ups) and Secrets Manager calls.
const httpsPort = 443

// eniActions are what Lambda needs to attach a function to a VPC (the
// actions of AWSLambdaVPCAccessExecutionRole minus logs). Lambda creates
// and describes the network interfaces before they exist, and the Describe
// actions support no resource-level permissions, so they need "*".
var eniActions = []string{
	"ec2:CreateNetworkInterface",
	"ec2:DescribeNetworkInterfaces",
	"ec2:DescribeSubnets",
	"ec2:DeleteNetworkInterface",
	"ec2:AssignPrivateIpAddresses",
	"ec2:UnassignPrivateIpAddresses",
}

// relayNetwork is the relay's place in the VPC.
type relayNetwork struct {
	vpc           awsec2.IVpc
	subnets       []awsec2.ISubnet
	securityGroup awsec2.SecurityGroup
}

// newRelayNetwork imports the VPC and subnets by id (no lookups, so synth
// needs no credentials) and creates the relay's security group. It allows
// no inbound traffic and only this outbound: the broker port inside the
// VPC (or to the brokers' security group), and HTTPS for DynamoDB, Lambda
// and Secrets Manager.
func newRelayNetwork(scope constructs.Construct, n NetworkProps, k KafkaProps) relayNetwork {
	group := constructs.NewConstruct(scope, jsii.String("Network"))
	vpc := awsec2.Vpc_FromVpcAttributes(group, jsii.String("Vpc"), &awsec2.VpcAttributes{
		VpcId:             jsii.String(n.VpcID),
		VpcCidrBlock:      jsii.String(n.VpcCidr),
		AvailabilityZones: awscdk.Stack_Of(scope).AvailabilityZones(),
	})
	subnets := make([]awsec2.ISubnet, len(n.SubnetIDs))
	for i, id := range n.SubnetIDs {
		subnets[i] = awsec2.Subnet_FromSubnetId(group, jsii.String(fmt.Sprintf("Subnet%d", i)), jsii.String(id))
		// Nothing reads the subnets' route tables: the gateway endpoint
		// takes RouteTableIDs directly.
		awscdk.Annotations_Of(subnets[i]).AcknowledgeWarning(jsii.String("@aws-cdk/aws-ec2:noSubnetRouteTableId"), jsii.String("route tables are not read from imported subnets"))
	}
	sg := awsec2.NewSecurityGroup(group, jsii.String("RelaySecurityGroup"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("Spillway relay: Kafka brokers and HTTPS egress only"),
		AllowAllOutbound: jsii.Bool(false),
	})
	brokerPort := awsec2.Port_Tcp(jsii.Number(float64(k.Port)))
	if n.BrokerSecurityGroupID != "" {
		brokers := awsec2.SecurityGroup_FromSecurityGroupId(group, jsii.String("BrokerSecurityGroup"), jsii.String(n.BrokerSecurityGroupID), &awsec2.SecurityGroupImportOptions{
			AllowAllOutbound: jsii.Bool(false),
			Mutable:          jsii.Bool(true),
		})
		sg.Connections().AllowTo(brokers, brokerPort, jsii.String("Spillway relay to Kafka brokers"))
	} else {
		sg.AddEgressRule(awsec2.Peer_Ipv4(jsii.String(n.VpcCidr)), brokerPort, jsii.String("Kafka brokers inside the VPC"), nil)
	}
	https := awsec2.Port_Tcp(jsii.Number(httpsPort))
	if n.DynamoDBPrefixListID != "" {
		sg.AddEgressRule(awsec2.Peer_PrefixList(jsii.String(n.DynamoDBPrefixListID)), https, jsii.String("DynamoDB through its gateway endpoint"), nil)
		sg.AddEgressRule(awsec2.Peer_Ipv4(jsii.String(n.VpcCidr)), https, jsii.String("Interface endpoints (Lambda, Secrets Manager) inside the VPC"), nil)
	} else {
		// Without the prefix list id the DynamoDB, Lambda and Secrets
		// Manager endpoints (public, or behind a NAT) have no fixed
		// addresses to allow; the rule is still HTTPS only.
		sg.AddEgressRule(awsec2.Peer_AnyIpv4(), https, jsii.String("AWS APIs over HTTPS (DynamoDB, Lambda, Secrets Manager)"), nil)
	}
	return relayNetwork{vpc: vpc, subnets: subnets, securityGroup: sg}
}

// configure places a function in the network.
func (rn relayNetwork) configure(props *awslambda.FunctionProps) {
	props.Vpc = rn.vpc
	props.VpcSubnets = &awsec2.SubnetSelection{Subnets: &rn.subnets}
	props.SecurityGroups = &[]awsec2.ISecurityGroup{rn.securityGroup}
}

// newEndpoints creates the optional VPC endpoints. The DynamoDB gateway
// endpoint is free and keeps table traffic off any NAT. The Lambda
// interface endpoint carries the relay's continuation wake-ups; its policy
// allows invoking the relay and nothing else, and only the relay's
// security group may reach it.
func newEndpoints(scope constructs.Construct, n NetworkProps, rn relayNetwork, relayArn *string) {
	stack := awscdk.Stack_Of(scope)
	if n.DynamoDBEndpoint {
		awsec2.NewCfnVPCEndpoint(scope, jsii.String("DynamoDBEndpoint"), &awsec2.CfnVPCEndpointProps{
			VpcId:           jsii.String(n.VpcID),
			ServiceName:     jsii.String(fmt.Sprintf("com.amazonaws.%s.dynamodb", *stack.Region())),
			VpcEndpointType: jsii.String("Gateway"),
			RouteTableIds:   anys(n.RouteTableIDs...),
		})
	}
	if n.LambdaEndpoint {
		sg := awsec2.NewSecurityGroup(scope, jsii.String("LambdaEndpointSecurityGroup"), &awsec2.SecurityGroupProps{
			Vpc:              rn.vpc,
			Description:      jsii.String("Lambda interface endpoint: HTTPS from the Spillway relay only"),
			AllowAllOutbound: jsii.Bool(false),
		})
		sg.AddIngressRule(rn.securityGroup, awsec2.Port_Tcp(jsii.Number(httpsPort)), jsii.String("Spillway relay wake-ups"), nil)
		policy := awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{
			Statements: &[]awsiam.PolicyStatement{awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Effect:     awsiam.Effect_ALLOW,
				Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
				Actions:    jsii.Strings("lambda:InvokeFunction"),
				Resources:  &[]*string{relayArn},
			})},
		})
		awsec2.NewCfnVPCEndpoint(scope, jsii.String("LambdaEndpoint"), &awsec2.CfnVPCEndpointProps{
			VpcId:             jsii.String(n.VpcID),
			ServiceName:       jsii.String(fmt.Sprintf("com.amazonaws.%s.lambda", *stack.Region())),
			VpcEndpointType:   jsii.String("Interface"),
			SubnetIds:         anys(n.SubnetIDs...),
			SecurityGroupIds:  &[]interface{}{sg.SecurityGroupId()},
			PrivateDnsEnabled: jsii.Bool(true),
			PolicyDocument:    policy,
		})
	}
}

// anys converts strings for L1 list properties typed []interface{}.
func anys(ss ...string) *[]interface{} {
	out := make([]interface{}, len(ss))
	for i, s := range ss {
		out[i] = jsii.String(s)
	}
	return &out
}

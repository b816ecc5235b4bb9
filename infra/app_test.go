package main

import (
	"archive/zip"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"
)

type cxMessage = cxapi.SynthesisMessage

func TestMain(m *testing.M) {
	// JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION comes from the
	// environment (the Makefile exports it); jsii reads it while the CDK
	// packages initialize.
	if _, err := exec.LookPath("node"); err != nil {
		fmt.Println("skipping infra tests: node is not installed (CDK synthesis needs it)")
		os.Exit(0)
	}
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// cdkJSONContext is the "context" object of the repository's cdk.json, so
// the tests synthesize what `cdk synth` does.
func cdkJSONContext(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "cdk.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		App     string
		Context map[string]any
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("cdk.json: %v", err)
	}
	if !strings.Contains(doc.App, "-C infra") {
		t.Errorf("cdk.json app %q does not run the app in infra/", doc.App)
	}
	return doc.Context
}

// newTestApp is an app on cdk.json's context plus extra. Without an alarm
// key in extra it opts out of alarm notifications (alarms=none), which
// synthesis otherwise refuses.
func newTestApp(t *testing.T, extra map[string]any) awscdk.App {
	t.Helper()
	ctx := cdkJSONContext(t)
	if extra["alarmEmail"] == nil && extra["alarmTopicArn"] == nil && extra["alarms"] == nil {
		ctx["alarms"] = "none"
	}
	for k, v := range extra {
		ctx[k] = v
	}
	return awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &ctx})
}

// placeholderDist writes relay.zip and enqueue.zip as `make build` would.
func placeholderDist(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"relay", "enqueue"} {
		f, err := os.Create(filepath.Join(dir, name+".zip"))
		if err != nil {
			t.Fatal(err)
		}
		zw := zip.NewWriter(f)
		w, err := zw.Create("bootstrap")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(name)); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const testCluster = "arn:aws:kafka:eu-west-1:123456789012:cluster/orders/1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d-3"

// inVpc adds the network keys an MSK cluster needs to ctx.
func inVpc(ctx map[string]any) map[string]any {
	ctx["vpcId"], ctx["vpcCidr"], ctx["subnetIds"] = "vpc-0123456789abcdef0", "10.0.0.0/16", "subnet-1,subnet-2"
	return ctx
}

func TestApp(t *testing.T) {
	t.Run("MissingBuildSaysToRunMakeBuild", func(t *testing.T) {
		app := newTestApp(t, inVpc(map[string]any{"distDir": t.TempDir(), "mskClusterArn": testCluster, "topics": "orders"}))
		_, err := newApp(app)
		if !errors.Is(err, ErrMissingBuild) {
			t.Fatalf("want ErrMissingBuild, got %v", err)
		}
		if !strings.Contains(err.Error(), "make build") || !strings.Contains(err.Error(), "relay.zip") {
			t.Errorf("message does not tell what to do: %v", err)
		}
	})

	t.Run("InvalidContextStopsBeforeSynth", func(t *testing.T) {
		app := newTestApp(t, inVpc(map[string]any{"distDir": placeholderDist(t), "mskClusterArn": testCluster, "topics": "orders", "reservedConcurrency": "9"}))
		_, err := newApp(app)
		if err == nil || !strings.Contains(err.Error(), "reserved concurrency must be in [1, bucket count 8], got 9") {
			t.Fatalf("want the reserved concurrency error, got %v", err)
		}
		if n := len(*app.Node().Children()); n != 0 {
			t.Errorf("app has %d constructs after a context error", n)
		}
	})

	t.Run("SynthesizesCleanWithCdkJSONDefaults", func(t *testing.T) {
		app := newTestApp(t, inVpc(map[string]any{"distDir": placeholderDist(t), "mskClusterArn": testCluster, "topics": "orders,payments"}))
		stack, err := newApp(app)
		if err != nil {
			t.Fatal(err)
		}
		assembly := app.Synth(nil)
		if got := *assembly.GetStackByName(jsii.String("Spillway")).StackName(); got != "Spillway" {
			t.Errorf("stack name %q", got)
		}
		ann := assertions.Annotations_FromStack(stack.Stack)
		var findings []string
		for _, find := range [](func(*string, any) *[]*cxMessage){ann.FindError, ann.FindWarning} {
			for _, m := range *find(jsii.String("*"), assertions.Match_AnyValue()) {
				findings = append(findings, fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data))
			}
		}
		if len(findings) > 0 {
			t.Errorf("cdk-nag or CDK findings:\n%s", strings.Join(findings, "\n"))
		}
		outputs := *assertions.Template_FromStack(stack.Stack, nil).FindOutputs(jsii.String("*"), nil)
		for _, name := range []string{"TableName", "TableArn", "RelayFunctionName", "EnqueueFunctionName", "WritersPolicyArn", "DashboardName"} {
			if _, ok := outputs[name]; !ok {
				t.Errorf("output %s missing; have %v", name, outputs)
			}
		}
		writers := jsonOf(t, outputs["WritersPolicyArn"])
		if !strings.Contains(writers, `"Ref":"OutboxWritersPolicy`) {
			t.Errorf("WritersPolicyArn output is not the writers policy: %s", writers)
		}
		if _, ok := outputs["AlarmTopicArn"]; ok {
			t.Error("AlarmTopicArn output without a topic")
		}
	})

	t.Run("ExistingTableFromContext", func(t *testing.T) {
		app := newTestApp(t, inVpc(map[string]any{
			"distDir": placeholderDist(t), "mskClusterArn": testCluster, "topics": "orders",
			"existingTableName": "shared", "existingTableStreamArn": "arn:aws:dynamodb:eu-west-1:123456789012:table/shared/stream/2026-01-01T00:00:00.000",
			"streamsTrigger": "true", "account": "123456789012", "region": "eu-west-1",
		}))
		stack, err := newApp(app)
		if err != nil {
			t.Fatal(err)
		}
		template := assertions.Template_FromStack(stack.Stack, nil)
		if n := len(*template.FindResources(jsii.String("AWS::DynamoDB::Table"), nil)); n != 0 {
			t.Errorf("created %d tables although one was given", n)
		}
		policies := jsonOf(t, template.FindResources(jsii.String("AWS::IAM::Policy"), nil))
		for _, want := range []string{
			`arn:`, `:dynamodb:eu-west-1:123456789012:table/shared`,
			`table/shared/stream/2026-01-01T00:00:00.000`,
		} {
			if !strings.Contains(policies, want) {
				t.Errorf("policies lack %s", want)
			}
		}
		if *stack.Region() != "eu-west-1" || *stack.Account() != "123456789012" {
			t.Errorf("environment %s/%s", *stack.Account(), *stack.Region())
		}
	})

	t.Run("MSKClusterWithoutNetworkFailsNamingTheKeys", func(t *testing.T) {
		app := newTestApp(t, map[string]any{"distDir": placeholderDist(t), "mskClusterArn": testCluster, "topics": "orders"})
		_, err := newApp(app)
		for _, want := range []string{"vpcId", "vpcCidr", "subnetIds", "mskPublicAccess"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("synth with an MSK cluster and no network: %v; want an error naming %s", err, want)
			}
		}
		if n := len(*app.Node().Children()); n != 0 {
			t.Errorf("app has %d constructs after a context error", n)
		}
	})

	t.Run("MSKPublicAccessIsAnExplicitOptIn", func(t *testing.T) {
		base := func(extra map[string]any) map[string]any {
			ctx := map[string]any{"distDir": placeholderDist(t), "mskClusterArn": testCluster, "topics": "orders"}
			for k, v := range extra {
				ctx[k] = v
			}
			return ctx
		}
		// Without the public brokers, or together with a VPC: refused.
		for _, ctx := range []map[string]any{
			base(map[string]any{"mskPublicAccess": "true"}),
			inVpc(base(map[string]any{"mskPublicAccess": "true", "brokers": "b-1-public.orders.kafka.eu-west-1.amazonaws.com:9198"})),
		} {
			if _, err := newApp(newTestApp(t, ctx)); err == nil || !strings.Contains(err.Error(), "mskPublicAccess") {
				t.Errorf("context %v: %v, want a refusal naming mskPublicAccess", ctx, err)
			}
		}
		app := newTestApp(t, base(map[string]any{"mskPublicAccess": "true", "brokers": "b-1-public.orders.kafka.eu-west-1.amazonaws.com:9198"}))
		stack, err := newApp(app)
		if err != nil {
			t.Fatal(err)
		}
		fns := jsonOf(t, assertions.Template_FromStack(stack.Stack, nil).FindResources(jsii.String("AWS::Lambda::Function"), nil))
		if !strings.Contains(fns, "b-1-public.orders.kafka.eu-west-1.amazonaws.com:9198") || strings.Contains(fns, "VpcConfig") {
			t.Errorf("the relay should use the public brokers outside any VPC: %s", fns)
		}
	})
}

package spillway

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/cxapi"
	"github.com/aws/jsii-runtime-go"
)

// testCluster is a well-formed MSK cluster ARN (name "orders").
const testCluster = "arn:aws:kafka:eu-west-1:123456789012:cluster/orders/1a2b3c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d-3"

type cxMessage = cxapi.SynthesisMessage

// distDir holds placeholder packages made by TestMain; synth only hashes and
// copies them.
var distDir string

func TestMain(m *testing.M) {
	// JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION must come from the
	// environment (the Makefile exports it): jsii captures the environment
	// of its node process while the CDK packages initialize, before TestMain.
	if _, err := exec.LookPath("node"); err != nil {
		fmt.Println("skipping infra/spillway tests: node is not installed (CDK synthesis needs it)")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "spillway-dist-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	distDir = dir
	for _, name := range []string{"relay", "enqueue"} {
		if err := writeZip(filepath.Join(dir, name+".zip"), "placeholder "+name); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	jsii.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

func writeZip(path, content string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(f)
	w, err := zw.Create("bootstrap")
	if err == nil {
		_, err = w.Write([]byte(content))
	}
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// baseProps is the default deployment: MSK IAM with two topics, brokers
// looked up, no VPC, no Streams trigger.
func baseProps() OutboxProps {
	return OutboxProps{
		RelayCode:   awslambda.Code_FromAsset(jsii.String(filepath.Join(distDir, "relay.zip")), nil),
		EnqueueCode: awslambda.Code_FromAsset(jsii.String(filepath.Join(distDir, "enqueue.zip")), nil),
		Kafka:       KafkaProps{ClusterArn: testCluster, Topics: []string{"orders", "payments"}},
	}
}

// fixture is one synthesized stack holding one outbox, with the
// AwsSolutions checks applied.
type fixture struct {
	t        *testing.T
	stack    awscdk.Stack
	outbox   *outbox
	template assertions.Template
	res      map[string]map[string]any // logical id -> resource
}

// fixtureBuilder lets a test define things in the stack (imports,
// parameters) before the outbox is created from props.
type fixtureBuilder struct {
	stack awscdk.Stack
	props *OutboxProps
}

func synth(t *testing.T, mutate func(*OutboxProps)) *fixture {
	t.Helper()
	return synthWith(t, func(b *fixtureBuilder) {
		if mutate != nil {
			mutate(b.props)
		}
	})
}

func synthWith(t *testing.T, build func(*fixtureBuilder)) *fixture {
	t.Helper()
	p := baseProps()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	stack := awscdk.NewStack(app, jsii.String("Test"), nil)
	build(&fixtureBuilder{stack: stack, props: &p})
	ob := NewOutbox(stack, "Outbox", &p)
	AddNagPacks(app)
	return newFixture(t, stack, ob.(*outbox))
}

func newFixture(t *testing.T, stack awscdk.Stack, ob *outbox) *fixture {
	t.Helper()
	template := assertions.Template_FromStack(stack, nil)
	raw, err := json.Marshal(template.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Resources map[string]map[string]any
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, stack: stack, outbox: ob, template: template, res: doc.Resources}
}

// ofType returns the logical ids of every resource of a type, sorted.
func (f *fixture) ofType(typ string) []string {
	var ids []string
	for id, r := range f.res {
		if r["Type"] == typ {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// brokerLookups returns the ids of the MSK bootstrap-broker lookups, the
// Custom::AWS resources beside the layout record.
func (f *fixture) brokerLookups() []string {
	var ids []string
	for _, id := range f.ofType("Custom::AWS") {
		if strings.Contains(id, "BootstrapBrokers") {
			ids = append(ids, id)
		}
	}
	return ids
}

// only returns the properties of the single resource of a type.
func (f *fixture) only(typ string) map[string]any {
	f.t.Helper()
	ids := f.ofType(typ)
	if len(ids) != 1 {
		f.t.Fatalf("want exactly one %s, got %v", typ, ids)
	}
	return f.props(ids[0])
}

func (f *fixture) props(id string) map[string]any {
	f.t.Helper()
	r, ok := f.res[id]
	if !ok {
		f.t.Fatalf("no resource %s", id)
	}
	p, _ := r["Properties"].(map[string]any)
	return p
}

// dependsOn returns a resource's DependsOn list.
func (f *fixture) dependsOn(id string) []string {
	var out []string
	for _, d := range asList(f.res[id]["DependsOn"]) {
		out = append(out, d.(string))
	}
	return out
}

// logicalID is the logical id of a CloudFormation resource construct.
func (f *fixture) logicalID(resource awscdk.CfnElement) string {
	return *f.stack.GetLogicalId(resource)
}

// resolved renders a token (or any value) the way it appears in the
// template, for comparison with template JSON.
func (f *fixture) resolved(v any) any {
	f.t.Helper()
	raw, err := json.Marshal(f.stack.Resolve(v))
	if err != nil {
		f.t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		f.t.Fatal(err)
	}
	return out
}

// functionID finds the logical id of a Lambda function construct.
func (f *fixture) functionID(fn awslambda.Function) string {
	return f.logicalID(fn.Node().DefaultChild().(awscdk.CfnElement))
}

// canonical renders v as JSON with sorted keys, for order-free comparisons
// and readable failure messages.
func canonical(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(raw)
}

// assertJSON fails unless got and want render to the same JSON.
func assertJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	if g, w := canonical(got), canonical(want); g != w {
		t.Errorf("%s:\n got  %s\n want %s", what, g, w)
	}
}

// annotations are every error and warning on the stack (cdk-nag reports
// unsuppressed findings as errors or warnings).
func (f *fixture) annotations() []string {
	ann := assertions.Annotations_FromStack(f.stack)
	var out []string
	for _, find := range []func(*string, any) *[]*cxMessage{ann.FindError, ann.FindWarning} {
		for _, m := range *find(jsii.String("*"), assertions.Match_AnyValue()) {
			out = append(out, fmt.Sprintf("%s %s: %v", m.Level, *m.Id, m.Entry.Data))
		}
	}
	return out
}

func mustContain(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%q does not contain %q", s, sub)
		}
	}
}

// Command infra is the Spillway CDK app: one stack holding one outbox,
// configured by CDK context keys (see contextKeys and README.md). cdk.json
// at the repository root runs it; `cdk synth` needs no AWS credentials.
package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/spillway-dev/spillway/infra/spillway"
)

// ErrMissingBuild says the function packages have not been built.
var ErrMissingBuild = errors.New("function package missing: run `make build` first (or point -c distDir at the directory holding relay.zip and enqueue.zip)")

func main() {
	app := awscdk.NewApp(nil)
	if _, err := newApp(app); err != nil {
		fmt.Fprintln(os.Stderr, "spillway infra:", err)
		jsii.Close()
		os.Exit(1)
	}
	app.Synth(nil)
	jsii.Close()
}

// newApp reads the context, checks the function packages and defines the
// stack with the AwsSolutions checks applied. Every error is reported
// before any construct is created, so a bad key never half-synthesizes.
func newApp(app awscdk.App) (SpillwayStack, error) {
	all, _ := app.Node().GetAllContext(nil).(map[string]any)
	keyErr := unknownContextKeys(slices.Collect(maps.Keys(all)))
	cfg, cfgErr := configFromContext(func(key string) any {
		return app.Node().TryGetContext(jsii.String(key))
	})
	// Every problem at once, the most fundamental first: a misspelled key
	// may explain the rest, and the build comes last.
	props := cfg.outbox
	relayCode, relayErr := codeFromDist(cfg.distDir, "relay")
	enqueueCode, enqueueErr := codeFromDist(cfg.distDir, "enqueue")
	buildErr := relayErr
	if buildErr == nil {
		buildErr = enqueueErr
	}
	if err := errors.Join(keyErr, errors.Join(kafkaContextCheck(props.Kafka)...), cfgErr, buildErr); err != nil {
		return SpillwayStack{}, err
	}
	props.RelayCode, props.EnqueueCode = relayCode, enqueueCode
	if err := props.WithDefaults().Validate(); err != nil {
		return SpillwayStack{}, err
	}
	stackProps := awscdk.StackProps{
		Description: jsii.String("Spillway: transactional outbox from DynamoDB to Kafka"),
	}
	if cfg.account != "" {
		stackProps.Env = &awscdk.Environment{Account: jsii.String(cfg.account), Region: jsii.String(cfg.region)}
	}
	stack := NewSpillwayStack(app, cfg.stackName, &SpillwayStackProps{
		StackProps:             stackProps,
		Outbox:                 props,
		ExistingTableName:      cfg.existingTableName,
		ExistingTableArn:       cfg.existingTableArn,
		ExistingTableStreamArn: cfg.existingTableStreamArn,
	})
	spillway.AddNagPacks(app)
	return stack, nil
}

// codeFromDist loads a prebuilt package <dir>/<name>.zip (an arm64
// bootstrap built by `make build`).
func codeFromDist(dir, name string) (awslambda.Code, error) {
	path, err := filepath.Abs(filepath.Join(dir, name+".zip"))
	if err != nil {
		return nil, fmt.Errorf("resolve %s package in %q: %w", name, dir, err)
	}
	info, err := os.Stat(path)
	if err != nil || info.IsDir() {
		return nil, fmt.Errorf("%w: %s", ErrMissingBuild, path)
	}
	return awslambda.Code_FromAsset(jsii.String(path), nil), nil
}

//go:build unix

// Command invoke runs one of the Lambda functions locally, as Lambda runs
// it: it builds the function's bootstrap for this machine, starts it under
// the Runtime Interface Emulator (./bin/aws-lambda-rie, from `make tools`)
// and sends it the given events, one invoke at a time. Responses go to
// stdout; the function's logs, EMF lines and the wake-ups it sends go to
// stderr.
//
//	go run ./scripts/invoke -fn relay -event events/relay.notify.json
//	go run ./scripts/invoke -event events/enqueue.single.json,events/relay.notify.json
//
// Without -fn each event goes to the function its file name starts with
// (enqueue.…, relay.… or consumer.…), so one run can enqueue and then relay
// on the same data.
//
// The function reads the SPILLWAY_* variables of the environment. Without
// SPILLWAY_DYNAMODB_ENDPOINT, invoke starts the embedded DynamoDB server and
// Kafka cluster on loopback (with a fresh table and the sample topics
// "orders" and "payments", the topics `spillway run --serve` creates) for the run; point it at a running local system
// (DynamoDB Local, `spillway run`) with SPILLWAY_DYNAMODB_ENDPOINT,
// SPILLWAY_KAFKA_BROKERS and SPILLWAY_TABLE to act on its data. Wake-ups the
// function sends are recorded by a stand-in Invoke API and printed, unless
// AWS_ENDPOINT_URL_LAMBDA is set.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spillway-dev/spillway/internal/lambdalocal"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

func main() {
	fn := flag.String("fn", "", "function to run: relay, enqueue or consumer (default: from each event's file name)")
	events := flag.String("event", "", "comma-separated event files, invoked in order")
	rie := flag.String("rie", filepath.Join("bin", "aws-lambda-rie"), "path of aws-lambda-rie")
	timeout := flag.String("timeout", "", "function timeout in seconds (AWS_LAMBDA_FUNCTION_TIMEOUT; default 30)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	failed, err := run(ctx, *fn, *events, *rie, *timeout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "invoke:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// step is one invoke: the function and the event file.
type step struct{ fn, file string }

func run(ctx context.Context, fn, events, rie, timeout string) (failed bool, err error) {
	steps, err := parseSteps(fn, events)
	if err != nil {
		return false, err
	}
	vars := environ()
	setDefault(vars, "AWS_LAMBDA_FUNCTION_TIMEOUT", "30")
	if timeout != "" {
		vars["AWS_LAMBDA_FUNCTION_TIMEOUT"] = timeout
	}
	setDefault(vars, "AWS_REGION", "us-east-1")
	setDefault(vars, outboxconf.EnvRelayFunction, "spillway-relay")
	closeAll, err := localEndpoints(ctx, vars)
	defer closeAll()
	if err != nil {
		return false, err
	}
	dir, err := os.MkdirTemp("", "spillway-invoke-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	emulators := map[string]*lambdalocal.Emulator{}
	defer func() {
		for _, em := range emulators {
			em.Close()
		}
	}()
	for _, st := range steps {
		em := emulators[st.fn]
		if em == nil {
			if em, err = start(ctx, dir, st.fn, rie, vars); err != nil {
				return failed, err
			}
			emulators[st.fn] = em
		}
		bad, err := invoke(ctx, em, st)
		if err != nil {
			return failed, err
		}
		failed = failed || bad
	}
	return failed, nil
}

// parseSteps maps each comma-separated event file to fn, or to the
// function its name starts with.
func parseSteps(fn, events string) ([]step, error) {
	if events == "" {
		return nil, fmt.Errorf("-event names no event file")
	}
	var steps []step
	for _, file := range strings.Split(events, ",") {
		file = strings.TrimSpace(file)
		target := fn
		if target == "" {
			target, _, _ = strings.Cut(filepath.Base(file), ".")
		}
		if target != "relay" && target != "enqueue" && target != "consumer" {
			return nil, fmt.Errorf("%s: the function must be relay, enqueue or consumer, got %q (use -fn)", file, target)
		}
		steps = append(steps, step{target, file})
	}
	return steps, nil
}

// localEndpoints starts what vars does not point at: the embedded DynamoDB
// and Kafka, and the stand-in Invoke API. The returned function stops them,
// also after an error.
func localEndpoints(ctx context.Context, vars map[string]string) (func(), error) {
	var closers []func()
	closeAll := func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}
	if vars[outboxconf.EnvDynamoDBEndpoint] == "" {
		fmt.Fprintln(os.Stderr, "invoke: SPILLWAY_DYNAMODB_ENDPOINT is not set: starting the embedded DynamoDB and Kafka for this run")
		ddb, err := outboxlocal.StartDynamoDB(ctx, outboxlocal.WithoutEnvironment())
		if err != nil {
			return closeAll, err
		}
		closers = append(closers, func() { _ = ddb.Close() })
		table := ddb.NewTableName()
		if err := ddb.CreateTable(ctx, table); err != nil {
			return closeAll, err
		}
		kafka, err := outboxlocal.StartKafka(ctx, outboxlocal.KafkaConfig{Topics: []string{"orders", "payments"}, IgnoreEnvironment: true})
		if err != nil {
			return closeAll, err
		}
		closers = append(closers, func() { _ = kafka.Close() })
		vars[outboxconf.EnvDynamoDBEndpoint] = ddb.Endpoint
		vars[outboxconf.EnvTable] = table
		vars[outboxconf.EnvKafkaBrokers] = strings.Join(kafka.Brokers, ",")
	}
	if vars[outboxconf.EnvDynamoDBEndpoint] != "" && vars["AWS_ACCESS_KEY_ID"] == "" && vars["AWS_PROFILE"] == "" {
		// Local endpoints accept any credentials.
		vars["AWS_ACCESS_KEY_ID"], vars["AWS_SECRET_ACCESS_KEY"] = "spillway", "spillway"
		setDefault(vars, "AWS_EC2_METADATA_DISABLED", "true")
	}
	if vars["AWS_ENDPOINT_URL_LAMBDA"] == "" {
		api, err := lambdalocal.StartInvokeAPI()
		if err != nil {
			return closeAll, err
		}
		closers = append(closers, func() { _ = api.Close() })
		api.OnInvoke = func(inv lambdalocal.Invocation) {
			fmt.Fprintf(os.Stderr, "invoke: wake-up (%s invoke of %s, not sent): %s\n", inv.Type, inv.Function, inv.Payload)
		}
		vars["AWS_ENDPOINT_URL_LAMBDA"] = api.URL
	}
	return closeAll, nil
}

// invoke sends one event file and prints the response; it reports whether
// the function failed.
func invoke(ctx context.Context, em *lambdalocal.Emulator, st step) (bool, error) {
	payload, err := os.ReadFile(st.file)
	if err != nil {
		return false, err
	}
	fmt.Fprintf(os.Stderr, "invoke: %s <- %s\n", st.fn, st.file)
	resp, err := em.Invoke(ctx, payload)
	if err != nil {
		return false, err
	}
	fmt.Println(string(resp.Payload))
	return resp.Failed(), nil
}

// start builds function fn and runs it under the emulator.
func start(ctx context.Context, dir, fn, rie string, vars map[string]string) (*lambdalocal.Emulator, error) {
	bootstrap := filepath.Join(dir, fn, "bootstrap")
	if err := lambdalocal.Build(ctx, filepath.Join("functions", fn), bootstrap); err != nil {
		return nil, err
	}
	envList := []string{"AWS_LAMBDA_FUNCTION_NAME=spillway-" + fn}
	for k, v := range vars {
		if k != "AWS_LAMBDA_FUNCTION_NAME" {
			envList = append(envList, k+"="+v)
		}
	}
	return lambdalocal.Start(ctx, lambdalocal.Options{RIE: rie, Bootstrap: bootstrap, Env: envList, Output: os.Stderr})
}

// environ returns the process environment as a map.
func environ() map[string]string {
	vars := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	return vars
}

func setDefault(vars map[string]string, k, v string) {
	if vars[k] == "" {
		vars[k] = v
	}
}

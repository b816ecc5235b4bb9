package outboxlambda

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
	"github.com/spillway-dev/spillway/outbox/outboxobs/ddbusage"
	"github.com/spillway-dev/spillway/outbox/outboxobs/emf"
)

// EnvFunctionName is the variable Lambda sets to the function's name.
const EnvFunctionName = "AWS_LAMBDA_FUNCTION_NAME"

// initTimeout bounds what init reads over the network (the SCRAM secret).
// Lambda's init phase itself is limited to 10 s.
const initTimeout = 5 * time.Second

// Init is what a function builds once per execution environment from its
// environment: the configuration, the tracing mode, the AWS SDK
// configuration (instrumented by that mode) and the metrics recorder.
type Init struct {
	Config  Config
	Tracing Tracing
	AWS     aws.Config
	Metrics *emf.Recorder
	Logger  *slog.Logger
}

// NewInit loads the configuration through getenv and the AWS SDK
// configuration from the process environment (region, credentials, and
// AWS_ENDPOINT_URL_<SERVICE> overrides). Its errors, like those of
// NewRelayFromEnv and NewEnqueueFromEnv, start with "outboxlambda: " and
// name what to fix (`outboxlambda: configuration:
// SPILLWAY_BATCH_SIZE="lots": not a decimal integer`).
func NewInit(ctx context.Context, getenv func(string) string, log *slog.Logger) (*Init, error) {
	in, err := newInit(ctx, getenv, log)
	return in, initError(err)
}

// initError prefixes an error that stops a function at init with the
// package's name, unless it carries it already.
func initError(err error) error {
	if err == nil || strings.HasPrefix(err.Error(), "outboxlambda: ") {
		return err
	}
	return fmt.Errorf("outboxlambda: %w", err)
}

func newInit(ctx context.Context, getenv func(string) string, log *slog.Logger) (*Init, error) {
	cfg, err := LoadConfig(getenv)
	if err != nil {
		return nil, err
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load AWS SDK configuration: %w", err)
	}
	tracing, err := NewTracing(ctx, cfg.Tracing, getenv, log)
	if err != nil {
		return nil, err
	}
	tracing.InstrumentAWS(&awsCfg)
	rec, err := emf.NewRecorder(emf.Config{Namespace: cfg.MetricsNamespace, Outbox: cfg.OutboxName, FunctionName: getenv(EnvFunctionName)})
	if err != nil {
		return nil, err
	}
	return &Init{Config: cfg, Tracing: tracing, AWS: awsCfg, Metrics: rec, Logger: log}, nil
}

// DynamoDB returns the DynamoDB client, on SPILLWAY_DYNAMODB_ENDPOINT when
// set. Its requests and consumed capacity feed the DynamoDBRequests,
// ReadUnits and WriteUnits metrics.
func (in *Init) DynamoDB() *dynamodb.Client {
	return dynamodb.NewFromConfig(in.AWS, func(o *dynamodb.Options) {
		if in.Config.DynamoDBEndpoint != "" {
			o.BaseEndpoint = aws.String(in.Config.DynamoDBEndpoint)
		}
		ddbusage.Instrument(&o.APIOptions, in.Metrics)
	})
}

// notifier returns the wake-up notifier for function, nil when there is
// no function to wake. A writer's notifier reads the leases through owners
// to skip the wake-ups a live relay covers; a relay's has none.
func (in *Init) notifier(function string, hooks []outbox.Hook, owners OwnerReader, bell outbox.Ringer) (*Notifier, error) {
	if function == "" {
		return nil, nil
	}
	return NewNotifier(NotifierConfig{Client: lambda.NewFromConfig(in.AWS), FunctionName: function, Hooks: hooks, Logger: in.Logger,
		Owners: owners, LeaseDuration: in.Config.LeaseDuration, Doorbell: bell})
}

// doorbell returns the doorbell of SPILLWAY_DOORBELL_TOPIC for this
// outbox's key prefix.
func (in *Init) doorbell() outboxkafka.DoorbellConfig {
	return outboxkafka.DoorbellConfig{Topic: in.Config.DoorbellTopic, KeyPrefix: in.Config.KeyPrefix, Logger: in.Logger}
}

// kafkaConfig returns the Kafka configuration, reading the SCRAM secret
// once (bounded by initTimeout).
func (in *Init) kafkaConfig(ctx context.Context) (outboxkafka.Config, error) {
	var secrets SecretGetter
	if in.Config.KafkaScramSecretARN != "" {
		secrets = secretsmanager.NewFromConfig(in.AWS)
	}
	kctx, cancel := context.WithTimeout(ctx, initTimeout)
	defer cancel()
	return in.Config.KafkaConfig(kctx, secrets)
}

// NewRelayFromEnv builds the relay function's handler: DynamoDB store,
// Kafka publisher (with the SCRAM secret read once), continuation
// notifier (SPILLWAY_RELAY_FUNCTION, else the function itself), the
// tracing of SPILLWAY_TRACING and EMF metrics.
func NewRelayFromEnv(ctx context.Context, getenv func(string) string, log *slog.Logger) (*RelayHandler, error) {
	h, err := newRelayFromEnv(ctx, getenv, log)
	return h, initError(err)
}

func newRelayFromEnv(ctx context.Context, getenv func(string) string, log *slog.Logger) (*RelayHandler, error) {
	in, err := newInit(ctx, getenv, log)
	if err != nil {
		return nil, err
	}
	cfg := in.Config
	kcfg, err := in.kafkaConfig(ctx)
	if err != nil {
		return nil, err
	}
	pub, err := outboxkafka.New(kcfg)
	if err != nil {
		return nil, err
	}
	opts := cfg.StoreOptions()
	opts.Hooks, opts.Logger = []outbox.Hook{in.Metrics}, log
	store, err := outboxddb.NewStore(in.DynamoDB(), opts)
	if err != nil {
		return nil, err
	}
	fn := getenv(EnvFunctionName)
	// The engine reports its continuation wake-ups itself: the notifier
	// gets no hooks, or they would count twice.
	notifier, err := in.notifier(cmp.Or(cfg.RelayFunction, fn), nil, nil, nil)
	if err != nil {
		return nil, err
	}
	hc := RelayHandlerConfig{
		Config:       cfg,
		FunctionName: fn,
		Store:        store,
		Publisher:    pub,
		Hooks:        []outbox.Hook{in.Metrics},
		Tracer:       in.Tracing.Tracer(),
		Tracing:      in.Tracing,
		Logger:       log,
		Metrics:      in.Metrics,
	}
	if notifier != nil {
		hc.Notifier = notifier
	}
	if cfg.DoorbellTopic != "" {
		if hc.Doorbell, err = pub.Listener(in.doorbell()); err != nil {
			return nil, err
		}
	}
	if _, ok := cfg.Previous(); ok {
		popts := cfg.PreviousStoreOptions()
		popts.Hooks, popts.Logger = []outbox.Hook{in.Metrics}, log
		if hc.PreviousStore, err = outboxddb.NewStore(in.DynamoDB(), popts); err != nil {
			return nil, err
		}
	}
	return NewRelayHandler(hc)
}

// NewEnqueueFromEnv builds the enqueue function's handler: the DynamoDB
// writer, whose notifier wakes SPILLWAY_RELAY_FUNCTION after each commit
// (no wake-up when unset: the relay's schedule finds the messages, and a
// warning says so unless SPILLWAY_DYNAMODB_ENDPOINT is local, where no
// schedule runs), the tracing of SPILLWAY_TRACING and EMF metrics.
func NewEnqueueFromEnv(ctx context.Context, getenv func(string) string, log *slog.Logger) (*EnqueueHandler, error) {
	h, err := newEnqueueFromEnv(ctx, getenv, log)
	return h, initError(err)
}

func newEnqueueFromEnv(ctx context.Context, getenv func(string) string, log *slog.Logger) (*EnqueueHandler, error) {
	in, err := newInit(ctx, getenv, log)
	if err != nil {
		return nil, err
	}
	cfg := in.Config
	opts := cfg.StoreOptions()
	opts.Hooks, opts.Logger = []outbox.Hook{in.Metrics}, log
	owners, err := outboxddb.NewStore(in.DynamoDB(), opts)
	if err != nil {
		return nil, err
	}
	// With a doorbell the enqueue function rings the relay holding the
	// buckets of every commit (SPILLWAY_DOORBELL_TOPIC).
	var bell outbox.Ringer
	if cfg.DoorbellTopic != "" && cfg.RelayFunction != "" {
		kcfg, err := in.kafkaConfig(ctx)
		if err != nil {
			return nil, err
		}
		if bell, err = outboxkafka.NewRinger(kcfg, in.doorbell()); err != nil {
			return nil, err
		}
	}
	notifier, err := in.notifier(cfg.RelayFunction, []outbox.Hook{in.Metrics}, owners, bell)
	if err != nil {
		return nil, err
	}
	wopts := cfg.WriterOptions()
	wopts.Hooks, wopts.Logger = opts.Hooks, log
	switch {
	case notifier != nil:
		wopts.Notifier = notifier
	case outboxconf.LocalEndpoint(cfg.DynamoDBEndpoint):
		// No schedule runs beside a local endpoint: the relay is the one
		// its user runs (spillway drain), which needs no warning.
		log.Debug("no relay function configured: enqueued messages wait for a relay you run", "variable", outboxconf.EnvRelayFunction)
	default:
		log.Warn("no relay function configured: enqueued messages wait for the relay's schedule", "variable", outboxconf.EnvRelayFunction)
	}
	writer, err := outboxddb.NewWriter(in.DynamoDB(), wopts)
	if err != nil {
		return nil, err
	}
	// Another bucket count than the table's layout record fails the init;
	// a failed read is the first request's to retry.
	if err := writer.CheckLayout(ctx); errors.Is(err, outbox.ErrMisconfigured) {
		return nil, err
	}
	return NewEnqueueHandler(EnqueueHandlerConfig{
		Config:       cfg,
		Writer:       writer,
		Hooks:        []outbox.Hook{in.Metrics},
		Logger:       log,
		Getenv:       getenv,
		Metrics:      in.Metrics,
		Tracing:      in.Tracing,
		FunctionName: getenv(EnvFunctionName),
	})
}

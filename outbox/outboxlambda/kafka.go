package outboxlambda

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
)

// SecretGetter is the Secrets Manager call that reads the SCRAM secret.
// *secretsmanager.Client satisfies it.
type SecretGetter interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

var _ SecretGetter = (*secretsmanager.Client)(nil)

// KafkaConfig returns the publisher configuration of c. The relay needs
// brokers; with scram-sha-512 the credentials are read from the secret
// named by KafkaScramSecretARN through secrets (unused otherwise, may be
// nil then), and read again when a broker refuses them after a rotation (at
// most once per outboxkafka.SCRAMRefreshInterval). Amazon MSK stores SCRAM
// secrets as {"username": …, "password": …}.
func (c Config) KafkaConfig(ctx context.Context, secrets SecretGetter) (outboxkafka.Config, error) {
	if len(c.KafkaBrokers) == 0 {
		return outboxkafka.Config{}, &ConfigError{Variable: outboxconf.EnvKafkaBrokers, Value: "",
			Problem: "required by the relay: list the seed brokers as host:port,host:port"}
	}
	cfg := outboxkafka.Config{
		Brokers: c.KafkaBrokers,
		TLS:     c.KafkaTLS,
		Auth:    outboxkafka.Auth{Mechanism: outboxkafka.AuthMechanism(c.KafkaAuth)},
		// The relay's memory budget counts the request the client encodes
		// from what it buffers.
		MaxBufferedBytes: outbox.MemoryBudgetFor(int64(c.MemoryMB) << 20).ProducerBufferBytes,
	}
	if c.KafkaAuth == outboxconf.KafkaAuthScram {
		if secrets == nil {
			return outboxkafka.Config{}, fmt.Errorf("outboxlambda: kafka config: %s needs a Secrets Manager client to read %s", outboxconf.KafkaAuthScram, c.KafkaScramSecretARN)
		}
		creds, err := scramCredentials(ctx, secrets, c.KafkaScramSecretARN)
		if err != nil {
			return outboxkafka.Config{}, err
		}
		arn := c.KafkaScramSecretARN
		creds.Refresh = func(ctx context.Context) (outboxkafka.SCRAMAuth, error) {
			return scramCredentials(ctx, secrets, arn)
		}
		cfg.Auth.SCRAM = creds
	}
	return cfg, nil
}

func scramCredentials(ctx context.Context, secrets SecretGetter, arn string) (outboxkafka.SCRAMAuth, error) {
	out, err := secrets.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return outboxkafka.SCRAMAuth{}, fmt.Errorf("outboxlambda: read SCRAM secret %s: %w", arn, err)
	}
	var creds struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}
	// The secret's content never appears in an error: it is a password.
	if err := json.Unmarshal([]byte(aws.ToString(out.SecretString)), &creds); err != nil {
		return outboxkafka.SCRAMAuth{}, &ConfigError{Variable: outboxconf.EnvKafkaScramSecret, Value: arn,
			Problem: "the secret's value is not a JSON object {\"username\":…,\"password\":…}"}
	}
	if creds.Username == "" || creds.Password == "" {
		return outboxkafka.SCRAMAuth{}, &ConfigError{Variable: outboxconf.EnvKafkaScramSecret, Value: arn,
			Problem: "the secret lacks a non-empty \"username\" or \"password\""}
	}
	return outboxkafka.SCRAMAuth{User: creds.Username, Password: creds.Password}, nil
}

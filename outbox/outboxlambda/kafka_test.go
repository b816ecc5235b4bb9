package outboxlambda

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxkafka"
)

// fakeSecrets answers GetSecretValue with a fixed string and records the
// ids asked for.
type fakeSecrets struct {
	value string
	err   error
	asked []string
}

func (f *fakeSecrets) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	f.asked = append(f.asked, aws.ToString(in.SecretId))
	if f.err != nil {
		return nil, f.err
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(f.value)}, nil
}

func scramConfig(t *testing.T) Config {
	t.Helper()
	cfg, err := LoadConfig(env(withVars(map[string]string{
		outboxconf.EnvKafkaBrokers:     "b-1.example:9096",
		outboxconf.EnvKafkaAuth:        outboxconf.KafkaAuthScram,
		outboxconf.EnvKafkaScramSecret: "arn:aws:secretsmanager:us-east-1:123456789012:secret:AmazonMSK_relay",
	})))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestKafka(t *testing.T) {
	t.Parallel()
	t.Run("ConfigReadsTheSCRAMSecret", func(t *testing.T) {
		t.Parallel()
		cfg := scramConfig(t)
		secrets := &fakeSecrets{value: `{"username":"relay","password":"s3cret"}`}
		got, err := cfg.KafkaConfig(t.Context(), secrets)
		if err != nil {
			t.Fatal(err)
		}
		if len(secrets.asked) != 1 || secrets.asked[0] != cfg.KafkaScramSecretARN {
			t.Fatalf("asked for %v, want the configured ARN once", secrets.asked)
		}
		if got.Auth.Mechanism != outboxkafka.AuthSCRAMSHA512 || got.Auth.SCRAM.User != "relay" || got.Auth.SCRAM.Password != "s3cret" || !got.TLS {
			t.Fatalf("config %+v", got)
		}
		if err := got.WithDefaults().Validate(); err != nil {
			t.Fatalf("publisher config does not validate: %v", err)
		}
		// After a rotation the publisher re-reads the same secret.
		secrets.value = `{"username":"relay","password":"rotated"}`
		again, err := got.Auth.SCRAM.Refresh(t.Context())
		if err != nil || again.Password != "rotated" || len(secrets.asked) != 2 || secrets.asked[1] != cfg.KafkaScramSecretARN {
			t.Fatalf("refresh = %+v, %v after asking %v; want the rotated password from the configured ARN", again, err, secrets.asked)
		}
	})

	t.Run("ConfigRefusesBadSecrets", func(t *testing.T) {
		t.Parallel()
		for name, secrets := range map[string]*fakeSecrets{
			"not json":     {value: "relay:s3cret"},
			"no password":  {value: `{"username":"relay"}`},
			"service down": {err: errors.New("AccessDeniedException")},
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				_, err := scramConfig(t).KafkaConfig(t.Context(), secrets)
				if err == nil {
					t.Fatal("no error")
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("error leaks the secret: %v", err)
				}
				if !strings.Contains(err.Error(), "AmazonMSK_relay") {
					t.Fatalf("error %q does not name the secret", err)
				}
			})
		}
	})
}

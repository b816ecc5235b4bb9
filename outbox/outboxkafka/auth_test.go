package outboxkafka

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/spillway-dev/spillway/outbox"
)

// countingCreds is an aws.CredentialsProvider that returns a new session
// token on every call, so a test can see which call signed a connection.
type countingCreds struct {
	calls atomic.Int64
	err   error
}

func (c *countingCreds) Retrieve(context.Context) (aws.Credentials, error) {
	n := c.calls.Add(1)
	if c.err != nil {
		return aws.Credentials{}, c.err
	}
	return aws.Credentials{
		AccessKeyID:     "AKIDEXAMPLE",
		SecretAccessKey: "secret",
		SessionToken:    "token-" + string(rune('0'+n)),
	}, nil
}

func staticCreds(key, secret, token string) aws.CredentialsProvider {
	return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: key, SecretAccessKey: secret, SessionToken: token}, nil
	})
}

// iamMech returns the single SASL mechanism New configured.
func iamMech(t *testing.T, cfg Config) sasl.Mechanism {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(p.Close)
	mechs := p.cl.OptValue(kgo.SASL).([]sasl.Mechanism)
	if len(mechs) != 1 || mechs[0].Name() != "AWS_MSK_IAM" {
		t.Fatalf("SASL = %v", mechs)
	}
	return mechs[0]
}

// challenge runs the first SASL step the client sends on a new connection
// and decodes the signed payload; no network is involved.
func challenge(t *testing.T, m sasl.Mechanism, host string) map[string]string {
	t.Helper()
	_, first, err := m.Authenticate(context.Background(), host)
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	var kv map[string]string
	if err := json.Unmarshal(first, &kv); err != nil {
		t.Fatalf("challenge %q: %v", first, err)
	}
	return kv
}

func TestAuth(t *testing.T) {
	t.Run("MSKIAMRetrievesCredentialsPerConnection", func(t *testing.T) {
		t.Parallel()
		creds := &countingCreds{}
		host := "b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com:9098"
		m := iamMech(t, Config{
			Brokers: []string{host},
			Auth:    Auth{Mechanism: AuthMSKIAM, IAM: IAMAuth{Credentials: creds, UserAgent: "spillway-test"}},
		})
		if n := creds.calls.Load(); n != 0 {
			t.Fatalf("New retrieved credentials %d times; it must wait for a connection", n)
		}
		for i, token := range []string{"token-1", "token-2"} {
			kv := challenge(t, m, host)
			if got := kv["x-amz-security-token"]; got != token {
				t.Errorf("connection %d signed with session token %q, want %q", i+1, got, token)
			}
			if !strings.HasPrefix(kv["x-amz-credential"], "AKIDEXAMPLE/") || !strings.Contains(kv["x-amz-credential"], "/eu-west-1/kafka-cluster/") {
				t.Errorf("credential scope = %q", kv["x-amz-credential"])
			}
			if kv["action"] != "kafka-cluster:Connect" || kv["user-agent"] != "spillway-test" {
				t.Errorf("challenge = %v", kv)
			}
		}
		if n := creds.calls.Load(); n != 2 {
			t.Errorf("two connections retrieved credentials %d times", n)
		}

		failing := &countingCreds{err: errors.New("no role")}
		m = iamMech(t, Config{Brokers: []string{host}, Auth: Auth{Mechanism: AuthMSKIAM, IAM: IAMAuth{Credentials: failing}}})
		if _, _, err := m.Authenticate(context.Background(), host); err == nil || !strings.Contains(err.Error(), "no role") {
			t.Errorf("Authenticate with failing credentials = %v", err)
		}
	})

	// With no provider the default chain is used; the environment is its first
	// source, so the test sets it (and therefore cannot run in parallel).
	t.Run("MSKIAMDefaultCredentialChain", func(t *testing.T) {
		t.Setenv("AWS_ACCESS_KEY_ID", "AKIDFROMENV")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
		t.Setenv("AWS_SESSION_TOKEN", "envtoken")
		t.Setenv("AWS_CONFIG_FILE", os.DevNull)
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
		host := "b-1.demo.abc123.c2.kafka.us-east-2.amazonaws.com:9098"
		m := iamMech(t, Config{Brokers: []string{host}, Auth: Auth{Mechanism: AuthMSKIAM, IAM: IAMAuth{Region: "us-east-2"}}})
		kv := challenge(t, m, host)
		if !strings.HasPrefix(kv["x-amz-credential"], "AKIDFROMENV/") || kv["x-amz-security-token"] != "envtoken" {
			t.Errorf("challenge = %v", kv)
		}
	})

	t.Run("SCRAMAgainstBroker", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "relay", "s3cret"), kfake.SeedTopics(1, "orders"))
		scram := func(pass string) func(*Config) {
			return func(cfg *Config) {
				cfg.Auth = Auth{Mechanism: AuthSCRAMSHA512, SCRAM: SCRAMAuth{User: "relay", Password: pass}}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()

		good := newPublisher(t, c, scram("s3cret"))
		if err := good.Init(ctx); err != nil {
			t.Fatalf("Init with the right password: %v", err)
		}
		if n, err := good.Publish(ctx, []outbox.Message{message(t, 1, "orders", []byte("k"), []byte("v"), nil, nil)}); n != 1 || err != nil {
			t.Fatalf("Publish = %d, %v", n, err)
		}

		bad := newPublisher(t, c, scram("wrong"))
		if err := bad.Init(ctx); err == nil {
			t.Fatal("Init with a wrong password succeeded")
		}
	})

	// MSKIAMRealCluster runs against a real MSK cluster with IAM auth. It
	// needs AWS credentials in the environment, SPILLWAY_KAFKA_BROKERS (the IAM
	// bootstrap brokers, port 9098) and, to publish, SPILLWAY_MSK_IAM_TOPIC (an
	// existing topic).
	t.Run("MSKIAMRealCluster", func(t *testing.T) {
		if os.Getenv("SPILLWAY_MSK_IAM_TEST") != "1" {
			t.Skip("real MSK IAM test: set SPILLWAY_MSK_IAM_TEST=1 and SPILLWAY_KAFKA_BROKERS to run it against AWS")
		}
		brokers := strings.Split(os.Getenv("SPILLWAY_KAFKA_BROKERS"), ",")
		p, err := New(Config{Brokers: brokers, Auth: Auth{Mechanism: AuthMSKIAM, IAM: IAMAuth{Region: os.Getenv("AWS_REGION")}}})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		defer p.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Init(ctx); err != nil {
			t.Fatalf("Init: %v", err)
		}
		topic := os.Getenv("SPILLWAY_MSK_IAM_TOPIC")
		if topic == "" {
			t.Log("SPILLWAY_MSK_IAM_TOPIC unset: authenticated, not publishing")
			return
		}
		m := message(t, 1, topic, []byte("spillway-msk-iam-test"), []byte("ping"), nil, nil)
		if n, err := p.Publish(ctx, []outbox.Message{m}); n != 1 || err != nil {
			t.Fatalf("Publish = %d, %v", n, err)
		}
	})
}

package outboxkafka

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	mskiam "github.com/twmb/franz-go/pkg/sasl/aws"

	"github.com/spillway-dev/spillway/outbox"
)

// clientOpts returns the franz-go options for c (defaults applied and
// validated): the caller's ExtraOpts first, then every setting the
// publisher's guarantees rest on, so a later option of ours overrides an
// earlier one of theirs.
func (c Config) clientOpts(src *scramSource) ([]kgo.Opt, error) {
	conn, err := c.connectOpts(src)
	if err != nil {
		return nil, err
	}
	opts := make([]kgo.Opt, 0, len(c.ExtraOpts)+len(conn)+8)
	opts = append(opts, c.ExtraOpts...)
	opts = append(opts, conn...)
	opts = append(opts,
		// The relay deletes an acknowledged prefix; only acks=all makes
		// that prefix durable.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(newPartitioner()),
		kgo.RecordDeliveryTimeout(c.ProduceTimeout),
		// Records leave only once a Flush starts them, so the publisher
		// hands a batch over whole before the client starts sending it
		// (see flusher).
		kgo.ManualFlushing(),
	)
	if c.MaxBufferedBytes > 0 {
		opts = append(opts, kgo.MaxBufferedBytes(int(c.MaxBufferedBytes)))
	}
	return opts, nil
}

// ConnectOpts returns the franz-go options that reach c's brokers as the
// publisher does (seed brokers, client id, TLS, SASL, SCRAM credentials
// re-read on every connection), without its producer settings or
// ExtraOpts: for tools that work on the same cluster, such as spillway
// redrive. c is validated with its defaults applied.
func (c Config) ConnectOpts() ([]kgo.Opt, error) {
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c.connectOpts(c.scramSource())
}

// scramSource returns the SCRAM credentials' source, nil without SCRAM.
func (c Config) scramSource() *scramSource {
	if c.Auth.Mechanism != AuthSCRAMSHA512 {
		return nil
	}
	return newSCRAMSource(c.Auth.SCRAM, c.Clock)
}

// connectOpts returns the options that reach the brokers.
func (c Config) connectOpts(src *scramSource) ([]kgo.Opt, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...), kgo.ClientID(c.ClientID)}
	if c.tlsEnabled() {
		if c.TLSConfig != nil {
			opts = append(opts, kgo.DialTLSConfig(c.TLSConfig.Clone()))
		} else {
			opts = append(opts, kgo.DialTLS())
		}
	}
	mech, err := c.Auth.mechanism(src)
	if err != nil {
		return nil, err
	}
	if mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	if src != nil {
		opts = append(opts, kgo.WithHooks(src))
	}
	return opts, nil
}

// mechanism returns the SASL mechanism for a, nil for none; SCRAM takes its
// credentials from src on every connection.
func (a Auth) mechanism(src *scramSource) (sasl.Mechanism, error) {
	switch a.Mechanism {
	case AuthSCRAMSHA512:
		return src.mechanism(), nil
	case AuthMSKIAM:
		creds := a.IAM.Credentials
		if creds == nil {
			// Loading reads the environment and shared files only; the
			// chain contacts AWS when a connection asks for credentials.
			cfg, err := awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithRegion(a.IAM.Region))
			if err != nil {
				return nil, outbox.Misconfigured("kafka publisher config", "auth %s: load the default AWS credential chain: %v", AuthMSKIAM, err)
			}
			creds = cfg.Credentials
		}
		return iamMechanism(creds, a.IAM.UserAgent), nil
	default:
		return nil, nil
	}
}

// iamMechanism returns the AWS_MSK_IAM mechanism. franz-go calls the
// callback once per connection's authentication, so every connection signs
// with credentials current at that moment.
func iamMechanism(creds aws.CredentialsProvider, userAgent string) sasl.Mechanism {
	return mskiam.ManagedStreamingIAM(func(ctx context.Context) (mskiam.Auth, error) {
		v, err := creds.Retrieve(ctx)
		if err != nil {
			return mskiam.Auth{}, fmt.Errorf("outboxkafka: retrieve AWS credentials for MSK IAM: %w", err)
		}
		return mskiam.Auth{
			AccessKey:    v.AccessKeyID,
			SecretKey:    v.SecretAccessKey,
			SessionToken: v.SessionToken,
			UserAgent:    userAgent,
		}, nil
	})
}

// checkGuarantees refuses a client whose options switched off something the
// acknowledged-prefix contract needs and that no later option can switch
// back on.
func checkGuarantees(cl *kgo.Client) error {
	const op = "kafka publisher options"
	if on, _ := cl.OptValue(kgo.DisableIdempotentWrite).(bool); on {
		return outbox.Misconfigured(op, "ExtraOpts disable idempotent writes; without them a failed record does not fail the later records of its partition, so an acknowledged prefix could hide a gap")
	}
	if vs := cl.OptValues(kgo.TransactionalID); len(vs) == 2 && vs[1] == true {
		return outbox.Misconfigured(op, "ExtraOpts set transactional id %q; the relay never drives transactions, so every record would fail", vs[0])
	}
	if on, _ := cl.OptValue(kgo.AllowIdempotentProduceCancellation).(bool); on {
		return outbox.Misconfigured(op, "ExtraOpts allow idempotent produce cancellation; a cancelled in-flight record may still land, then land again when the next owner republishes it")
	}
	if on, _ := cl.OptValue(kgo.DefaultProduceTopicAlways).(bool); on {
		return outbox.Misconfigured(op, "ExtraOpts set DefaultProduceTopicAlways; it would send every message to one topic instead of its own")
	}
	return nil
}

package outboxkafka

import (
	"context"
	"crypto/tls"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// Defaults applied by New to zero Config fields.
const (
	// DefaultClientID identifies the relay to the brokers (quotas, logs).
	DefaultClientID = "spillway-relay"
	// DefaultProduceTimeout bounds one record's delivery, retries included;
	// it matches the Java client's delivery.timeout.ms.
	DefaultProduceTimeout = 2 * time.Minute
)

// AuthMechanism selects how the client authenticates to the brokers. The
// values are the ones accepted in outboxconf.EnvKafkaAuth.
type AuthMechanism string

// Authentication mechanisms.
const (
	// AuthNone connects without SASL. The empty mechanism means the same.
	AuthNone AuthMechanism = outboxconf.KafkaAuthNone
	// AuthSCRAMSHA512 authenticates with SASL/SCRAM-SHA-512 (Amazon MSK's
	// username and password scheme).
	AuthSCRAMSHA512 AuthMechanism = outboxconf.KafkaAuthScram
	// AuthMSKIAM authenticates with Amazon MSK's IAM SASL mechanism
	// (AWS_MSK_IAM). It always runs over TLS.
	AuthMSKIAM AuthMechanism = outboxconf.KafkaAuthIAM
)

// Auth configures SASL authentication. Only the fields of the chosen
// Mechanism are read.
type Auth struct {
	// Mechanism picks the scheme; empty means AuthNone.
	Mechanism AuthMechanism
	// SCRAM holds the credentials for AuthSCRAMSHA512.
	SCRAM SCRAMAuth
	// IAM holds the credentials source for AuthMSKIAM.
	IAM IAMAuth
}

// SCRAMAuth holds SASL/SCRAM credentials. Both fields are required.
type SCRAMAuth struct {
	// User is the SASL user name.
	User string
	// Password is the user's password (for MSK, from the Secrets Manager
	// secret named in outboxconf.EnvKafkaScramSecret).
	Password string
	// Refresh, when set, reads the credentials again (for MSK, the secret
	// again, after a rotation). When a broker refuses the credentials the
	// publisher calls it before its next connection, at most once per
	// SCRAMRefreshInterval, and uses what it returns; Init reconnects at
	// once. Optional: without it the credentials are fixed.
	Refresh func(ctx context.Context) (SCRAMAuth, error)
}

// IAMAuth configures Amazon MSK IAM authentication.
//
// Credentials are retrieved for every new broker connection, so rotated
// credentials (a Lambda role's session, an assumed role) are picked up
// without restarting the publisher; pass a provider wrapped in
// aws.NewCredentialsCache to avoid a fetch per connection.
type IAMAuth struct {
	// Credentials supplies the signing credentials. Default: the SDK's
	// default credential chain (environment, shared files, the Lambda or
	// container role), loaded once by New.
	Credentials aws.CredentialsProvider
	// Region is the region used to load the default credential chain when
	// Credentials is nil. The signing region itself comes from the broker
	// host name (b-1.<cluster>.kafka.<region>.amazonaws.com), falling back
	// to AWS_REGION for host names that do not carry one.
	Region string
	// UserAgent, if set, replaces franz-go's default user agent in the
	// signed request, so IAM policies can match on aws:UserAgent.
	UserAgent string
}

// Config configures a Publisher. The zero value of every field except
// Brokers is usable.
type Config struct {
	// Brokers are the seed brokers as host:port. Required.
	Brokers []string
	// ClientID is the Kafka client id. Default DefaultClientID.
	ClientID string
	// MessageIDHeaderName is the header that carries the message id.
	// Default outbox.DefaultMessageIDHeaderName.
	MessageIDHeaderName string
	// Auth selects SASL authentication. Default none.
	Auth Auth
	// TLS turns on TLS with the system roots. AuthMSKIAM and a non-nil
	// TLSConfig turn it on as well.
	TLS bool
	// TLSConfig, when non-nil, is the TLS configuration (a clone is used;
	// an empty ServerName is set per broker).
	TLSConfig *tls.Config
	// ProduceTimeout bounds the delivery of one record, retries included;
	// a record still unacknowledged after it fails. Publish's ctx bounds it
	// further. Default DefaultProduceTimeout.
	ProduceTimeout time.Duration
	// Clock stamps acknowledgement times in Result.AckedAt; waits, as the
	// unknown-topic wait, are the time package's. Default
	// outbox.SystemClock.
	Clock outbox.Clock
	// UnknownTopicWait is how long a publisher waits before asking the
	// brokers' metadata once more for a topic it did not list, before it
	// reports the topic unknown. Default DefaultUnknownTopicWait (1 s).
	UnknownTopicWait time.Duration
	// MaxBufferedBytes bounds the record bytes (keys, values, headers) the
	// client holds for one Flush (kgo.MaxBufferedBytes): a batch larger than
	// it is handed over and sent in parts, so the request the client
	// encodes and compresses from them stays as small. A record larger than
	// it goes alone. Default 0: the client's own limits (50,000 records, no
	// byte bound); outboxlambda sets it from the relay's memory
	// (outbox.MemoryBudget.ProducerBufferBytes). It wins over ExtraOpts.
	MaxBufferedBytes int64
	// ExtraOpts are further franz-go options (logger, hooks, compression,
	// retry backoff, buffer limits, dialer ...). They are applied first, so
	// the settings the publisher relies on win: acks=all, the outbox
	// partitioner, manual flushing (which makes a linger pointless), the
	// seed brokers, the client id, the delivery timeout, and TLS and SASL
	// when this Config turns them on. Options that no
	// later option can undo are refused by New as misconfigurations:
	// DisableIdempotentWrite, TransactionalID,
	// AllowIdempotentProduceCancellation and DefaultProduceTopicAlways.
	ExtraOpts []kgo.Opt
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	if c.MessageIDHeaderName == "" {
		c.MessageIDHeaderName = outbox.DefaultMessageIDHeaderName
	}
	if c.Auth.Mechanism == "" {
		c.Auth.Mechanism = AuthNone
	}
	if c.ProduceTimeout == 0 {
		c.ProduceTimeout = DefaultProduceTimeout
	}
	if c.Clock == nil {
		c.Clock = outbox.SystemClock{}
	}
	if c.UnknownTopicWait == 0 {
		c.UnknownTopicWait = DefaultUnknownTopicWait
	}
	return c
}

// Validate reports a configuration that cannot work as an error matching
// outbox.ErrMisconfigured: no brokers or a blank one, an unknown mechanism,
// SCRAM without a user or password, a negative produce timeout. Zero fields
// that have defaults are accepted.
func (c Config) Validate() error {
	const op = "kafka publisher config"
	if c.MaxBufferedBytes < 0 {
		return outbox.Misconfigured(op, "MaxBufferedBytes %d must be >= 0", c.MaxBufferedBytes)
	}
	if len(c.Brokers) == 0 {
		return outbox.Misconfigured(op, "no brokers: set Brokers (%s) to host:port of at least one broker", outboxconf.EnvKafkaBrokers)
	}
	for i, b := range c.Brokers {
		if strings.TrimSpace(b) == "" {
			return outbox.Misconfigured(op, "broker %d is blank", i)
		}
	}
	switch c.Auth.Mechanism {
	case "", AuthNone, AuthMSKIAM:
	case AuthSCRAMSHA512:
		if c.Auth.SCRAM.User == "" {
			return outbox.Misconfigured(op, "auth %s needs a user", AuthSCRAMSHA512)
		}
		if c.Auth.SCRAM.Password == "" {
			return outbox.Misconfigured(op, "auth %s needs a password for user %q", AuthSCRAMSHA512, c.Auth.SCRAM.User)
		}
	default:
		return outbox.Misconfigured(op, "unknown auth mechanism %q (want %s, %s or %s)",
			c.Auth.Mechanism, AuthNone, AuthSCRAMSHA512, AuthMSKIAM)
	}
	if c.ProduceTimeout < 0 {
		return outbox.Misconfigured(op, "negative produce timeout %s", c.ProduceTimeout)
	}
	return nil
}

// tlsEnabled reports whether connections use TLS.
func (c Config) tlsEnabled() bool {
	return c.TLS || c.TLSConfig != nil || c.Auth.Mechanism == AuthMSKIAM
}

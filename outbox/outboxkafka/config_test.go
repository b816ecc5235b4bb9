package outboxkafka

import (
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/spillway-dev/spillway/outbox"
)

func TestConfig(t *testing.T) {
	t.Parallel()
	t.Run("ValidateRefusesWhatCannotWork", func(t *testing.T) {
		t.Parallel()
		brokers := []string{"127.0.0.1:9092"}
		cases := []struct {
			name string
			cfg  Config
		}{
			{"no brokers", Config{}},
			{"blank broker", Config{Brokers: []string{"127.0.0.1:9092", " "}}},
			{"unknown auth", Config{Brokers: brokers, Auth: Auth{Mechanism: "plain"}}},
			{"scram without user", Config{Brokers: brokers, Auth: Auth{Mechanism: AuthSCRAMSHA512, SCRAM: SCRAMAuth{Password: "p"}}}},
			{"scram without password", Config{Brokers: brokers, Auth: Auth{Mechanism: AuthSCRAMSHA512, SCRAM: SCRAMAuth{User: "u"}}}},
			{"negative produce timeout", Config{Brokers: brokers, ProduceTimeout: -time.Second}},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				if err := c.cfg.Validate(); !errors.Is(err, outbox.ErrMisconfigured) {
					t.Fatalf("Validate: got %v, want ErrMisconfigured", err)
				}
				p, err := New(c.cfg)
				if !errors.Is(err, outbox.ErrMisconfigured) {
					if p != nil {
						p.Close()
					}
					t.Fatalf("New: got %v, want ErrMisconfigured", err)
				}
			})
		}
	})

	t.Run("ValidateAcceptsEveryMechanism", func(t *testing.T) {
		t.Parallel()
		brokers := []string{"127.0.0.1:9092"}
		for _, a := range []Auth{
			{},
			{Mechanism: AuthNone},
			{Mechanism: AuthSCRAMSHA512, SCRAM: SCRAMAuth{User: "u", Password: "p"}},
			{Mechanism: AuthMSKIAM, IAM: IAMAuth{Credentials: staticCreds("AKID", "secret", "")}},
		} {
			if err := (Config{Brokers: brokers, Auth: a}).Validate(); err != nil {
				t.Errorf("auth %q: %v", a.Mechanism, err)
			}
		}
	})

	t.Run("WithDefaults", func(t *testing.T) {
		t.Parallel()
		got := Config{Brokers: []string{"b:9092"}}.WithDefaults()
		if got.ClientID != "spillway-relay" {
			t.Errorf("ClientID = %q", got.ClientID)
		}
		if got.MessageIDHeaderName != "x-outbox-message-id" {
			t.Errorf("MessageIDHeaderName = %q", got.MessageIDHeaderName)
		}
		if got.Auth.Mechanism != AuthNone {
			t.Errorf("Mechanism = %q", got.Auth.Mechanism)
		}
		if got.ProduceTimeout != 2*time.Minute {
			t.Errorf("ProduceTimeout = %s", got.ProduceTimeout)
		}
		if _, ok := got.Clock.(outbox.SystemClock); !ok {
			t.Errorf("Clock = %T", got.Clock)
		}
		kept := Config{ClientID: "c", MessageIDHeaderName: "h", ProduceTimeout: time.Second}.WithDefaults()
		if kept.ClientID != "c" || kept.MessageIDHeaderName != "h" || kept.ProduceTimeout != time.Second {
			t.Errorf("set fields were replaced: %+v", kept)
		}
	})

	// downgrades are options a caller might pass to weaken delivery; each must
	// be overridden (the client ends up with the publisher's value) or refused.
	t.Run("ExtraOptsCannotDowngradeDelivery", func(t *testing.T) {
		t.Parallel()
		brokers := []string{"127.0.0.1:9092"}
		downgrade := []kgo.Opt{
			kgo.RequiredAcks(kgo.LeaderAck()),
			kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
			kgo.ClientID("theirs"),
			kgo.SeedBrokers("elsewhere:9092"),
			kgo.RecordDeliveryTimeout(time.Hour),
		}

		// Positive control: alone, these options do take effect, so the
		// assertions below could fail.
		plain, err := kgo.NewClient(append([]kgo.Opt{kgo.DisableIdempotentWrite()}, downgrade...)...)
		if err != nil {
			t.Fatal(err)
		}
		if plain.OptValue(kgo.RequiredAcks) != kgo.LeaderAck() {
			t.Fatalf("control: acks = %v", plain.OptValue(kgo.RequiredAcks))
		}
		plain.Close()

		p, err := New(Config{Brokers: brokers, ProduceTimeout: 7 * time.Second, ExtraOpts: downgrade})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		defer p.Close()
		if got := p.cl.OptValue(kgo.RequiredAcks); got != kgo.AllISRAcks() {
			t.Errorf("acks = %v, want all", got)
		}
		if _, ok := p.cl.OptValue(kgo.RecordPartitioner).(partitioner); !ok {
			t.Errorf("partitioner = %T, want the outbox partitioner", p.cl.OptValue(kgo.RecordPartitioner))
		}
		if got := p.cl.OptValue(kgo.DisableIdempotentWrite); got != false {
			t.Errorf("idempotence disabled = %v", got)
		}
		if vs := p.cl.OptValues(kgo.TransactionalID); vs[1] != false {
			t.Errorf("transactional id set: %v", vs)
		}
		if got := p.cl.OptValue(kgo.ClientID); got != DefaultClientID {
			t.Errorf("client id = %v", got)
		}
		if got := p.cl.OptValue(kgo.SeedBrokers).([]string); len(got) != 1 || got[0] != brokers[0] {
			t.Errorf("seed brokers = %v", got)
		}
		if got := p.cl.OptValue(kgo.RecordDeliveryTimeout); got != 7*time.Second {
			t.Errorf("delivery timeout = %v", got)
		}

		for name, opt := range map[string]kgo.Opt{
			"disable idempotence":      kgo.DisableIdempotentWrite(),
			"transactional id":         kgo.TransactionalID("txn"),
			"empty transactional id":   kgo.TransactionalID(""),
			"cancel in-flight records": kgo.AllowIdempotentProduceCancellation(),
			"default topic for all":    kgo.DefaultProduceTopicAlways(),
		} {
			p, err := New(Config{Brokers: brokers, ExtraOpts: []kgo.Opt{opt}})
			if !errors.Is(err, outbox.ErrMisconfigured) {
				if p != nil {
					p.Close()
				}
				t.Errorf("%s: New = %v, want ErrMisconfigured", name, err)
			}
		}
	})

	t.Run("ClientOptsAuthAndTLS", func(t *testing.T) {
		t.Parallel()
		brokers := []string{"b-1.demo.abc123.c2.kafka.eu-west-1.amazonaws.com:9098"}
		roots := &tls.Config{ServerName: "pinned.example", MinVersion: tls.VersionTLS13}
		cases := []struct {
			name    string
			cfg     Config
			mech    string // "" = no SASL
			tls     bool
			tlsName string
		}{
			{"none", Config{}, "", false, ""},
			{"tls flag", Config{TLS: true}, "", true, ""},
			{"tls config", Config{TLSConfig: roots}, "", true, "pinned.example"},
			{"scram", Config{Auth: Auth{Mechanism: AuthSCRAMSHA512, SCRAM: SCRAMAuth{User: "u", Password: "p"}}}, "SCRAM-SHA-512", false, ""},
			{"scram over tls", Config{TLS: true, Auth: Auth{Mechanism: AuthSCRAMSHA512, SCRAM: SCRAMAuth{User: "u", Password: "p"}}}, "SCRAM-SHA-512", true, ""},
			{"msk iam implies tls", Config{Auth: Auth{Mechanism: AuthMSKIAM, IAM: IAMAuth{Credentials: staticCreds("AKID", "s", "")}}}, "AWS_MSK_IAM", true, ""},
			{"msk iam with tls config", Config{TLSConfig: roots, Auth: Auth{Mechanism: AuthMSKIAM, IAM: IAMAuth{Credentials: staticCreds("AKID", "s", "")}}}, "AWS_MSK_IAM", true, "pinned.example"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.cfg.Brokers = brokers
				p, err := New(c.cfg)
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				defer p.Close()
				mechs, _ := p.cl.OptValue(kgo.SASL).([]sasl.Mechanism)
				switch {
				case c.mech == "" && len(mechs) != 0:
					t.Errorf("SASL configured: %v", mechs[0].Name())
				case c.mech != "" && (len(mechs) != 1 || mechs[0].Name() != c.mech):
					t.Errorf("SASL = %v, want %s", mechs, c.mech)
				}
				if got := p.cl.OptValue(kgo.DialTLS); got != c.tls {
					t.Errorf("TLS = %v, want %v", got, c.tls)
				}
				if c.tlsName != "" {
					got := p.cl.OptValue(kgo.DialTLSConfig).(*tls.Config)
					if got == roots {
						t.Error("the caller's tls.Config is used directly; it must be cloned")
					}
					if got.ServerName != c.tlsName || got.MinVersion != tls.VersionTLS13 {
						t.Errorf("tls config = %+v", got)
					}
				}
			})
		}
	})
}

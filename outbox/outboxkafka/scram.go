package outboxkafka

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/spillway-dev/spillway/outbox"
)

// SCRAMRefreshInterval is the least time between two re-reads of SCRAM
// credentials (SCRAMAuth.Refresh): a burst of refused connections after a
// rotation costs one read, and a password that is wrong everywhere costs
// one read per interval, not one per connection attempt.
const SCRAMRefreshInterval = 30 * time.Second

// scramSource hands franz-go the current SCRAM credentials on every
// connection and re-reads them once after the broker refused them.
type scramSource struct {
	refresh func(context.Context) (SCRAMAuth, error)
	clock   outbox.Clock

	mu          sync.Mutex
	cur         SCRAMAuth
	stale       bool
	lastRefresh time.Time
	refreshErr  error
}

func newSCRAMSource(a SCRAMAuth, clock outbox.Clock) *scramSource {
	return &scramSource{refresh: a.Refresh, clock: clock, cur: a}
}

func (s *scramSource) mechanism() sasl.Mechanism {
	return scram.Sha512(s.auth)
}

// auth is franz-go's per-connection credentials callback. After a refusal
// it re-reads the credentials first; if the read fails the old ones are
// used and the error is kept for the next refusal to report.
func (s *scramSource) auth(ctx context.Context) (scram.Auth, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stale {
		s.stale = false
		s.lastRefresh = s.clock.Now()
		fresh, err := s.refresh(ctx)
		switch {
		case err != nil:
			s.refreshErr = err
		case fresh.User == "" || fresh.Password == "":
			s.refreshErr = errors.New("re-read SCRAM credentials lack a user or password")
		default:
			s.cur.User, s.cur.Password, s.refreshErr = fresh.User, fresh.Password, nil
		}
	}
	return scram.Auth{User: s.cur.User, Pass: s.cur.Password}, nil
}

// refused records that a broker refused the credentials. It reports whether
// the next connection will re-read them: not without Refresh, and not
// within SCRAMRefreshInterval of the last re-read (one per failure burst).
func (s *scramSource) refused() bool {
	if s == nil || s.refresh == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stale {
		return true
	}
	if !s.lastRefresh.IsZero() && s.clock.Now().Sub(s.lastRefresh) < SCRAMRefreshInterval {
		return false
	}
	s.stale = true
	return true
}

// pending reports whether the next connection re-reads the credentials.
func (s *scramSource) pending() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stale
}

// saslAuthenticateKey is the Kafka API key of SaslAuthenticate.
var saslAuthenticateKey = int16(kmsg.SASLAuthenticate)

// OnBrokerE2E implements kgo.HookBrokerE2E. A SASL exchange the broker cut
// short counts as a refusal: brokers answer bad credentials with
// SASL_AUTHENTICATION_FAILED, which the publisher sees in its errors, but
// some close the connection instead.
func (s *scramSource) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key == saslAuthenticateKey && e2e.Err() != nil {
		s.refused()
	}
}

// lastRefreshErr is the error of the last re-read, nil if it worked.
func (s *scramSource) lastRefreshErr() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshErr
}

// isAuthFailure reports whether err is the broker refusing SASL
// credentials.
func isAuthFailure(err error) bool {
	return errors.Is(err, kerr.SaslAuthenticationFailed)
}

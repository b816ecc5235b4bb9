package outboxkafka

import (
	"context"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha512"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/spillway-dev/spillway/outbox"
)

// secretStore is a stand-in for the Secrets Manager secret: Refresh reads
// it and counts the reads.
type secretStore struct {
	mu    sync.Mutex
	pass  string
	reads atomic.Int32
}

func (s *secretStore) set(pass string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pass = pass
}

func (s *secretStore) read(context.Context) (SCRAMAuth, error) {
	s.reads.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	return SCRAMAuth{User: "relay", Password: s.pass}, nil
}

// rotatePassword changes the SCRAM-SHA-512 password of user in the cluster,
// as an operator rotating the MSK secret does, through a client that is
// still authenticated with the old one.
func rotatePassword(t *testing.T, c *kfake.Cluster, dial kgo.Opt, user, old, pass string) {
	t.Helper()
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), dial, kgo.SASL(newSCRAMSource(SCRAMAuth{User: user, Password: old}, outbox.SystemClock{}).mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	salt := make([]byte, 32)
	_, _ = rand.Read(salt)
	salted, err := pbkdf2.Key(sha512.New, pass, salt, 4096, sha512.Size)
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = user, 2, 4096, salt, salted
	req.Upsertions = append(req.Upsertions, up)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, admin)
	if err != nil || len(resp.Results) != 1 || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("rotate the password: %+v, %v", resp, err)
	}
}

func TestSCRAM(t *testing.T) {
	t.Parallel()
	// After the secret was rotated, a relay holding the old password re-reads
	// the secret once when the broker refuses it, and reconnects.
	t.Run("RotatedSecret_IsReadAgainOnceAndTheRelayReconnects", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			c, dial := newVirtualCluster(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "relay", "s3cret"), kfake.SeedTopics(1, "orders"))
			secret := &secretStore{pass: "s3cret"}
			withSecret := func(cfg *Config) {
				cfg.Auth = Auth{Mechanism: AuthSCRAMSHA512, SCRAM: SCRAMAuth{User: "relay", Password: "s3cret", Refresh: secret.read}}
				cfg.ExtraOpts = append(cfg.ExtraOpts, dial)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			msg := message(t, 1, "orders", []byte("k"), []byte("v"), nil, nil)

			// The password changes in Kafka, then in the secret.
			rotatePassword(t, c, dial, "relay", "s3cret", "n3w-s3cret")
			secret.set("n3w-s3cret")

			// An execution environment that read the secret before the rotation.
			p := newPublisher(t, c, withSecret)
			if err := p.Init(ctx); err != nil {
				t.Fatalf("Init after the rotation: %v", err)
			}
			if n, err := p.Publish(ctx, []outbox.Message{msg}); n != 1 || err != nil {
				t.Fatalf("Publish after the rotation = %d, %v", n, err)
			}
			if got := secret.reads.Load(); got != 1 {
				t.Fatalf("secret read %d times, want once", got)
			}
		})
	})

	// A password that is wrong in the secret too costs one read per interval,
	// not one per connection attempt.
	t.Run("WrongSecret_IsReadAtMostOncePerInterval", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			c, dial := newVirtualCluster(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "relay", "s3cret"), kfake.SeedTopics(1, "orders"))
			secret := &secretStore{pass: "still-wrong"}
			p := newPublisher(t, c, func(cfg *Config) {
				cfg.Auth = Auth{Mechanism: AuthSCRAMSHA512, SCRAM: SCRAMAuth{User: "relay", Password: "wrong", Refresh: secret.read}}
				cfg.ExtraOpts = append(cfg.ExtraOpts, dial)
			})
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			for range 3 {
				if err := p.Init(ctx); err == nil {
					t.Fatal("Init with a wrong secret succeeded")
				}
			}
			if got := secret.reads.Load(); got != 1 {
				t.Fatalf("secret read %d times in one burst, want once", got)
			}
			time.Sleep(SCRAMRefreshInterval)
			secret.set("s3cret")
			ctx, cancel = context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			if err := p.Init(ctx); err != nil {
				t.Fatalf("Init once the secret is right again: %v", err)
			}
			if got := secret.reads.Load(); got != 2 {
				t.Fatalf("secret read %d times, want twice", got)
			}
		})
	})
}
